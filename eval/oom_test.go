package eval_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/history"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/driver"
	"github.com/proctor-evals/proctor/sandbox/local"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
	"github.com/proctor-evals/proctor/sink"
)

// An agent killed by the out-of-memory killer did not fail: its sandbox's
// memory limit ended it. These tests fail if such an episode reads as a
// fail, whether its harness returns the sandbox's error or swallows it
// and reports the exit code for the judge to weigh.

// allocate holds 200 MB in a shell variable (past the 32 MiB limit of
// oomSpec).
var allocate = sandbox.Cmd{Args: []string{"sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}`}, Timeout: time.Minute}

// checkOOMIsRetriedNeverFailed runs two samples whose agent allocates
// past its limit on every attempt, one through harness.Command, one
// through a harness that ignores the error, each judged "pass iff exit
// 0": both must end as errors from sandbox/oom, after their retry.
func checkOOMIsRetriedNeverFailed(t *testing.T, p *sandbox.Provider, spec sandbox.Spec) {
	t.Helper()
	spec.Limits.MemoryBytes = 32 << 20
	var attempts atomic.Int32
	command := harness.Command[string]{Cmd: func(*harness.Episode[string]) sandbox.Cmd { return allocate }}
	h := harness.Func[string, harness.CommandOutput](func(ctx context.Context, ep *harness.Episode[string]) (harness.CommandOutput, error) {
		attempts.Add(1)
		out, err := command.Run(ctx, ep)
		if ep.Sample.ID == "swallows" {
			return out, nil // the exit code is the agent's failure, it says
		}
		return out, err
	})
	j := judge.Func[string, harness.CommandOutput](func(_ context.Context, _ *harness.Episode[string], out harness.CommandOutput) (judge.Verdict, error) {
		return judge.Verdict{Pass: out.ExitCode == 0, Reason: fmt.Sprintf("exit %d", out.ExitCode)}, nil
	})
	mem := &memSink{}
	e := &eval.Eval[string, harness.CommandOutput]{Name: "oom",
		Dataset: dataset.Slice[string]{{ID: "returns"}, {ID: "swallows"}},
		Harness: h, Judge: j, Sandbox: func(dataset.Sample[string]) sandbox.Spec { return spec }}
	rep, err := e.Run(context.Background(), eval.Config{Sandbox: p, Retries: 1, Backoff: time.Millisecond, Sinks: []sink.Sink{mem}, Quiet: true})
	require.NoError(t, err)
	require.Len(t, mem.recs, 2)
	for _, r := range mem.recs {
		require.Equal(t, sink.Error, r.Status, "%s: an OOM kill read as %s (%s)", r.SampleID, r.Status, r.Reason)
		require.Equal(t, sink.KindSandbox, r.ErrorKind, r.SampleID)
		require.Equal(t, "sandbox/oom", r.ErrorSource, r.SampleID)
		require.Contains(t, r.Error, "out-of-memory killer", r.SampleID)
		require.Contains(t, r.Error, "memory limit 32 MiB", r.SampleID)
		require.Equal(t, 1, r.Attempt, "%s: retried once, as any infrastructure fault", r.SampleID)
	}
	require.Equal(t, int32(4), attempts.Load(), "two samples, each tried twice")
	require.Zero(t, rep.Failed, "no OOM kill counts as a fail")
}

func TestOOMIsRetriedNeverFailedLocal(t *testing.T) {
	t.Parallel()
	p := local.New(&local.Options{Dir: t.TempDir()})
	if !p.Guarantees().OOM {
		if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" {
			t.Fatal("PROCTOR_REQUIRE_TOOLS=1 but the local driver enforces no memory limit here (root and writable cgroups needed)")
		}
		t.Skip("the local driver enforces no memory limit here (root and writable cgroups needed)")
	}
	checkOOMIsRetriedNeverFailed(t, p, sandbox.Spec{})
}

// A driver's ErrOOM ends the episode as an error even when the harness
// swallows it, on every host: the Fake, wrapped to report an OOM kill for
// the command "oom".
func TestOOMIsRetriedNeverFailed(t *testing.T) {
	t.Parallel()
	p := sandbox.NewProvider(oomDriver{&sandboxtest.Fake{Exec: func(context.Context, sandboxtest.Files, sandbox.Cmd) (sandbox.Result, error) {
		return sandbox.Result{ExitCode: 137}, nil
	}}}, nil)
	checkOOMIsRetriedNeverFailed(t, p, sandbox.Spec{})
}

// oomDriver reports every command of its sandboxes as ended by the OOM
// killer, as a driver claiming memory limits does.
type oomDriver struct{ driver.Provider }

func (d oomDriver) Provision(ctx context.Context, spec sandbox.Spec) (driver.Environment, error) {
	env, err := d.Provider.Provision(ctx, spec)
	return oomEnv{env}, err
}

type oomEnv struct{ driver.Environment }

func (e oomEnv) Fork(ctx context.Context) (driver.Sandbox, error) {
	sb, err := e.Environment.Fork(ctx)
	return oomSandbox{sb}, err
}

type oomSandbox struct{ driver.Sandbox }

func (s oomSandbox) Exec(ctx context.Context, cmd sandbox.Cmd, stdout, stderr io.Writer) (driver.Exit, error) {
	exit, err := s.Sandbox.Exec(ctx, cmd, stdout, stderr)
	if err == nil && strings.Contains(strings.Join(cmd.Args, " "), "head -c 200000000") {
		return exit, sandbox.ErrOOM
	}
	return exit, err
}

// A verifier the OOM killer ended gave no verdict: the episode is an
// error from sandbox/oom, never a fail, though its test command "exited
// 137".
func TestOOMInTheVerifierIsAnError(t *testing.T) {
	t.Parallel()
	p := sandbox.NewProvider(oomDriver{&sandboxtest.Fake{Exec: func(context.Context, sandboxtest.Files, sandbox.Cmd) (sandbox.Result, error) {
		return sandbox.Result{ExitCode: 137}, nil
	}}}, nil)
	mem := &memSink{}
	e := &eval.Eval[string, string]{Name: "oom-verifier", Dataset: samples("x"),
		Harness: harness.Func[string, string](func(context.Context, *harness.Episode[string]) (string, error) { return "done", nil }),
		Judge: judge.Func[string, string](func(ctx context.Context, ep *harness.Episode[string], _ string) (judge.Verdict, error) {
			res, _ := ep.Sandbox.Exec(ctx, allocate) // a verifier that reads only the exit code
			return judge.Verdict{Pass: res.ExitCode == 0}, nil
		})}
	_, err := e.Run(context.Background(), eval.Config{Sandbox: p, Retries: -1, Sinks: []sink.Sink{mem}, Quiet: true})
	require.NoError(t, err)
	require.Len(t, mem.recs, 1)
	require.Equal(t, sink.Error, mem.recs[0].Status, mem.recs[0].Reason)
	require.Equal(t, "sandbox/oom", mem.recs[0].ErrorSource)
}

// needsMemoryDriver reports a command that allocates (allocate's) as
// ended by the OOM killer in an environment whose memory limit is below
// need, as a driver enforcing memory limits does.
type needsMemoryDriver struct {
	driver.Provider
	need int64
}

func (d needsMemoryDriver) Provision(ctx context.Context, spec sandbox.Spec) (driver.Environment, error) {
	env, err := d.Provider.Provision(ctx, spec)
	if err != nil || spec.Limits.MemoryBytes >= d.need {
		return env, err
	}
	return oomEnv{env}, nil
}

// With Config.OOMRetryMemory, an episode the OOM killer ended is retried
// with its memory limit scaled, once per kill; its record names the limit
// its final attempt had, and every other episode keeps the limit asked.
// Without it, the retries run under the same limit and end in sandbox/oom.
func TestOOMRetryScalesTheMemoryLimit(t *testing.T) {
	t.Parallel()
	const limit = 32 << 20
	fake := &sandboxtest.Fake{Exec: func(context.Context, sandboxtest.Files, sandbox.Cmd) (sandbox.Result, error) {
		return sandbox.Result{}, nil // exit 0, unless the OOM killer ends it (needsMemoryDriver)
	}}
	p := sandbox.NewProvider(needsMemoryDriver{fake, 4 * limit}, nil)
	run := func(factor float64) map[string]sink.Record {
		mem := &memSink{}
		e := &eval.Eval[string, harness.CommandOutput]{Name: "oom-retry", Dataset: dataset.Slice[string]{{ID: "hog"}, {ID: "light"}},
			Harness: harness.Command[string]{Cmd: func(ep *harness.Episode[string]) sandbox.Cmd {
				if ep.Sample.ID == "hog" {
					return allocate
				}
				return sandbox.Cmd{Args: []string{"true"}}
			}},
			Judge: judge.Func[string, harness.CommandOutput](func(_ context.Context, _ *harness.Episode[string], out harness.CommandOutput) (judge.Verdict, error) {
				return judge.Verdict{Pass: out.ExitCode == 0}, nil
			}),
			Sandbox: func(dataset.Sample[string]) sandbox.Spec {
				return sandbox.Spec{Image: "busybox", Limits: sandbox.Limits{MemoryBytes: limit}}
			}}
		_, err := e.Run(context.Background(), eval.Config{Sandbox: p, Retries: 3, Backoff: time.Millisecond,
			OOMRetryMemory: factor, Sinks: []sink.Sink{mem}, Quiet: true})
		require.NoError(t, err)
		recs := map[string]sink.Record{}
		for _, r := range mem.recs {
			recs[r.SampleID] = r
		}
		return recs
	}

	recs := run(2)
	hog := recs["hog"]
	require.Equal(t, sink.Pass, hog.Status, "%s %s", hog.Error, hog.Reason)
	require.Equal(t, 2, hog.Attempt, "two OOM kills (32 MiB, 64 MiB), then 128 MiB suffices")
	require.Equal(t, "memory=134217728 image=busybox", hog.Resources, "the final attempt's limit")
	require.Equal(t, "memory=33554432 image=busybox", recs["light"].Resources)

	recs = run(0)
	hog = recs["hog"]
	require.Equal(t, sink.Error, hog.Status)
	require.Equal(t, "sandbox/oom", hog.ErrorSource)
	require.Equal(t, 3, hog.Attempt)
	require.Equal(t, "memory=33554432 image=busybox", hog.Resources, "retried under the same limit")
}

// A run whose OOM-killed episode was retried with more memory asked for
// the same resources as one without the retries (the manifests agree),
// but its episodes ran with others: proctor compare warns of it and
// history marks it, as a possible cause of any difference.
func TestComparisonAcrossAnOOMRetryWithMoreMemoryWarns(t *testing.T) {
	t.Parallel()
	const limit = 32 << 20
	fake := &sandboxtest.Fake{Exec: func(context.Context, sandboxtest.Files, sandbox.Cmd) (sandbox.Result, error) {
		return sandbox.Result{}, nil
	}}
	p := sandbox.NewProvider(needsMemoryDriver{fake, 4 * limit}, nil)
	dir := t.TempDir()
	run := func(name string, factor float64) string {
		e := &eval.Eval[string, harness.CommandOutput]{Name: "oom-retry", Dataset: dataset.Slice[string]{{ID: "hog"}, {ID: "light"}},
			Harness: harness.Command[string]{Cmd: func(ep *harness.Episode[string]) sandbox.Cmd {
				if ep.Sample.ID == "hog" {
					return allocate
				}
				return sandbox.Cmd{Args: []string{"true"}}
			}},
			Judge: judge.Func[string, harness.CommandOutput](func(_ context.Context, _ *harness.Episode[string], out harness.CommandOutput) (judge.Verdict, error) {
				return judge.Verdict{Pass: out.ExitCode == 0}, nil
			}),
			Sandbox: func(dataset.Sample[string]) sandbox.Spec {
				return sandbox.Spec{Image: "busybox", Limits: sandbox.Limits{MemoryBytes: limit}}
			}}
		log := filepath.Join(dir, name+".jsonl")
		_, err := e.Run(context.Background(), eval.Config{Sandbox: p, Retries: 3, Backoff: time.Millisecond,
			OOMRetryMemory: factor, Log: log, Quiet: true})
		require.NoError(t, err)
		return log
	}
	baseLog, headLog := run("base", 0), run("head", 2)
	bm, err := manifest.Read(baseLog)
	require.NoError(t, err)
	hm, err := manifest.Read(headLog)
	require.NoError(t, err)
	require.Equal(t, bm.Resources, hm.Resources, "both asked for the same")

	c, err := report.CompareLogs(baseLog, headLog, nil)
	require.NoError(t, err)
	require.Contains(t, c.Warnings, "the runs' episodes ran in other environments: sandbox resources of the base's episodes [memory=33554432 image=busybox (2 episodes)], "+
		"of the head's [memory=134217728 image=busybox (1 episode); memory=33554432 image=busybox (1 episode)]: a possible cause of any difference, not the agent")
	same, err := report.CompareLogs(baseLog, baseLog, nil)
	require.NoError(t, err)
	require.NotContains(t, strings.Join(same.Warnings, "\n"), "other environments")

	base, _, err := history.Read(baseLog, nil)
	require.NoError(t, err)
	head, _, err := history.Read(headLog, nil)
	require.NoError(t, err)
	require.Equal(t, "memory=134217728 image=busybox; memory=33554432 image=busybox", head.EpisodeResources)
	require.Equal(t, []string{"resources"}, history.Changes(base, head))
}

func TestOOMRetryMemoryIsChecked(t *testing.T) {
	t.Parallel()
	for _, f := range []float64{0.5, 1, -2, 100} {
		_, err := limitsEval(1<<30).Run(context.Background(), eval.Config{OOMRetryMemory: f, Quiet: true})
		var ce *eval.ConfigError
		require.ErrorAs(t, err, &ce, "OOMRetryMemory %v", f)
		require.Contains(t, err.Error(), "OOMRetryMemory")
	}
}
