package docker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/docker"
	"github.com/proctor-evals/proctor/sink"
)

// An agent the OOM killer ended in a container (a process of an exec,
// which leaves the container running and its State.OOMKilled false) is
// an error from sandbox/oom, retried, never a fail: even when its harness
// swallows the error and its judge sees only exit 137.
func TestOOMIsRetriedNeverFailed(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	p := docker.New(cli, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		docker.Cleanup(ctx, cli, runID(p))
	})
	spec := sandbox.Spec{Image: testImage, Limits: sandbox.Limits{MemoryBytes: 32 << 20}}
	var attempts atomic.Int32
	h := harness.Func[string, int](func(ctx context.Context, ep *harness.Episode[string]) (int, error) {
		attempts.Add(1)
		res, _ := ep.Sandbox.Exec(ctx, sandbox.Cmd{Args: []string{"sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}`}, Timeout: time.Minute})
		return res.ExitCode, nil // swallowed: the exit code is the agent's failure, it says
	})
	j := judge.Func[string, int](func(_ context.Context, _ *harness.Episode[string], code int) (judge.Verdict, error) {
		return judge.Verdict{Pass: code == 0}, nil
	})
	var recs []sink.Record
	e := &eval.Eval[string, int]{Name: "oom", Dataset: dataset.Slice[string]{{ID: "hog"}}, Harness: h, Judge: j,
		Sandbox: func(dataset.Sample[string]) sandbox.Spec { return spec }}
	rep, err := e.Run(context.Background(), eval.Config{Sandbox: p, Retries: 1, Backoff: time.Millisecond, Quiet: true,
		Sinks: []sink.Sink{sinkFunc(func(r sink.Record) { recs = append(recs, r) })}})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	r := recs[0]
	if r.Status != sink.Error || r.ErrorSource != "sandbox/oom" || r.Attempt != 1 || !strings.Contains(r.Error, "memory limit 32 MiB") {
		t.Fatalf("record: status %s, source %q, attempt %d, error %q; want an error from sandbox/oom on attempt 1 naming the limit", r.Status, r.ErrorSource, r.Attempt, r.Error)
	}
	if n := attempts.Load(); n != 2 {
		t.Fatalf("%d attempts, want 2 (retried once)", n)
	}
	if rep.Failed != 0 {
		t.Fatalf("report counts %d fails, want none", rep.Failed)
	}
}

type sinkFunc func(sink.Record)

func (f sinkFunc) Write(_ context.Context, r sink.Record) error { f(r); return nil }
func (sinkFunc) Close(context.Context) error                    { return nil }

// An environment records the digest its image resolved to, for the run's
// manifest: a tag may move between runs, a digest does not.
func TestEnvironmentRecordsItsImageDigest(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	p := docker.New(cli, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		docker.Cleanup(ctx, cli, runID(p))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{Image: testImage, Limits: sandbox.Limits{MemoryBytes: 64 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ins, err := cli.ImageInspect(ctx, testImage)
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.Resources{MemoryBytes: 64 << 20, Image: testImage, ImageDigest: ins.ID}
	if got := sb.Resources(); got != want {
		t.Fatalf("Resources() = %v, want %v", got, want)
	}
}

// With eval.Config.OOMRetryMemory, an agent the OOM killer ended in a
// container under 32 MiB is retried in a container with 8 times the
// memory, where its 50 MB hold: it passes, and its record names the
// limit of that final attempt, with the image's digest.
func TestOOMRetryWithMoreMemory(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	p := docker.New(cli, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		docker.Cleanup(ctx, cli, runID(p))
	})
	spec := sandbox.Spec{Image: testImage, Limits: sandbox.Limits{MemoryBytes: 32 << 20}}
	var attempts atomic.Int32
	h := harness.Func[string, int](func(ctx context.Context, ep *harness.Episode[string]) (int, error) {
		attempts.Add(1)
		res, err := ep.Sandbox.Exec(ctx, sandbox.Cmd{Args: []string{"sh", "-c", `x=$(head -c 50000000 /dev/zero | tr '\0' a); echo ${#x}`}, Timeout: time.Minute})
		return res.ExitCode, err
	})
	j := judge.Func[string, int](func(_ context.Context, _ *harness.Episode[string], code int) (judge.Verdict, error) {
		return judge.Verdict{Pass: code == 0}, nil
	})
	var recs []sink.Record
	e := &eval.Eval[string, int]{Name: "oom-retry", Dataset: dataset.Slice[string]{{ID: "hog"}}, Harness: h, Judge: j,
		Sandbox: func(dataset.Sample[string]) sandbox.Spec { return spec }}
	_, err := e.Run(context.Background(), eval.Config{Sandbox: p, Retries: 2, Backoff: time.Millisecond, Quiet: true,
		OOMRetryMemory: 8, Sinks: []sink.Sink{sinkFunc(func(r sink.Record) { recs = append(recs, r) })}})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	r := recs[0]
	if r.Status != sink.Pass || r.Attempt != 1 || attempts.Load() != 2 {
		t.Fatalf("record: status %s (%s), attempt %d after %d attempts; want a pass on the retry with 256 MiB", r.Status, r.Error, r.Attempt, attempts.Load())
	}
	ins, err := cli.ImageInspect(context.Background(), testImage)
	if err != nil {
		t.Fatal(err)
	}
	if want := "memory=268435456 image=" + testImage + " digest=" + ins.ID; r.Resources != want {
		t.Fatalf("record's resources %q, want %q", r.Resources, want)
	}
}
