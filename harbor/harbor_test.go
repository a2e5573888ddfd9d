package harbor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harbor"
	"github.com/proctor-evals/proctor/sandbox"
)

func TestLoadTasks(t *testing.T) {
	t.Parallel()
	samples, err := harbor.Load(context.Background(), "testdata/tasks")
	require.NoError(t, err)
	ids := make([]string, len(samples))
	for i, s := range samples {
		ids[i] = s.ID
	}
	require.Equal(t, []string{"broken-solution", "hello", "json-reward", "no-reward"}, ids, "directory names, in order")

	hello := samples[1]
	require.Equal(t, "Create a file called hello.txt in /app with \"Hello, world!\" as its content.\n", hello.Input.Instruction)
	require.Equal(t, map[string]string{"author_name": "proctor tests", "difficulty": "easy", "category": "file-operations", "tags": "trivial,shell"}, hello.Tags)
	require.Equal(t, time.Minute, hello.Input.AgentTimeout())
	require.Equal(t, time.Minute, hello.Input.VerifierTimeout())
	require.Equal(t, 5*time.Minute, hello.Input.BuildTimeout())
	spec := harbor.Spec(hello)
	require.Regexp(t, `^proctor-harbor/hello:[0-9a-f]{16}$`, spec.Image)
	if diff := cmp.Diff(sandbox.Spec{Image: spec.Image, WorkDir: "/app", Limits: sandbox.Limits{CPUs: 1, MemoryBytes: 256 << 20}}, spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}

	broken := samples[0]
	require.Equal(t, map[string]string{"difficulty": "medium", "category": "arithmetic", "keywords": "oracle,broken"}, broken.Tags)
	require.Equal(t, harbor.DefaultBuildTimeout, broken.Input.BuildTimeout(), "the default where task.toml says nothing")
	require.Equal(t, "proctor/broken-solution", broken.Input.Config.Task.Name)
	require.Equal(t, "3", samples[2].Tags["points"])
	require.Equal(t, map[string]string{"CHECK_MODE": "strict"}, samples[2].Input.Config.Verifier.Env)

	// One task directory loads alone; its image tag is the same.
	one, err := harbor.Load(context.Background(), "testdata/tasks/hello")
	require.NoError(t, err)
	require.Len(t, one, 1)
	require.Equal(t, spec.Image, one[0].Input.Image)
}

// An environment that changes gets a new image tag, so a stale image is
// never run.
func TestImageTagFollowsTheEnvironment(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "hello")
	require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/tasks/hello")))
	before, err := harbor.LoadTask(dir)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "environment", "data.txt"), []byte("x"), 0o644))
	after, err := harbor.LoadTask(dir)
	require.NoError(t, err)
	require.NotEqual(t, before.Image, after.Image)
}

// A task.toml that does not decode stops the dataset with an error naming
// the file and the line.
func TestUnreadableConfigNamesFileAndLine(t *testing.T) {
	t.Parallel()
	_, err := harbor.Load(context.Background(), "testdata/bad")
	var re *dataset.RowError
	require.ErrorAs(t, err, &re)
	require.Equal(t, filepath.Join("testdata", "bad", "unreadable-config", "task.toml"), re.File)
	require.Equal(t, 8, re.Line, "memory_mb's line")
	require.Contains(t, err.Error(), "testdata/bad/unreadable-config/task.toml:8")
	require.Contains(t, err.Error(), "memory_mb")

	for name, tc := range map[string]struct {
		toml string
		line int
		want string
	}{
		"syntax":           {"version = \"1.0\"\n[metadata\ndifficulty = \"easy\"\n", 3, "task.toml:3"}, // where the decoder noticed
		"unterminated":     {"[verifier]\ntimeout_sec = 1\nenv = { A = \"b }\n", 3, "task.toml:3"},
		"negative timeout": {"[agent]\ntimeout_sec = -5.0\n", 0, "agent.timeout_sec = -5: must be a number ≥ 0"},
		"duplicate key":    {"[agent]\ntimeout_sec = 1.0\ntimeout_sec = 2.0\n", 3, "task.toml:3"},
	} {
		dir := filepath.Join(t.TempDir(), "task")
		require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/tasks/hello")))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "task.toml"), []byte(tc.toml), 0o644))
		_, err := harbor.LoadTask(dir)
		var re *dataset.RowError
		require.ErrorAs(t, err, &re, name)
		require.Equal(t, tc.line, re.Line, "%s: %v", name, err)
		require.Contains(t, err.Error(), tc.want, name)
	}

	// A missing task.toml inside a task directory is named too.
	_, err = harbor.LoadTask(t.TempDir())
	require.ErrorAs(t, err, &re)
	require.True(t, errors.Is(err, os.ErrNotExist))
}

func TestParseReward(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, data string
		reward     float64
		scores     map[string]float64
		err        string
	}{
		{name: "reward.txt", data: "1\n", reward: 1},
		{name: "reward.txt", data: " 0.75 ", reward: 0.75},
		{name: "reward.txt", data: "", err: "empty reward file"},
		{name: "reward.txt", data: "pass", err: `reward "pass" is not a finite number`},
		{name: "reward.txt", data: "NaN", err: "not a finite number"},
		{name: "reward.txt", data: "1\n0", err: "not a finite number"},
		{name: "reward.json", data: `{"reward": 1.0, "tests": 3}`, reward: 1, scores: map[string]float64{"reward": 1, "tests": 3}},
		{name: "reward.json", data: `{"accuracy": 0.5}`, reward: 0.5, scores: map[string]float64{"accuracy": 0.5}},
		{name: "reward.json", data: `{"a": 1, "b": 0}`, err: `no "reward" among 2 entries (a, b)`},
		{name: "reward.json", data: `{"reward": "1"}`, err: `"reward" = 1 is not a number`},
		{name: "reward.json", data: `{"reward": [1]}`, err: "is not a number"},
		{name: "reward.json", data: `{}`, err: "no reward"},
		{name: "reward.json", data: `[1]`, err: "not a JSON object"},
		{name: "reward.json", data: `{"reward": 1} {"reward": 0}`, err: "more than one JSON value"},
		{name: "reward.json", data: `{"reward": 1e999}`, err: "not a finite number"},
	} {
		r, s, err := harbor.ParseReward(tc.name, []byte(tc.data))
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "%s %q", tc.name, tc.data)
			continue
		}
		require.NoError(t, err, "%s %q", tc.name, tc.data)
		require.Equal(t, tc.reward, r)
		require.Equal(t, tc.scores, s)
	}
}
