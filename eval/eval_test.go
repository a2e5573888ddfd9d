package eval_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/scorer"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// echo is a harness that returns the sample's input.
var echo = harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
	return ep.Sample.Input, nil
})

var wantOK = scorer.Exact(func(string) string { return "ok" })

func samples(inputs ...string) dataset.Slice[string] {
	var d dataset.Slice[string]
	for i, in := range inputs {
		d = append(d, dataset.Sample[string]{ID: fmt.Sprintf("s%d", i), Input: in})
	}
	return d
}

func logRecords(t *testing.T, path string) []sink.Record {
	t.Helper()
	var out []sink.Record
	for r, err := range jsonl.Records(path) {
		require.NoError(t, err)
		out = append(out, r)
	}
	return out
}

// memSink keeps records in memory and remembers being closed.
type memSink struct {
	mu     sync.Mutex
	recs   []sink.Record
	closed bool
}

func (m *memSink) Write(_ context.Context, r sink.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, r)
	return nil
}

func (m *memSink) Close(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

func TestReportNumbersMatchHandComputedValues(t *testing.T) {
	t.Parallel()
	// Outcome per (sample, epoch): P pass, F fail, E error, U unscored.
	outcomes := map[string]string{"a": "PPF", "b": "FFF", "c": "PPP", "d": "PEU"}
	tags := map[string]string{"a": "easy", "b": "hard", "c": "easy", "d": "hard"}
	var d dataset.Slice[string]
	for _, id := range []string{"a", "b", "c", "d"} {
		d = append(d, dataset.Sample[string]{ID: id, Input: outcomes[id], Tags: map[string]string{"level": tags[id]}})
	}
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		o := ep.Sample.Input[ep.Epoch]
		if o == 'E' {
			return "", errors.New("infrastructure down")
		}
		ep.AddUsage(harness.Usage{InputTokens: 10, OutputTokens: 2, CostUSD: 0.5})
		return string(o), nil
	})
	j := judge.Func[string, string](func(_ context.Context, _ *harness.Episode[string], out string) (judge.Verdict, error) {
		switch out {
		case "P":
			return judge.Pass("right"), nil
		case "U":
			return judge.Verdict{}, judge.Unscored("grade missing")
		}
		return judge.Fail("wrong"), nil
	})
	e := &eval.Eval[string, string]{Name: "hand", Dataset: d, Harness: h, Judge: j}
	rep, err := e.Run(context.Background(), eval.Config{Epochs: 3, Retries: -1, Report: report.Options{Resamples: -1}})
	require.NoError(t, err)

	require.Equal(t, 4, rep.Samples)
	require.Equal(t, 3, rep.Epochs)
	require.Equal(t, 12, rep.Episodes)
	require.Equal(t, []int{6, 4, 1, 1}, []int{rep.Passed, rep.Failed, rep.Errored, rep.Unscored})
	require.InDelta(t, 0.6, rep.PassRate, 1e-12) // 6 of 10 scored
	require.Equal(t, "cluster-robust (by sample)", rep.Interval.Method)
	require.Less(t, rep.Interval.Lo, 0.6)
	require.Greater(t, rep.Interval.Hi, 0.6)
	// pass@1 averages per-sample c/n: a 2/3, b 0/3, c 3/3, d 1/1 → (2/3+0+1+1)/4.
	require.InDelta(t, (2.0/3+0+1+1)/4, rep.PassAtK[0].Value, 1e-12)
	// pass@2 over samples with ≥ 2 scored: a 1, b 0, c 1 → 2/3.
	require.InDelta(t, 2.0/3, rep.PassAtK[1].Value, 1e-12)
	// pass^2: a C(2,2)/C(3,2)=1/3, b 0, c 1 → 4/9.
	require.InDelta(t, 4.0/9, rep.PassHatK[1].Value, 1e-12)
	// pass@3 over a, b, c: 1, 0, 1.
	require.InDelta(t, 2.0/3, rep.PassAtK[2].Value, 1e-12)
	require.InDelta(t, 1.0/3, rep.PassHatK[2].Value, 1e-12)
	// Usage: 11 episodes reached the judge stage with usage recorded.
	require.Equal(t, int64(110), rep.Usage.InputTokens)
	require.InDelta(t, 5.5, rep.Usage.CostUSD, 1e-9)

	// The worst case: the errored and the unscored episode as failures,
	// 6 of 12; as passes, 8 of 12.
	require.NotNil(t, rep.WorstCase)
	require.Equal(t, 2, rep.WorstCase.NoVerdict)
	require.InDelta(t, 0.5, rep.WorstCase.Lower.PassRate, 1e-12)
	require.InDelta(t, 8.0/12, rep.WorstCase.Upper.PassRate, 1e-12)
	require.Less(t, rep.WorstCase.Lower.Interval.Lo, rep.Interval.Lo)
	require.Equal(t, rep.WorstCase.Lower.Interval.Lo, rep.GateBound(false))
	require.Equal(t, rep.Interval.Lo, rep.GateBound(true))

	require.Len(t, rep.ByTag, 1)
	want := []report.Group{
		{Value: "easy", Samples: 2, Episodes: 6, Passed: 5, Failed: 1, PassRate: 5.0 / 6, CostUSD: 3},
		{Value: "hard", Samples: 2, Episodes: 6, Passed: 1, Failed: 3, Errored: 1, Unscored: 1, PassRate: 1.0 / 4, CostUSD: 2.5},
	}
	if d := cmp.Diff(want, rep.ByTag[0].Groups, cmpopts.IgnoreFields(report.Group{}, "Interval"), cmpopts.EquateApprox(0, 1e-12)); d != "" {
		t.Fatalf("by level (-want +got):\n%s", d)
	}
	require.Len(t, rep.Failures, 6) // 4 fail + 1 error + 1 unscored
	out := rep.String()
	for _, s := range []string{"60.0%", "by level", "grade missing", "infrastructure down"} {
		require.Contains(t, out, s)
	}
}

func TestSingleEpochUsesWilson(t *testing.T) {
	t.Parallel()
	e := &eval.Eval[string, string]{Name: "w", Dataset: samples("ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "no", "no"), Harness: echo, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{})
	require.NoError(t, err)
	require.InDelta(t, 0.8, rep.PassRate, 1e-12)
	// Wilson 95% for 8/10: [0.4902, 0.9433] (Newcombe 1998 / any table).
	require.InDelta(t, 0.4902, rep.Interval.Lo, 1e-3)
	require.InDelta(t, 0.9433, rep.Interval.Hi, 1e-3)
}

func TestRetriesInfrastructureErrorsNotFailures(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	flaky := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		calls.Add(1)
		if ep.Attempt < 2 {
			return "", errors.New("503")
		}
		return ep.Sample.Input, nil
	})
	log := filepath.Join(t.TempDir(), "log.jsonl")
	e := &eval.Eval[string, string]{Name: "r", Dataset: samples("ok", "no"), Harness: flaky, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{Backoff: time.Millisecond, Log: log})
	require.NoError(t, err)
	require.Equal(t, int32(6), calls.Load(), "each episode: two errors, then a result")
	recs := logRecords(t, log)
	require.Len(t, recs, 2)
	for _, r := range recs {
		require.Equal(t, 2, r.Attempt)
	}
	require.Equal(t, 1, rep.Passed)
	require.Equal(t, 1, rep.Failed, "a wrong answer is a failure, never retried")
}

func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	down := harness.Func[string, string](func(context.Context, *harness.Episode[string]) (string, error) {
		calls.Add(1)
		return "", errors.New("down")
	})
	e := &eval.Eval[string, string]{Name: "b", Dataset: samples("ok"), Harness: down, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{Retries: 3, Backoff: time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, int32(4), calls.Load())
	require.Equal(t, 1, rep.Errored)
	require.Equal(t, sink.KindHarness, rep.Failures[0].ErrorKind)
	require.Equal(t, 3, rep.Failures[0].Attempt)
}

func TestPanicCostsOneEpisode(t *testing.T) {
	t.Parallel()
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		if ep.Sample.Input == "boom" {
			panic("harness exploded")
		}
		return ep.Sample.Input, nil
	})
	j := judge.Func[string, string](func(_ context.Context, _ *harness.Episode[string], out string) (judge.Verdict, error) {
		if out == "judge-boom" {
			var m map[string]int
			m["x"]++ //lint:ignore SA5000 a nil map write: a real runtime panic, on purpose
		}
		return judge.Verdict{Pass: out == "ok"}, nil
	})
	log := filepath.Join(t.TempDir(), "log.jsonl")
	e := &eval.Eval[string, string]{Name: "p", Dataset: samples("ok", "boom", "judge-boom", "ok"), Harness: h, Judge: j}
	rep, err := e.Run(context.Background(), eval.Config{Retries: -1, Log: log})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Passed)
	require.Equal(t, 2, rep.Errored)
	byID := map[string]sink.Record{}
	for _, r := range logRecords(t, log) {
		byID[r.SampleID] = r
	}
	require.Equal(t, sink.KindPanic, byID["s1"].ErrorKind)
	require.Contains(t, byID["s1"].Error, "harness panicked: harness exploded")
	require.Contains(t, byID["s1"].Error, "eval_test.go", "the stack is kept")
	require.Equal(t, sink.KindPanic, byID["s2"].ErrorKind)
	require.Contains(t, byID["s2"].Error, "judge panicked")
}

func TestHarnessIgnoringItsContextIsAbandonedAtTimeout(t *testing.T) {
	t.Parallel()
	// In a synctest bubble the clock moves only when every goroutine
	// waits: the 50 ms timeout takes no wall time, and a Run that waited
	// for the stuck harness would be reported as a deadlock, not a hang.
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		stubborn := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
			if ep.Sample.Input == "hang" {
				<-release // ignores ctx
			}
			return ep.Sample.Input, nil
		})
		e := &eval.Eval[string, string]{Name: "t", Dataset: samples("hang", "ok", "ok"), Harness: stubborn, Judge: wantOK}
		rep, err := e.Run(context.Background(), eval.Config{Timeout: 50 * time.Millisecond, Retries: 1, Backoff: time.Millisecond, Concurrency: 1})
		require.NoError(t, err)
		require.Equal(t, 2, rep.Passed, "the other episodes ran although the only worker was stuck")
		require.Equal(t, 1, rep.Errored)
		require.Equal(t, sink.KindTimeout, rep.Failures[0].ErrorKind)
		require.Equal(t, 1, rep.Failures[0].Attempt, "a timeout is retried")
	})
}

func TestCancellationStopsAndFlushesSinks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Int32
	slow := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		if started.Add(1) == 12 {
			cancel()
		}
		if i, _ := strconv.Atoi(ep.Sample.ID[1:]); i >= 10 {
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "ok", nil
	})
	inputs := make([]string, 1000)
	log := filepath.Join(t.TempDir(), "log.jsonl")
	mem := &memSink{}
	e := &eval.Eval[string, string]{Name: "c", Dataset: samples(inputs...), Harness: slow, Judge: wantOK}
	rep, err := e.Run(ctx, eval.Config{Concurrency: 4, Log: log, Sinks: []sink.Sink{mem}})
	require.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, rep)
	require.True(t, mem.closed, "sinks are closed on cancel")
	recs := logRecords(t, log)
	require.Equal(t, len(mem.recs), len(recs), "the log holds what the sinks got")
	require.Less(t, len(recs), 1000, "scheduling stopped")
	require.Positive(t, rep.Cancelled)
	for _, r := range recs {
		require.NotEqual(t, sink.Error, r.Status, "canceled episodes are not recorded: they run on resume")
	}

	// Resume finishes the job: every episode exactly once.
	e.Harness = echo
	rep, err = e.Run(context.Background(), eval.Config{Concurrency: 4, Log: log})
	require.NoError(t, err)
	require.Equal(t, 1000, rep.Episodes)
	requireExactlyOnce(t, logRecords(t, log), 1000, 1)
}

func requireExactlyOnce(t *testing.T, recs []sink.Record, samples, epochs int) {
	t.Helper()
	seen := map[sink.Key]int{}
	for _, r := range recs {
		seen[r.Key()]++
	}
	require.Len(t, seen, samples*epochs, "every episode has a record")
	for k, n := range seen {
		require.Equal(t, 1, n, "episode %v recorded %d times", k, n)
	}
}

// TestErrorRateStop: the one rule both the scheduler and a cluster's
// coordinator stop by, over Config as the user writes it.
func TestErrorRateStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg      eval.Config
		errs, n  int64
		stops    bool
		wantRate float64
	}{
		{eval.Config{}, 11, 20, true, eval.DefaultMaxErrorRate}, // defaults: more than half of 20
		{eval.Config{}, 10, 20, false, 0},                       // exactly half is not more
		{eval.Config{}, 19, 19, false, 0},                       // fewer than ErrorRateAfter finished
		{eval.Config{MaxErrorRate: -1}, 100, 100, false, 0},     // negative: never
		{eval.Config{MaxErrorRate: 0.1, ErrorRateAfter: 5}, 1, 5, true, 0.1},
		{eval.Config{MaxErrorRate: 1}, 20, 20, false, 0}, // all in error is not more than all
	} {
		err := tc.cfg.ErrorRateStop(tc.errs, tc.n, "boom")
		require.Equal(t, tc.stops, err != nil, "%+v %d/%d", tc.cfg, tc.errs, tc.n)
		if err != nil {
			require.Equal(t, tc.wantRate, err.Max)
			require.Equal(t, int(tc.errs), err.Errors)
			require.Contains(t, err.Error(), "boom")
		}
	}
}
