// Package harbor runs Harbor tasks as they are: a dataset, a judge and a
// harness. It stands above the dataset, harness, judge and sandbox
// packages, and no package of the engine imports it. A Harbor task
// (https://harborframework.com/docs/task-format) is a directory:
//
//	task.toml           configuration and metadata
//	instruction.md      the prompt the agent gets
//	environment/        the environment, built from environment/Dockerfile
//	tests/test.sh       the verifier: writes /logs/verifier/reward.txt or reward.json
//	solution/solve.sh   the reference solution, the task's oracle
//
// [Load] (or [Dataset]) turns a directory of tasks into samples whose
// input is a [Task] and whose tags are the task's metadata; [Task.Spec] is
// its sandbox (the image [Build] makes from the Dockerfile, the CPU and
// memory limits of task.toml); [Verifier] is the judge that runs the
// task's tests in the episode's sandbox and reads its reward, failing
// closed; [Solution] is the harness that runs solve.sh, so that a run
// with it as the agent checks every task is solvable and its verifier
// sound before any agent runs.
//
// The package links a TOML decoder (github.com/BurntSushi/toml: no
// dependencies of its own, errors with line numbers); programs that
// import only eval link none of it.
package harbor

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/sandbox"
)

// The paths inside the sandbox where Harbor puts a task's files and where
// its verifier writes the reward.
const (
	TestsDir    = "/tests"
	SolutionDir = "/solution"
	VerifierDir = "/logs/verifier"
)

// Task is one Harbor task: a sample's input.
type Task struct {
	Dir         string // the task's directory
	Name        string // its directory's name: the sample ID
	Instruction string // instruction.md
	Config      Config // task.toml
	// Image is the image the environment runs in: built from
	// environment/Dockerfile and tagged by its contents ([Build]), or
	// task.toml's docker_image when there is no Dockerfile.
	Image string
	// WorkDir is the Dockerfile's last WORKDIR (the directory the agent
	// starts in), "" when it sets none.
	WorkDir string
}

// Config is what proctor reads of task.toml. Other keys are allowed (the
// format grows) and ignored; a key of the wrong type is an error.
type Config struct {
	Version       string         `toml:"version"`
	SchemaVersion string         `toml:"schema_version"`
	Task          TaskInfo       `toml:"task"`
	Metadata      map[string]any `toml:"metadata"`
	Verifier      struct {
		TimeoutSec float64           `toml:"timeout_sec"`
		Env        map[string]string `toml:"env"`
	} `toml:"verifier"`
	Agent struct {
		TimeoutSec float64 `toml:"timeout_sec"`
	} `toml:"agent"`
	Solution struct {
		Env map[string]string `toml:"env"`
	} `toml:"solution"`
	Environment struct {
		BuildTimeoutSec float64 `toml:"build_timeout_sec"`
		DockerImage     string  `toml:"docker_image"`
		CPUs            float64 `toml:"cpus"`
		MemoryMB        int64   `toml:"memory_mb"`
		StorageMB       int64   `toml:"storage_mb"`
		AllowInternet   *bool   `toml:"allow_internet"`
	} `toml:"environment"`
}

// TaskInfo is task.toml's [task] table (schema 1.1 and later).
type TaskInfo struct {
	Name        string   `toml:"name"`
	Description string   `toml:"description"`
	Keywords    []string `toml:"keywords"`
}

// The timeouts when task.toml gives none.
const (
	DefaultAgentTimeout    = 10 * time.Minute
	DefaultVerifierTimeout = 10 * time.Minute
	DefaultBuildTimeout    = 10 * time.Minute
)

func seconds(s float64, def time.Duration) time.Duration {
	if s <= 0 {
		return def
	}
	return time.Duration(s * float64(time.Second))
}

// AgentTimeout is [agent] timeout_sec: how long the agent (or the
// solution) may run.
func (t Task) AgentTimeout() time.Duration {
	return seconds(t.Config.Agent.TimeoutSec, DefaultAgentTimeout)
}

// VerifierTimeout is [verifier] timeout_sec: how long test.sh may run.
func (t Task) VerifierTimeout() time.Duration {
	return seconds(t.Config.Verifier.TimeoutSec, DefaultVerifierTimeout)
}

// BuildTimeout is [environment] build_timeout_sec.
func (t Task) BuildTimeout() time.Duration {
	return seconds(t.Config.Environment.BuildTimeoutSec, DefaultBuildTimeout)
}

// Spec is the task's sandbox: its image and working directory, the
// CPUs and memory of task.toml's [environment], and the network when it
// says allow_internet = true (proctor's default is none, where Harbor's
// is the internet). storage_mb is not applied: the Docker driver's disk
// limit is a tmpfs that counts against memory, so a task's usual 10 GiB
// would be 10 GiB of RAM; set Limits.DiskBytes yourself to want one.
func (t Task) Spec() sandbox.Spec {
	e := t.Config.Environment
	s := sandbox.Spec{Image: t.Image, WorkDir: t.WorkDir}
	s.Limits.CPUs = e.CPUs
	s.Limits.MemoryBytes = e.MemoryMB << 20
	s.Network = e.AllowInternet != nil && *e.AllowInternet
	return s
}

// Spec returns the sandbox of a sample of a Harbor dataset: for
// eval.Eval's Sandbox field.
func Spec(s dataset.Sample[Task]) sandbox.Spec { return s.Input.Spec() }

// Dataset is a directory of Harbor tasks: each subdirectory holding a
// task.toml is one, and so is Dir itself if it holds one. Samples are in
// name order; their IDs are the directories' names.
type Dataset struct {
	Dir string
}

// Samples implements dataset.Dataset.
func (d Dataset) Samples(ctx context.Context) iter.Seq2[dataset.Sample[Task], error] {
	return func(yield func(dataset.Sample[Task], error) bool) {
		dirs, err := taskDirs(d.Dir)
		if err != nil {
			yield(dataset.Sample[Task]{}, err)
			return
		}
		for _, dir := range dirs {
			if err := ctx.Err(); err != nil {
				yield(dataset.Sample[Task]{}, err)
				return
			}
			t, err := LoadTask(dir)
			if err != nil {
				yield(dataset.Sample[Task]{}, err)
				return
			}
			if !yield(t.Sample(), nil) {
				return
			}
		}
	}
}

// Load reads the tasks of dir into memory.
func Load(ctx context.Context, dir string) (dataset.Slice[Task], error) {
	return dataset.Collect(ctx, dataset.Dataset[Task](Dataset{Dir: dir}))
}

func taskDirs(dir string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(dir, "task.toml")); err == nil {
		return []string{dir}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("harbor: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(p, "task.toml")); err == nil {
			dirs = append(dirs, p)
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("harbor: %s holds no task (no task.toml in it or its subdirectories)", dir)
	}
	return dirs, nil
}

// Sample is t as a sample: its name as the ID, its metadata as tags.
func (t Task) Sample() dataset.Sample[Task] {
	return dataset.Sample[Task]{ID: t.Name, Input: t, Tags: t.Tags()}
}

// Tags are the task's metadata as tags: each string, number or boolean
// of [metadata] under its key, a list of them joined by commas
// ("tags" = "trivial,golang"), and [task] keywords as "keywords". Nested
// tables are left out.
func (t Task) Tags() map[string]string {
	tags := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(t.Config.Metadata)) {
		if v, ok := tagValue(t.Config.Metadata[k]); ok {
			tags[k] = v
		}
	}
	if kw := t.Config.Task.Keywords; len(kw) > 0 {
		tags["keywords"] = strings.Join(kw, ",")
	}
	if len(tags) == 0 {
		return nil
	}
	return tags
}

func tagValue(v any) (string, bool) {
	switch v := v.(type) {
	case string, int64, float64, bool:
		return fmt.Sprint(v), true
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := tagValue(e)
			if !ok {
				return "", false
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), true
	}
	return "", false
}

// LoadTask reads the task in dir. A task.toml that cannot be read or
// decoded is a *dataset.RowError naming the file and, where the decoder
// says, the line.
func LoadTask(dir string) (Task, error) {
	t := Task{Dir: dir, Name: filepath.Base(filepath.Clean(dir))}
	if err := dataset.CheckID(t.Name); err != nil {
		return Task{}, fmt.Errorf("harbor: task %s: %w", dir, err)
	}
	cfgPath := filepath.Join(dir, "task.toml")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return Task{}, &dataset.RowError{File: cfgPath, Err: err}
	}
	if t.Config, err = ParseConfig(data); err != nil {
		re := &dataset.RowError{File: cfgPath, Err: err}
		var pe toml.ParseError
		if m := typeErrorLine.FindStringSubmatch(err.Error()); m != nil {
			// A value of the wrong type: the decoder says the line in
			// its message only.
			re.Line, _ = strconv.Atoi(m[1])
		} else if errors.As(err, &pe) {
			re.Line, re.Column, re.Err = pe.Position.Line, pe.Position.Col, errors.New(pe.Message)
			if pe.Usage != "" {
				re.Err = fmt.Errorf("%s (%s)", pe.Message, strings.TrimSpace(pe.Usage))
			}
		}
		return Task{}, re
	}
	instr, err := os.ReadFile(filepath.Join(dir, "instruction.md"))
	if err != nil {
		return Task{}, fmt.Errorf("harbor: task %s: %w", t.Name, err)
	}
	t.Instruction = string(instr)
	if _, err := os.Stat(filepath.Join(dir, "tests", "test.sh")); err != nil {
		return Task{}, fmt.Errorf("harbor: task %s has no verifier: %w", t.Name, err)
	}
	dockerfile := filepath.Join(dir, "environment", "Dockerfile")
	switch df, err := os.ReadFile(dockerfile); {
	case err == nil:
		sum, err := treeHash(filepath.Join(dir, "environment"))
		if err != nil {
			return Task{}, fmt.Errorf("harbor: task %s: %w", t.Name, err)
		}
		t.Image = "proctor-harbor/" + imageName(t.Name) + ":" + sum[:16]
		t.WorkDir = lastWorkDir(df)
	case errors.Is(err, fs.ErrNotExist) && t.Config.Environment.DockerImage != "":
		t.Image = t.Config.Environment.DockerImage
	default:
		return Task{}, fmt.Errorf("harbor: task %s has no environment: %w", t.Name, err)
	}
	return t, nil
}

var typeErrorLine = regexp.MustCompile(`^toml: line (\d+) `)

// ParseConfig decodes a task.toml. Unknown keys are allowed; a value of
// the wrong type, a negative timeout or limit, is an error.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	if _, err := toml.Decode(string(data), &c); err != nil {
		return Config{}, err
	}
	e := c.Environment
	for _, v := range []struct {
		name string
		v    float64
	}{{"agent.timeout_sec", c.Agent.TimeoutSec}, {"verifier.timeout_sec", c.Verifier.TimeoutSec},
		{"environment.build_timeout_sec", e.BuildTimeoutSec}, {"environment.cpus", e.CPUs},
		{"environment.memory_mb", float64(e.MemoryMB)}, {"environment.storage_mb", float64(e.StorageMB)}} {
		if v.v < 0 || v.v != v.v || v.v > 1e12 {
			return Config{}, fmt.Errorf("%s = %v: must be a number ≥ 0", v.name, v.v)
		}
	}
	return c, nil
}

// lastWorkDir is the last WORKDIR of a Dockerfile when it is an absolute
// path without variables; "" otherwise.
func lastWorkDir(dockerfile []byte) string {
	dir := ""
	sc := bufio.NewScanner(strings.NewReader(string(dockerfile)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && strings.EqualFold(f[0], "WORKDIR") {
			if strings.HasPrefix(f[1], "/") && !strings.Contains(f[1], "$") {
				dir = f[1]
			} else {
				dir = ""
			}
		}
	}
	return dir
}

// imageName makes a task's name a valid image repository component.
func imageName(name string) string {
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	s := strings.Trim(string(b), "-_.")
	if s == "" {
		s = "task"
	}
	return s
}

// treeHash is the SHA-256 of the tree at dir: each file's path, mode and
// contents, in walk order. A changed environment gets a new image tag.
func treeHash(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", filepath.ToSlash(rel), info.Mode())
		if !d.Type().IsRegular() {
			if d.Type()&fs.ModeSymlink != 0 {
				l, err := os.Readlink(p)
				if err != nil {
					return err
				}
				io.WriteString(h, l)
			}
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%d\x00", info.Size())
		_, err = io.Copy(h, f)
		return err
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// Build builds the environment image of each task that has a
// Dockerfile, with build (docker.BuildImage, or a Kubernetes cluster's
// builder) under the task's build timeout. Tasks whose image already
// builds to the same tag (the same environment) are built once.
func Build(ctx context.Context, tasks []Task, build func(ctx context.Context, contextDir, tag string) error) error {
	done := map[string]bool{}
	for _, t := range tasks {
		env := filepath.Join(t.Dir, "environment")
		if _, err := os.Stat(filepath.Join(env, "Dockerfile")); err != nil || done[t.Image] {
			continue
		}
		bctx, cancel := context.WithTimeout(ctx, t.BuildTimeout())
		err := build(bctx, env, t.Image)
		cancel()
		if err != nil {
			return fmt.Errorf("harbor: task %s: building %s: %w", t.Name, t.Image, err)
		}
		done[t.Image] = true
	}
	return nil
}

// Tasks returns the inputs of samples.
func Tasks(samples dataset.Slice[Task]) []Task {
	ts := make([]Task, len(samples))
	for i, s := range samples {
		ts[i] = s.Input
	}
	return ts
}
