package harbor_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harbor"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/docker"
)

var (
	engineOnce sync.Once
	engineCli  *client.Client
	engineErr  string
	tasks      dataset.Slice[harbor.Task]
)

// engine returns a client to a reachable Docker engine with the fixture
// tasks' images built (FROM a busybox base built here: no registry), or
// skips (fails, with PROCTOR_REQUIRE_DOCKER=1).
func engine(t *testing.T) (*client.Client, dataset.Slice[harbor.Task]) {
	t.Helper()
	engineOnce.Do(func() {
		if _, err := os.Stat(docker.BusyboxPath); err != nil {
			engineErr = "no busybox-static binary at " + docker.BusyboxPath + " (apt-get install busybox-static): " + err.Error()
			return
		}
		cli, err := docker.NewClient()
		if err != nil {
			engineErr = "no Docker client: " + err.Error()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
			engineErr = "no Docker engine reachable: " + err.Error()
			return
		}
		if err := docker.BuildBusyboxImage(ctx, cli, "proctor-harbor-test-base:latest", docker.BusyboxPath); err != nil {
			engineErr = "building the base image: " + err.Error()
			return
		}
		ts, err := harbor.Load(ctx, "testdata/tasks")
		if err != nil {
			engineErr = err.Error()
			return
		}
		build := func(ctx context.Context, dir, tag string) error { return docker.BuildImage(ctx, cli, dir, tag) }
		if err := harbor.Build(ctx, harbor.Tasks(ts), build); err != nil {
			engineErr = "building the tasks' images: " + err.Error()
			return
		}
		engineCli, tasks = cli, ts
	})
	if engineCli == nil {
		if os.Getenv("PROCTOR_REQUIRE_DOCKER") == "1" {
			t.Fatalf("PROCTOR_REQUIRE_DOCKER=1 but %s", engineErr)
		}
		t.Skip(engineErr)
	}
	return engineCli, tasks
}

// runTasks runs the fixture tasks with h as the agent and the tasks'
// verifier as the judge, in Docker, and returns the report.
func runTasks(t *testing.T, h harness.Harness[harbor.Task, harness.CommandOutput]) *report.Report {
	t.Helper()
	cli, ts := engine(t)
	p := docker.New(cli, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		docker.Cleanup(ctx, cli, p.Driver().(*docker.Driver).RunID())
	})
	e := &eval.Eval[harbor.Task, harness.CommandOutput]{
		Name: "harbor-fixtures", Dataset: ts, Sandbox: harbor.Spec, Harness: h,
		Judge: harbor.Verifier[harness.CommandOutput]{},
	}
	rep, err := e.Run(context.Background(), eval.Config{Sandbox: p, Concurrency: 2, Quiet: true,
		Log: t.TempDir() + "/run.jsonl", Report: report.Options{MaxFailures: 100}})
	require.NoError(t, err)
	return rep
}

// outcomes maps each sample to its status, and each failure to its reason.
func outcomes(rep *report.Report) (status map[string]string, reason map[string]string) {
	status, reason = map[string]string{}, map[string]string{}
	for _, s := range rep.SampleResults() {
		switch {
		case s.Passed > 0:
			status[s.ID] = "pass"
		case s.Failed > 0:
			status[s.ID] = "fail"
		default:
			status[s.ID] = "error"
		}
	}
	for _, f := range rep.Failures {
		reason[f.SampleID] = string(f.Status) + "/" + string(f.ErrorKind) + ": " + f.Reason
	}
	return status, reason
}

// The solution as the agent: the good tasks pass, the one whose solution
// is wrong fails, the one whose verifier writes no reward errors (and is
// not retried).
func TestSolutionIsTheOracle(t *testing.T) {
	t.Parallel()
	rep := runTasks(t, harbor.Solution{})
	status, reason := outcomes(rep)
	require.Equal(t, map[string]string{"hello": "pass", "json-reward": "pass", "broken-solution": "fail", "no-reward": "error"}, status, "%v", reason)
	require.Contains(t, reason["broken-solution"], "fail/: reward 0 (reward.txt): answer.txt holds: 41")
	require.Contains(t, reason["no-reward"], "error/judge")
	require.Contains(t, reason["no-reward"], "test.sh of no-reward wrote no reward")
	require.Contains(t, reason["no-reward"], "forgot to write the reward", "the verifier's output is in the reason")
	require.Equal(t, 1, rep.Errored, "a missing reward is permanent: not retried")
}

// An agent that solves one task: it passes that one, fails the others it
// did not solve, and the task whose verifier writes no reward still errors.
func TestAgentSolvesOne(t *testing.T) {
	t.Parallel()
	agent := harness.Command[harbor.Task]{
		Files: func(ep *harness.Episode[harbor.Task]) map[string][]byte {
			return map[string][]byte{"INSTRUCTION.md": []byte(ep.Sample.Input.Instruction)}
		},
		Cmd: func(ep *harness.Episode[harbor.Task]) sandbox.Cmd {
			// A stand-in agent that knows how to say hello, and nothing else.
			return sandbox.Cmd{Args: []string{"sh", "-c", `grep -q hello.txt INSTRUCTION.md && printf 'Hello, world!\n' > hello.txt; true`},
				Timeout: ep.Sample.Input.AgentTimeout()}
		},
	}
	rep := runTasks(t, agent)
	status, reason := outcomes(rep)
	require.Equal(t, map[string]string{"hello": "pass", "json-reward": "fail", "broken-solution": "fail", "no-reward": "error"}, status, "%v", reason)
	require.Contains(t, reason["json-reward"], "reward 0 (reward.json)")
	require.Contains(t, reason["broken-solution"], "answer.txt holds: cat: can't open '/app/answer.txt'")
}

// The solution as the eval's oracle (Config.Oracle): the task whose
// solution fails is broken, left out of the agent's pass rate and named,
// and the agent's own failure on a sound task stays a failure.
func TestTheSolutionFindsBrokenTasksBeforeTheAgent(t *testing.T) {
	t.Parallel()
	cli, ts := engine(t)
	p := docker.New(cli, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		docker.Cleanup(ctx, cli, p.Driver().(*docker.Driver).RunID())
	})
	hello := harness.Command[harbor.Task]{
		Cmd: func(ep *harness.Episode[harbor.Task]) sandbox.Cmd {
			return sandbox.Cmd{Args: []string{"sh", "-c", `printf 'Hello, world!\n' > hello.txt`}, Timeout: ep.Sample.Input.AgentTimeout()}
		},
	}
	e := &eval.Eval[harbor.Task, harness.CommandOutput]{
		Name: "harbor-oracle", Dataset: ts, Sandbox: harbor.Spec, Harness: hello,
		Judge: harbor.Verifier[harness.CommandOutput]{}, Oracle: harbor.Solution{},
	}
	rep, err := e.Run(context.Background(), eval.Config{Sandbox: p, Concurrency: 2, Quiet: true, Oracle: true,
		Log: t.TempDir() + "/run.jsonl", Report: report.Options{MaxFailures: 100}})
	require.NoError(t, err)
	require.Contains(t, rep.Broken, "broken-solution", "the task whose solution fails is broken: %v", rep.Broken)
	require.NotContains(t, rep.Broken, "hello")
	require.NotContains(t, rep.Broken, "json-reward", "a sound task the agent fails is hard, not broken")
	status, _ := outcomes(rep)
	require.Equal(t, "pass", status["hello"])
	require.Equal(t, "fail", status["json-reward"])
	_, listed := status["broken-solution"]
	require.False(t, listed, "a broken task is left out of the agent's results")
}
