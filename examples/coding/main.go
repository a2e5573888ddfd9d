// Coding runs a SWE-bench-style evaluation: each task is a small
// repository with a bug, a problem statement and a test command; a stand-in
// "agent" patches the repository inside an isolated sandbox, and the judge
// runs the tests there and passes the episode when they exit 0.
//
//	go run ./examples/coding [-sandbox local|docker] [-dir DIR] [-gocache DIR]
//
// The program writes its repositories itself (in DIR, default a new
// temporary directory), so it needs no network and no checkout. Each task's
// repository is provisioned once as a sandbox environment; each of its
// three epochs gets an isolated copy-on-write fork, so that concurrent
// attempts never see each other's patches.
//
// # Two sandboxes, two task suites of the same shape
//
// With -sandbox local (the default) the sandboxes are directories on this
// host (sandbox/local: overlay forks as root, process and network
// isolation where the host allows it). The suite holds Go tasks — a
// package calc with a failing calc_test.go, judged by "go test ./..." run
// inside the sandbox — and shell tasks, judged by "sh test.sh".
//
// A local sandbox's commands get a minimal environment (PATH and HOME, the
// workspace), so every Go task's Spec.Env makes the toolchain work there:
// PATH starts with this host's GOROOT/bin, GOTOOLCHAIN=local (never
// download a toolchain), GOFLAGS=-mod=mod, GOPROXY=off (the module has no
// dependencies and the sandbox has no network: fail fast rather than hang),
// and GOCACHE, GOPATH and XDG_CONFIG_HOME outside the workspace, so that the
// tests see only the repository. GOCACHE is one directory shared by all
// sandboxes (-gocache; default in the user cache directory): the build
// cache is content-addressed and safe for concurrent use, and sharing it
// means the standard library is compiled once per machine (about 25 s on
// two cores), not once per sample. Before the run, one throwaway sandbox
// warms it, so that the samples' sandboxes do not all compile the standard
// library at once. The test command uses -count=1: a test result is never
// taken from the cache.
//
// With -sandbox docker each fork is a container (sandbox/docker) of a
// minimal image built from the host's static busybox (Debian's
// busybox-static, at /bin/busybox) with [docker.BuildBusyboxImage]. That
// image has no Go toolchain, and copying one in (hundreds of MB per image
// commit) is too slow for an example, so the Docker suite holds only the
// shell tasks; they have the same shape: a repository, a problem, a test
// command. [docker.Cleanup] removes the run's containers and images at the
// end.
//
// The stand-in agent is deterministic given the episode's seed: it applies
// the right patch with a probability that falls with the task's
// difficulty, and a plausible but wrong one otherwise, recording its steps
// as transcript events.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/docker"
	"github.com/proctor-evals/proctor/sandbox/local"
	"github.com/proctor-evals/proctor/scorer"
)

// Task is one problem: the repository at the commit with the bug, what to
// fix, and the command that must pass. Gold is the reference patch, as in
// SWE-bench: the judge does not need it (the tests decide), but it is kept
// with the task for people reading the records.
type Task struct {
	Repo    string   `json:"repo"` // template directory: the repository at the task's commit
	Problem string   `json:"problem"`
	Test    []string `json:"test"` // the test command, run in the repository's root
	Gold    Patch    `json:"gold"`
}

// Patch replaces one file.
type Patch struct {
	File    string `json:"file"`
	Content string `json:"content"`
}

// Result is what the stand-in agent did.
type Result struct {
	File  string `json:"file"`
	Kind  string `json:"kind"` // "fix" (the right patch) or "wrong"
	Bytes int    `json:"bytes"`
}

// Options configure a run.
type Options struct {
	Sandbox string // "local" or "docker"
	Dir     string // where the repositories and the log go; "" is a new temporary directory
	GoCache string // the Go build cache shared by local sandboxes; "" is the default
	Seed    uint64
}

// ErrNoBusybox is returned in docker mode when the host has no static
// busybox to build the image from.
var ErrNoBusybox = errors.New("coding: no static busybox at " + docker.BusyboxPath + " to build the Docker image from (Debian: apt-get install busybox-static)")

// BusyboxImage is the tag of the image the docker mode builds.
const BusyboxImage = "proctor-example-coding:busybox"

func main() {
	var o Options
	flag.StringVar(&o.Sandbox, "sandbox", "local", "sandbox driver: local or docker")
	flag.StringVar(&o.Dir, "dir", "", "directory for the repositories and the log (default: a new temporary directory)")
	flag.StringVar(&o.GoCache, "gocache", "", "Go build cache shared by the local sandboxes (default: proctor/examples-coding/go-build in the user cache directory)")
	flag.Uint64Var(&o.Seed, "seed", 42, "run seed")
	flag.Parse()
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "proctor-coding-")
		if err != nil {
			log.Fatal(err)
		}
		o.Dir = d
	}
	// Ctrl-C stops gracefully (run again with the same -dir to resume); a
	// second Ctrl-C exits at once.
	ctx, stop := eval.InterruptContext(context.Background())
	defer stop()
	rep, err := run(ctx, o)
	if err != nil {
		if errors.Is(err, ErrNoBusybox) {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		log.Fatal(err)
	}
	rep.WriteText(os.Stdout)
	fmt.Printf("\nlog: %s\n", filepath.Join(o.Dir, "coding.jsonl"))
}

// run builds the repositories and runs the eval with the chosen sandbox.
// It fills in o.Dir when empty.
func run(ctx context.Context, o Options) (*report.Report, error) {
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "proctor-coding-")
		if err != nil {
			return nil, err
		}
		o.Dir = d
	}
	var (
		p    *sandbox.Provider
		spec func(Task) sandbox.Spec
		defs []taskDef
	)
	switch o.Sandbox {
	case "", "local":
		env, err := goEnv(o.GoCache)
		if err != nil {
			return nil, err
		}
		lp := local.New(nil)
		p, defs = lp, append(goTasks(), shellTasks()...)
		spec = func(t Task) sandbox.Spec {
			s := sandbox.Spec{Template: t.Repo}
			if t.Test[0] == "go" {
				s.Env = env
			}
			return s
		}
		if err := warmGoCache(ctx, lp, env, o.Dir); err != nil {
			return nil, err
		}
	case "docker":
		if _, err := os.Stat(docker.BusyboxPath); err != nil {
			return nil, ErrNoBusybox
		}
		cli, err := docker.NewClient()
		if err != nil {
			return nil, err
		}
		defer cli.Close()
		if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
			return nil, fmt.Errorf("coding: no Docker engine reachable: %w", err)
		}
		if err := docker.BuildBusyboxImage(ctx, cli, BusyboxImage, docker.BusyboxPath); err != nil {
			return nil, err
		}
		dp := docker.New(cli, nil)
		defer func() {
			if err := docker.Cleanup(context.WithoutCancel(ctx), cli, dp.Driver().(*docker.Driver).RunID()); err != nil {
				log.Printf("coding: %v", err)
			}
		}()
		p, defs = dp, shellTasks()
		spec = func(t Task) sandbox.Spec { return sandbox.Spec{Image: BusyboxImage, Template: t.Repo} }
	default:
		return nil, fmt.Errorf("coding: unknown sandbox %q (want local or docker)", o.Sandbox)
	}
	data, wrong, err := writeRepos(filepath.Join(o.Dir, "repos"), defs)
	if err != nil {
		return nil, err
	}
	e := &eval.Eval[Task, Result]{
		Name:    "coding-" + o.Sandbox,
		Dataset: data,
		Sandbox: func(s dataset.Sample[Task]) sandbox.Spec { return spec(s.Input) },
		Harness: harness.Func[Task, Result](func(ctx context.Context, ep *harness.Episode[Task]) (Result, error) {
			return agent(ctx, ep, wrong[ep.Sample.ID])
		}),
		Judge: scorer.ExitCode[Task, Result](func(t Task) sandbox.Cmd {
			return sandbox.Cmd{Args: t.Test, Timeout: 2 * time.Minute}
		}),
	}
	return e.Run(ctx, eval.Config{
		Sandbox:     p,
		Epochs:      3,
		Concurrency: 2 * runtime.NumCPU(),
		Timeout:     5 * time.Minute,
		Seed:        o.Seed,
		Backoff:     100 * time.Millisecond,
		Log:         filepath.Join(o.Dir, "coding.jsonl"),
	})
}

// skill is the stand-in agent's chance of the right patch, by difficulty.
var skill = map[string]float64{"easy": 0.9, "medium": 0.6, "hard": 0.3}

// agent is a stand-in for a coding agent: it reads the file the problem is
// about, "thinks" (a model event with token usage), and writes a patch —
// the right one or a plausible wrong one, drawn from the episode's seed.
func agent(ctx context.Context, ep *harness.Episode[Task], wrong Patch) (Result, error) {
	t := ep.Sample.Input
	rng := rand.New(rand.NewPCG(ep.Seed, 0xc0de))
	start := time.Now()
	src, err := ep.Sandbox.ReadFile(ctx, t.Gold.File)
	if err != nil {
		return Result{}, err
	}
	ep.AddEvent(harness.Event{Time: start, Kind: "tool", Name: "read_file", Input: jsonString(t.Gold.File),
		Output: jsonString(fmt.Sprintf("%d bytes", len(src))), Duration: time.Since(start)})
	ep.AddEvent(harness.Event{Kind: "model", Name: "stand-in", Input: jsonString(t.Problem),
		Usage: harness.Usage{InputTokens: int64(len(t.Problem)+len(src)) / 4, OutputTokens: int64(len(t.Gold.Content)) / 4}})

	patch, kind := t.Gold, "fix"
	if rng.Float64() >= skill[ep.Sample.Tags["difficulty"]] {
		patch, kind = wrong, "wrong"
	}
	start = time.Now()
	if err := ep.Sandbox.WriteFile(ctx, patch.File, []byte(patch.Content), 0o644); err != nil {
		return Result{}, err
	}
	ep.AddEvent(harness.Event{Time: start, Kind: "tool", Name: "write_file", Input: jsonString(patch.File),
		Output: jsonString(kind), Duration: time.Since(start)})
	return Result{File: patch.File, Kind: kind, Bytes: len(patch.Content)}, nil
}

func jsonString(s string) []byte {
	return []byte(fmt.Sprintf("%q", s)) // Go's quoting of these ASCII strings is valid JSON
}

// goEnv is the environment Go needs in a local sandbox (see the package
// documentation).
func goEnv(gocache string) (map[string]string, error) {
	goroot, err := hostGOROOT()
	if err != nil {
		return nil, err
	}
	if gocache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		gocache = filepath.Join(dir, "proctor", "examples-coding", "go-build")
	}
	if gocache, err = filepath.Abs(gocache); err != nil {
		return nil, err
	}
	base := filepath.Dir(gocache)
	for _, d := range []string{gocache, filepath.Join(base, "gopath"), filepath.Join(base, "config")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return map[string]string{
		"PATH":            filepath.Join(goroot, "bin") + string(os.PathListSeparator) + path,
		"GOCACHE":         gocache,
		"GOPATH":          filepath.Join(base, "gopath"),
		"XDG_CONFIG_HOME": filepath.Join(base, "config"),
		"GOFLAGS":         "-mod=mod",
		"GOTOOLCHAIN":     "local",
		"GOPROXY":         "off",
		"GOTELEMETRY":     "off",
	}, nil
}

// hostGOROOT finds the Go toolchain on this host: the go command on PATH.
func hostGOROOT() (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("coding: the local Go tasks need the go command on PATH: %w", err)
	}
	out, err := exec.Command(goCmd, "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("coding: the local Go tasks need a Go toolchain: %s env GOROOT: %w", goCmd, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// warmGoCache compiles the test dependencies once, in a throwaway sandbox,
// so that the samples' sandboxes find the standard library in the cache.
func warmGoCache(ctx context.Context, p *sandbox.Provider, env map[string]string, dir string) error {
	repo := filepath.Join(dir, "warm")
	if err := writeFiles(repo, map[string]string{
		"go.mod":      "module example.com/warm\n\ngo 1.22\n",
		"w_test.go":   "package warm\n\nimport (\n\t\"strings\"\n\t\"testing\"\n\t\"unicode/utf8\"\n)\n\nfunc TestW(t *testing.T) { _ = strings.ToUpper(\"x\"); _ = utf8.RuneLen('x') }\n",
		"warm.go":     "package warm\n",
		"doc_test.go": "package warm\n",
	}); err != nil {
		return err
	}
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{Template: repo, Env: env})
	if err != nil {
		return fmt.Errorf("coding: warming the Go build cache: %w", err)
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"go", "test", "-count=1", "-run", "^$", "./..."}, Timeout: 10 * time.Minute})
	if err != nil {
		return fmt.Errorf("coding: warming the Go build cache: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("coding: warming the Go build cache: go test exited %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	return nil
}
