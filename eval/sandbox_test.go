package eval_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/driver"
	"github.com/proctor-evals/proctor/sandbox/local"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
	"github.com/proctor-evals/proctor/sink"
)

// These tests drive the engine with sandboxes: the in-memory Fake (fast,
// and it runs everywhere) and the real local driver (overlay forks as
// root; skipped where it cannot provision). A counting wrapper around the
// provider checks what the engine promises: one Provision per sample, one
// Fork per attempt, every fork and every environment closed, whatever
// happened to the episode.

// counting wraps a driver and counts what the engine does with it.
type counting struct {
	driver.Provider
	capacity int
	// fail, when set, runs before each Provision with its 1-based call
	// number; an error it returns is Provision's.
	fail func(n int32) error

	provisions  atomic.Int32 // calls
	envs        atomic.Int32 // environments provisioned
	envsClosed  atomic.Int32
	forks       atomic.Int32
	forksClosed atomic.Int32
	open        atomic.Int32 // forks open now
	maxOpen     atomic.Int32 // most forks open at once
}

// provider is the portable provider over c, with c's capacity.
func (c *counting) provider() *sandbox.Provider {
	return sandbox.NewProvider(c, &sandbox.ProviderOptions{Capacity: c.capacity})
}

func (c *counting) Capacity() int { return c.capacity }

func (c *counting) Provision(ctx context.Context, spec sandbox.Spec) (driver.Environment, error) {
	n := c.provisions.Add(1)
	if c.fail != nil {
		if err := c.fail(n); err != nil {
			return nil, err
		}
	}
	env, err := c.Provider.Provision(ctx, spec)
	if err != nil {
		return nil, err
	}
	c.envs.Add(1)
	return &countedEnv{Environment: env, c: c}, nil
}

type countedEnv struct {
	driver.Environment
	c    *counting
	once sync.Once
}

func (e *countedEnv) Fork(ctx context.Context) (driver.Sandbox, error) {
	sb, err := e.Environment.Fork(ctx)
	if err != nil {
		return nil, err
	}
	e.c.forks.Add(1)
	n := e.c.open.Add(1)
	for {
		m := e.c.maxOpen.Load()
		if n <= m || e.c.maxOpen.CompareAndSwap(m, n) {
			break
		}
	}
	return &countedSandbox{Sandbox: sb, c: e.c}, nil
}

func (e *countedEnv) Close() error {
	e.once.Do(func() { e.c.envsClosed.Add(1) })
	return e.Environment.Close()
}

type countedSandbox struct {
	driver.Sandbox
	c    *counting
	once sync.Once
}

func (s *countedSandbox) Close() error {
	s.once.Do(func() {
		s.c.open.Add(-1)
		s.c.forksClosed.Add(1)
	})
	return s.Sandbox.Close()
}

// requireAllClosed checks that nothing the engine opened is left open.
func (c *counting) requireAllClosed(t *testing.T) {
	t.Helper()
	require.Equal(t, c.forks.Load(), c.forksClosed.Load(), "every fork is closed")
	require.Zero(t, c.open.Load(), "no fork is open")
	require.Equal(t, c.envs.Load(), c.envsClosed.Load(), "every environment is closed")
}

// providerCase is a sandbox driver the engine tests run against.
type providerCase struct {
	name string
	// new returns a driver, or skips the test.
	new func(t *testing.T) driver.Provider
	// writeFile is a Setup command that writes content to name.
	writeFile func(name, content string) sandbox.Cmd
}

var providers = []providerCase{
	{
		name: "fake",
		new: func(_ *testing.T) driver.Provider {
			return &sandboxtest.Fake{Exec: func(ctx context.Context, sb sandboxtest.Files, cmd sandbox.Cmd) (sandbox.Result, error) {
				if cmd.Args[0] == "write-file" && len(cmd.Args) == 3 {
					return sandbox.Result{}, sb.WriteFile(ctx, cmd.Args[1], []byte(cmd.Args[2]), 0o644)
				}
				return sandbox.Result{ExitCode: 127}, nil
			}}
		},
		writeFile: func(name, content string) sandbox.Cmd {
			return sandbox.Cmd{Args: []string{"write-file", name, content}}
		},
	},
	{
		name: "local",
		new: func(t *testing.T) driver.Provider {
			if _, err := exec.LookPath("sh"); err != nil {
				if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" {
					t.Fatal("PROCTOR_REQUIRE_TOOLS=1 but sh is not on PATH")
				}
				t.Skip("the local driver's cases run sh, which is not on PATH")
			}
			p := local.New(&local.Options{Dir: t.TempDir()})
			sb, err := sandbox.Open(context.Background(), p, sandbox.Spec{})
			if err != nil {
				t.Skipf("the local sandbox driver cannot provision here: %v", err)
			}
			sb.Close()
			d := p.Driver().(*local.Driver)
			t.Logf("local fork method: %s", d.Method())
			return d
		},
		writeFile: func(name, content string) sandbox.Cmd {
			return sandbox.Cmd{Args: []string{"sh", "-c", `printf %s "$2" > "$1"`, "sh", name, content}}
		},
	},
}

// barrier lets n episodes through once all n have arrived: it proves they
// were in flight together.
type barrier struct {
	n       int32
	arrived atomic.Int32
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: int32(n), all: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context) error {
	if b.arrived.Add(1) == b.n {
		close(b.all)
	}
	select {
	case <-b.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(20 * time.Second):
		return fmt.Errorf("only %d of %d episodes were in flight together", b.arrived.Load(), b.n)
	}
}

func TestEpisodesOfASampleShareOneEnvironmentInIsolatedForks(t *testing.T) {
	t.Parallel()
	for _, pc := range providers {
		t.Run(pc.name, func(t *testing.T) {
			t.Parallel()
			const epochs = 5
			c := &counting{Provider: pc.new(t)}
			ids := []string{"a", "b"}
			var d dataset.Slice[string]
			barriers := map[string]*barrier{}
			for _, id := range ids {
				d = append(d, dataset.Sample[string]{ID: id, Input: id})
				barriers[id] = newBarrier(epochs)
			}
			// Each episode writes its own marker, waits until every epoch of
			// its sample has written one, then lists the workspace: in a
			// shared workspace it would see the others' markers.
			h := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
				marker := fmt.Sprintf("marker-%d", ep.Epoch)
				if err := ep.Sandbox.WriteFile(ctx, marker, []byte(ep.Sample.ID), 0o644); err != nil {
					return "", err
				}
				if err := barriers[ep.Sample.ID].wait(ctx); err != nil {
					return "", err
				}
				setup, err := ep.Sandbox.ReadFile(ctx, "setup.txt")
				if err != nil {
					return "", err
				}
				list, err := ep.Sandbox.ReadDir(ctx, "")
				if err != nil {
					return "", err
				}
				var names []string
				for _, f := range list {
					names = append(names, f.Name)
				}
				return string(setup) + " | " + strings.Join(names, " "), nil
			})
			j := judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
				want := fmt.Sprintf("provisioned %s | marker-%d setup.txt", ep.Sample.ID, ep.Epoch)
				if out != want {
					return judge.Fail(fmt.Sprintf("saw %q, want %q", out, want)), nil
				}
				return judge.Pass(""), nil
			})
			// Streamed (not a Slice): each environment's spec comes from its
			// sample as the dataset is read again.
			e := &eval.Eval[string, string]{Name: "forks", Dataset: &readCounter{d: d}, Harness: h, Judge: j,
				Sandbox: func(s dataset.Sample[string]) sandbox.Spec {
					return sandbox.Spec{Setup: []sandbox.Cmd{pc.writeFile("setup.txt", "provisioned "+s.ID)}}
				}}
			mem := &memSink{}
			rep, err := e.Run(context.Background(), eval.Config{Sandbox: c.provider(), Epochs: epochs, Concurrency: 2 * epochs,
				Retries: -1, Timeout: time.Minute, Sinks: []sink.Sink{mem}})
			require.NoError(t, err)
			for _, r := range mem.recs {
				require.Equal(t, sink.Pass, r.Status, "%s/%d: %s %s", r.SampleID, r.Epoch, r.Reason, r.Error)
			}
			require.Equal(t, len(ids)*epochs, rep.Passed)
			require.Equal(t, int32(len(ids)), c.provisions.Load(), "Provision once per sample")
			require.Equal(t, int32(len(ids)*epochs), c.forks.Load(), "Fork once per attempt")
			c.requireAllClosed(t)
		})
	}
}

func TestSandboxIsClosedWhateverEndsTheEpisode(t *testing.T) {
	t.Parallel()
	type outcome struct {
		err       error // Run's error, matched with errors.Is
		status    sink.Status
		kind      sink.ErrorKind
		cancelled bool // not recorded: it runs on resume
	}
	cases := []struct {
		name string
		// harness runs the episode; cancel cancels the run, inFlight is
		// closed once every episode has started.
		harness func(ctx context.Context, ep *harness.Episode[string], cancel func(), inFlight <-chan struct{}, release <-chan struct{}) (string, error)
		timeout time.Duration
		want    outcome
	}{
		{
			name: "panic",
			harness: func(ctx context.Context, ep *harness.Episode[string], _ func(), _, _ <-chan struct{}) (string, error) {
				ep.Sandbox.WriteFile(ctx, "f", []byte("x"), 0o644)
				panic("agent exploded")
			},
			want: outcome{status: sink.Error, kind: sink.KindPanic},
		},
		{
			name: "timeout, harness ignores its context",
			harness: func(ctx context.Context, ep *harness.Episode[string], _ func(), _, release <-chan struct{}) (string, error) {
				<-release
				return "late", nil
			},
			timeout: 50 * time.Millisecond,
			want:    outcome{status: sink.Error, kind: sink.KindTimeout},
		},
		{
			name: "cancel, harness honours its context",
			harness: func(ctx context.Context, ep *harness.Episode[string], cancel func(), inFlight, _ <-chan struct{}) (string, error) {
				<-inFlight
				cancel()
				<-ctx.Done()
				return "", ctx.Err()
			},
			want: outcome{err: context.Canceled, cancelled: true},
		},
		{
			name: "cancel, harness ignores its context",
			harness: func(ctx context.Context, ep *harness.Episode[string], cancel func(), inFlight, release <-chan struct{}) (string, error) {
				<-inFlight
				cancel()
				<-release
				return "late", nil
			},
			want: outcome{err: context.Canceled, cancelled: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const n, epochs = 2, 2
			c := &counting{Provider: &sandboxtest.Fake{}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			release := make(chan struct{})
			defer close(release) // lets abandoned harnesses return at the end
			inFlight := newBarrier(n * epochs)
			var sbs sync.Map // the sandbox each episode got
			h := harness.Func[string, string](func(hctx context.Context, ep *harness.Episode[string]) (string, error) {
				sbs.Store(fmt.Sprint(ep.Sample.ID, ep.Epoch), ep.Sandbox)
				ch := make(chan struct{})
				go func() { inFlight.wait(context.Background()); close(ch) }()
				return tc.harness(hctx, ep, cancel, ch, release)
			})
			mem := &memSink{}
			e := &eval.Eval[string, string]{Name: "close", Dataset: samples("a", "b"), Harness: h, Judge: wantOK}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = time.Minute
			}
			done := make(chan struct{})
			var rep *report.Report
			var err error
			go func() {
				defer close(done)
				rep, err = e.Run(ctx, eval.Config{Sandbox: c.provider(), Epochs: epochs, Concurrency: n * epochs, Retries: -1,
					Timeout: timeout, Sinks: []sink.Sink{mem}})
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("Run did not return")
			}
			if tc.want.err != nil {
				require.ErrorIs(t, err, tc.want.err)
			} else {
				require.NoError(t, err)
			}
			if tc.want.cancelled {
				require.Empty(t, mem.recs, "cancelled episodes are not recorded")
				require.Equal(t, n*epochs, rep.Cancelled)
			} else {
				require.Len(t, mem.recs, n*epochs)
				for _, r := range mem.recs {
					require.Equal(t, tc.want.status, r.Status)
					require.Equal(t, tc.want.kind, r.ErrorKind)
				}
			}
			// Checked before release: an abandoned harness still runs, yet
			// its sandbox is closed and the environment too.
			require.Equal(t, int32(n), c.provisions.Load())
			require.Equal(t, int32(n*epochs), c.forks.Load())
			c.requireAllClosed(t)
			sbs.Range(func(k, v any) bool {
				_, err := v.(*sandbox.Sandbox).ReadDir(context.Background(), "")
				require.ErrorIs(t, err, sandbox.ErrClosed, "episode %v: its sandbox is closed", k)
				return true
			})
		})
	}
}

func TestProviderCapacityBoundsOpenSandboxes(t *testing.T) {
	t.Parallel()
	for _, pc := range providers {
		t.Run(pc.name, func(t *testing.T) {
			t.Parallel()
			const capacity, concurrency = 2, 8
			c := &counting{Provider: pc.new(t), capacity: capacity}
			require.Equal(t, capacity, c.Capacity())
			h := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
				if err := ep.Sandbox.WriteFile(ctx, "out", []byte("ok"), 0o644); err != nil {
					return "", err
				}
				select {
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
					return "", ctx.Err()
				}
				b, err := ep.Sandbox.ReadFile(ctx, "out")
				return string(b), err
			})
			e := &eval.Eval[string, string]{Name: "capacity", Dataset: samples("ok", "ok", "ok", "ok"), Harness: h, Judge: wantOK}
			rep, err := e.Run(context.Background(), eval.Config{Sandbox: c.provider(), Epochs: 4, Concurrency: concurrency, Retries: -1})
			require.NoError(t, err)
			require.Equal(t, 16, rep.Passed)
			require.LessOrEqual(t, c.maxOpen.Load(), int32(capacity), "never more forks open than the provider's capacity")
			require.Equal(t, int32(capacity), c.maxOpen.Load(), "the capacity is used")
			c.requireAllClosed(t)
		})
	}
}

// An attempt abandoned at its timeout has its sandbox closed by the engine;
// the capacity that sandbox held must be freed with it, or a harness that
// hangs for good starves every later episode of sandboxes.
func TestAbandonedAttemptFreesItsSandboxCapacity(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	c := &counting{Provider: &sandboxtest.Fake{}, capacity: 1}
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		if ep.Sample.Input == "hang" {
			<-release // ignores ctx
		}
		return ep.Sample.Input, nil
	})
	mem := &memSink{}
	e := &eval.Eval[string, string]{Name: "abandon", Dataset: samples("hang", "ok", "ok"), Harness: h, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{Sandbox: c.provider(), Concurrency: 2, Retries: -1,
		Timeout: 300 * time.Millisecond, Sinks: []sink.Sink{mem}})
	require.NoError(t, err)
	for _, r := range mem.recs {
		if r.SampleID != "s0" {
			require.Equal(t, sink.Pass, r.Status, "%s: %s %s: the hung episode's sandbox slot was not freed", r.SampleID, r.ErrorKind, r.Error)
		}
	}
	require.Equal(t, 2, rep.Passed)
	require.Equal(t, 1, rep.Errored)
	require.Equal(t, sink.KindTimeout, rep.Failures[0].ErrorKind)
	c.requireAllClosed(t)
}

func TestProvisionErrorsAreSandboxErrorsAndRetried(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		retries   int
		fail      func(n int32) error
		wantCalls int32
		want      sink.Status
		attempt   int
	}{
		{
			name:    "always fails, retried up to Retries",
			retries: 2,
			fail:    func(int32) error { return errors.New("image not found") },
			// One sample, one epoch: each attempt provisions again.
			wantCalls: 3, want: sink.Error, attempt: 2,
		},
		{
			name:      "unavailable, no retries",
			retries:   -1,
			fail:      func(int32) error { return fmt.Errorf("engine down: %w", sandbox.ErrUnavailable) },
			wantCalls: 1, want: sink.Error, attempt: 0,
		},
		{
			name:    "fails twice, then provisions",
			retries: 2,
			fail: func(n int32) error {
				if n <= 2 {
					return fmt.Errorf("flaky: %w", sandbox.ErrUnavailable)
				}
				return nil
			},
			wantCalls: 3, want: sink.Pass, attempt: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &counting{Provider: &sandboxtest.Fake{}, fail: tc.fail}
			mem := &memSink{}
			e := &eval.Eval[string, string]{Name: "provision", Dataset: samples("ok"), Harness: echo, Judge: wantOK}
			_, err := e.Run(context.Background(), eval.Config{Sandbox: c.provider(), Retries: tc.retries, Backoff: time.Millisecond,
				Sinks: []sink.Sink{mem}})
			require.NoError(t, err, "a sandbox fault is data, not a failed run")
			require.Len(t, mem.recs, 1)
			r := mem.recs[0]
			require.Equal(t, tc.want, r.Status, r.Error)
			require.Equal(t, tc.attempt, r.Attempt)
			require.Equal(t, tc.wantCalls, c.provisions.Load())
			if tc.want == sink.Error {
				require.Equal(t, sink.KindSandbox, r.ErrorKind)
				require.Contains(t, r.Error, "provisioning the sandbox")
				require.Zero(t, c.forks.Load())
			} else {
				require.Empty(t, r.ErrorKind)
				require.Equal(t, int32(1), c.forks.Load())
			}
			c.requireAllClosed(t)
		})
	}
}

func TestErrorsWrappingErrUnavailableAreSandboxFaults(t *testing.T) {
	t.Parallel()
	unavailable := fmt.Errorf("exec: container gone: %w", sandbox.ErrUnavailable)
	plain := errors.New("model API: 503")
	cases := []struct {
		name              string
		harnessErr, jdErr error
		want              sink.ErrorKind
	}{
		{"harness, unavailable", unavailable, nil, sink.KindSandbox},
		{"harness, plain", plain, nil, sink.KindHarness},
		{"judge, unavailable", nil, unavailable, sink.KindSandbox},
		{"judge, plain", nil, plain, sink.KindJudge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := harness.Func[string, string](func(context.Context, *harness.Episode[string]) (string, error) {
				return "ok", tc.harnessErr
			})
			j := judge.Func[string, string](func(context.Context, *harness.Episode[string], string) (judge.Verdict, error) {
				return judge.Pass(""), tc.jdErr
			})
			c := &counting{Provider: &sandboxtest.Fake{}}
			mem := &memSink{}
			e := &eval.Eval[string, string]{Name: "kinds", Dataset: samples("ok"), Harness: h, Judge: j}
			_, err := e.Run(context.Background(), eval.Config{Sandbox: c.provider(), Retries: -1, Sinks: []sink.Sink{mem}})
			require.NoError(t, err)
			require.Len(t, mem.recs, 1)
			require.Equal(t, sink.Error, mem.recs[0].Status)
			require.Equal(t, tc.want, mem.recs[0].ErrorKind, mem.recs[0].Error)
			c.requireAllClosed(t)
		})
	}
}

// Config.Timeout bounds the harness and the judge of an attempt. An episode
// that waits for a sandbox because the provider is at capacity has not
// started: its wait must not count against its timeout, or a provider with
// less capacity than the run's concurrency turns queueing into timeouts.
func TestWaitingForSandboxCapacityIsNotATimeout(t *testing.T) {
	t.Parallel()
	c := &counting{Provider: &sandboxtest.Fake{}, capacity: 1}
	h := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		select {
		case <-time.After(100 * time.Millisecond): // well within the timeout
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return ep.Sample.Input, nil
	})
	mem := &memSink{}
	e := &eval.Eval[string, string]{Name: "queue", Dataset: samples("ok", "ok", "ok", "ok"), Harness: h, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{Sandbox: c.provider(), Concurrency: 4, Retries: -1,
		Timeout: 250 * time.Millisecond, Sinks: []sink.Sink{mem}})
	require.NoError(t, err)
	for _, r := range mem.recs {
		require.Equal(t, sink.Pass, r.Status, "%s: %s %s", r.SampleID, r.ErrorKind, r.Error)
	}
	require.Equal(t, 4, rep.Passed)
	require.Equal(t, int32(1), c.maxOpen.Load())
	c.requireAllClosed(t)
}
