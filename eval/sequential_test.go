package eval_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/cli"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/distrib"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/stats"
)

// bernoulli is an eval of n samples whose episodes pass with probability
// rate, drawn from the episode's seed: the same run seed gives the same
// outcomes however the episodes run. A failing episode takes slow, a
// passing one fast; fail, when set, says how a failing episode ends
// instead of failing (an error, say).
func bernoulli(n int, rate float64, fast, slow time.Duration, fail func() (string, error)) *eval.Eval[string, string] {
	var d dataset.Slice[string]
	for i := range n {
		d = append(d, dataset.Sample[string]{ID: fmt.Sprintf("task-%04d", i), Input: "x"})
	}
	return &eval.Eval[string, string]{
		Name: "bernoulli", Dataset: d,
		Harness: harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
			if float64(ep.Seed>>11)/(1<<53) < rate {
				time.Sleep(fast)
				return "ok", nil
			}
			time.Sleep(slow)
			if fail != nil {
				return fail()
			}
			return "no", nil
		}),
		Judge: wantOK,
	}
}

// decisionOfLog is what `proctor report` decides from the log alone: the
// gate from its manifest, the outcomes from its records.
func decisionOfLog(t *testing.T, log string) *report.SequentialResult {
	t.Helper()
	res, err := readDecision(log)
	require.NoError(t, err)
	return res
}

func readDecision(log string) (*report.SequentialResult, error) {
	m, err := manifest.Read(log)
	if err != nil {
		return nil, err
	}
	seq, err := report.SequentialOf(m)
	if err != nil {
		return nil, err
	}
	if seq == nil {
		return nil, errors.New("the manifest holds no gate")
	}
	rep, err := report.FromRecords(committedRecords(log), &report.Options{Sequential: seq, Resamples: -1})
	if err != nil {
		return nil, err
	}
	return rep.Sequential, nil
}

// committedRecords are the records of a log, up to a torn tail: what a
// report of a log still being written reads.
func committedRecords(log string) func(yield func(sink.Record, error) bool) {
	return func(yield func(sink.Record, error) bool) {
		for r, err := range jsonl.Records(log) {
			if torn := (*jsonl.TornTailError)(nil); errors.As(err, &torn) {
				return
			}
			if !yield(r, err) {
				return
			}
		}
	}
}

// replayDecision decides the gate by hand, independently of the engine:
// the claim order, each sample's pass rate over its epochs, errors against
// the decision, fed to a betting test at 2α until it decides.
func replayDecision(t *testing.T, log string, bar, alpha float64, seed uint64, ids []string, epochs int) (report.Decision, int) {
	t.Helper()
	passes, fails, seen := map[string]int{}, map[string]int{}, map[string]int{}
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		seen[r.SampleID]++
		switch r.Status {
		case "pass":
			passes[r.SampleID]++
		case "fail":
			fails[r.SampleID]++
		}
	}
	test := stats.NewBettingTest(bar, 2*alpha)
	for k, i := range report.ClaimOrder(seed, len(ids), func(i int) string { return ids[i] }) {
		id := ids[i]
		if seen[id] < epochs {
			return report.Undecided, k
		}
		test.AddRange(float64(passes[id])/float64(epochs), 1-float64(fails[id])/float64(epochs))
		switch {
		case test.Above():
			return report.DecidedPass, k + 1
		case test.Below():
			return report.DecidedFail, k + 1
		}
	}
	return report.Undecided, len(ids)
}

// sameDecision compares two runs' decisions and where they were taken,
// not what ran after (episodes in flight then differ from run to run).
func sameDecision(t *testing.T, want, got *report.SequentialResult) {
	t.Helper()
	w, g := *want, *got
	w.NotRun, g.NotRun, w.CostNotSpentUSD, g.CostNotSpentUSD = 0, 0, 0, 0
	require.Equal(t, w, g)
}

func idsOf(e *eval.Eval[string, string]) []string {
	var ids []string
	for _, s := range e.Dataset.(dataset.Slice[string]) {
		ids = append(ids, s.ID)
	}
	return ids
}

func TestSequentialRunStopsOnceDecidedAndItsLogDecidesTheSame(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate float64
		want report.Decision
	}{{0.9, report.DecidedPass}, {0.4, report.DecidedFail}} {
		t.Run(fmt.Sprint(tc.rate), func(t *testing.T) {
			t.Parallel()
			// Episodes take a moment, as an agent's do, and the recorder
			// keeps up: in a synctest bubble the clock stands still while
			// the recorder works, however loaded the machine (outside one, a
			// recorder starved under -race fell 250 episodes behind).
			synctest.Test(t, func(t *testing.T) { stopsOnceDecided(t, tc.rate, tc.want) })
		})
	}
}

func stopsOnceDecided(t *testing.T, rate float64, want report.Decision) {
	e := bernoulli(2000, rate, 100*time.Microsecond, 100*time.Microsecond, nil)
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rep, err := e.Run(context.Background(), eval.Config{Log: log, Seed: 5, Concurrency: 8, Quiet: true,
		Sequential: &report.Sequential{Bar: 0.7}})
	require.NoError(t, err)
	got := rep.Sequential
	require.NotNil(t, got)
	require.Equal(t, want, got.Decision)
	require.Less(t, got.Samples, 200, "a rate 0.2 or more from the bar decides within 200 samples")
	require.GreaterOrEqual(t, rep.Episodes, got.Episodes, "the episodes the decision rests on are recorded")
	// After the decision run only the episodes in flight and those
	// claimed while the recorder folded the last records in.
	require.Less(t, rep.Episodes, got.Episodes+64, "the run stopped claiming once decided")
	require.Equal(t, 2000-rep.Episodes, got.NotRun)

	require.Equal(t, got, decisionOfLog(t, log), "the report of the log decides the same, at the same point")
	d, k := replayDecision(t, log, 0.7, report.DefaultAlpha, 5, idsOf(e), 1)
	require.Equal(t, want, d)
	require.Equal(t, got.Samples, k)
}

// TestSequentialDecidesInClaimOrderNotCompletionOrder is the order trap:
// failing episodes take 10× as long as passing ones, at concurrency 64.
// Fed in the order episodes finish, the sequence sees mostly passes first
// and decides "pass" for an agent that passes 55% of the time; fed in claim
// order over the finished prefix, it decides "fail" (or nothing).
func TestSequentialDecidesInClaimOrderNotCompletionOrder(t *testing.T) {
	t.Parallel()
	e := bernoulli(600, 0.55, 200*time.Microsecond, 2*time.Millisecond, nil)
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rep, err := e.Run(context.Background(), eval.Config{Log: log, Seed: 3, Concurrency: 64, Quiet: true,
		Sequential: &report.Sequential{Bar: 0.7}})
	require.NoError(t, err)
	require.NotEqual(t, report.DecidedPass, rep.Sequential.Decision, "a 55%% agent passed a 70%% gate: %+v", rep.Sequential)
	if rep.Sequential.Decision == report.Undecided {
		require.Equal(t, 600, rep.Episodes, "the run stopped on a decision its claim order does not hold")
	}
	d, k := replayDecision(t, log, 0.7, report.DefaultAlpha, 3, idsOf(e), 1)
	require.Equal(t, d, rep.Sequential.Decision)
	require.Equal(t, k, rep.Sequential.Samples)
}

// TestSequentialErrorsNeverMakeADecision is the error trap: an agent that
// passes 60% of the time, whose every failure ends in error (the grader is
// down). Errors left out of the rate, it passes 100% of what was scored;
// counted against the decision each would support, nothing is decided.
func TestSequentialErrorsNeverMakeADecision(t *testing.T) {
	t.Parallel()
	e := bernoulli(300, 0.6, 0, 0, func() (string, error) { return "", errors.New("grader unreachable") })
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rep, err := e.Run(context.Background(), eval.Config{Log: log, Seed: 1, Concurrency: 8, Quiet: true, Retries: -1, MaxErrorRate: -1,
		Sequential: &report.Sequential{Bar: 0.7}})
	require.NoError(t, err)
	require.Positive(t, rep.Errored)
	require.Equal(t, 1.0, rep.PassRate, "errors are out of the plain pass rate")
	got := rep.Sequential
	require.Equal(t, report.Undecided, got.Decision, "%+v", got)
	require.False(t, got.Passed())
	require.Equal(t, 300, got.Samples, "undecided, the run ran every sample")
	require.Less(t, got.Bounds.Lo, 0.7, "the lower bound counts errors as failures")
	require.Equal(t, 1.0, got.Bounds.Hi, "the upper bound counts errors as passes")
}

// TestSequentialResumedRunDecidesAsOneProcess cancels a sequential run
// midway and resumes it: the decision, and the point it is taken at, are
// one uninterrupted run's.
func TestSequentialResumedRunDecidesAsOneProcess(t *testing.T) {
	t.Parallel()
	e := bernoulli(1500, 0.62, 50*time.Microsecond, 50*time.Microsecond, nil)
	cfg := eval.Config{Seed: 9, Concurrency: 8, Quiet: true, Sequential: &report.Sequential{Bar: 0.7}}
	cfg.Log = filepath.Join(t.TempDir(), "whole.jsonl")
	whole, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.NotEqual(t, report.Undecided, whole.Sequential.Decision)
	require.Greater(t, whole.Sequential.Samples, 60, "the decision comes after the cancel below")

	cfg.Log = filepath.Join(t.TempDir(), "resumed.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	stop := *e
	inner := e.Harness
	stop.Harness = harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		if n.Add(1) == 40 {
			cancel()
		}
		return inner.Run(ctx, ep)
	})
	first, err := stop.Run(ctx, cfg)
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, first.Episodes, whole.Sequential.Samples, "the first run stopped before the decision")
	require.Equal(t, report.Undecided, first.Sequential.Decision)

	resumed, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	sameDecision(t, whole.Sequential, resumed.Sequential)
	require.Equal(t, resumed.Sequential, decisionOfLog(t, cfg.Log))

	// Run again once decided, the log is the decision: nothing more runs.
	again, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, resumed.Episodes, again.Episodes)
	require.Equal(t, resumed.Sequential, again.Sequential)
}

// TestSequentialCoordinatorDecidesAsOneProcess runs the gate as a
// distributed run does: a Recording (the coordinator) hands out its
// pending work in claim order to two Work halves (workers), which finish
// episodes in any order, and stops handing out work once decided.
func TestSequentialCoordinatorDecidesAsOneProcess(t *testing.T) {
	t.Parallel()
	e := bernoulli(1000, 0.85, 50*time.Microsecond, 50*time.Microsecond, nil)
	cfg := eval.Config{Seed: 4, Concurrency: 4, Quiet: true, Sequential: &report.Sequential{Bar: 0.7}}
	whole, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, report.DecidedPass, whole.Sequential.Decision)

	c := cfg
	c.Log = filepath.Join(t.TempDir(), "coord.jsonl")
	rec, err := distrib.Open(e, context.Background(), c)
	require.NoError(t, err)
	work := make(chan distrib.Assignment)
	go func() {
		defer close(work)
		for _, a := range rec.Pending() {
			select {
			case work <- a:
			case <-rec.Decided():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			wc := c
			wc.Log, wc.Worker = "", fmt.Sprintf("w%d", w)
			require.NoError(t, distrib.Work(e, context.Background(), wc, nil, work, func(f distrib.Finished) { require.NoError(t, rec.Commit(f)) }))
		})
	}
	wg.Wait()
	got, err := rec.Close(context.Background())
	require.NoError(t, err)
	sameDecision(t, whole.Sequential, got.Sequential)
	require.Less(t, got.Episodes, 1000, "the coordinator stopped handing out work")
	require.Equal(t, got.Sequential, decisionOfLog(t, c.Log))
}

func TestSequentialConfigIsChecked(t *testing.T) {
	t.Parallel()
	e := bernoulli(10, 1, 0, 0, nil)
	for _, s := range []report.Sequential{{Bar: 0}, {Bar: 1.2}, {Bar: 0.7, Alpha: 0.6}, {Bar: 0.7, Method: "guess"},
		{Baseline: "x.jsonl", Margin: -0.1}} {
		_, err := e.Run(context.Background(), eval.Config{Quiet: true, Sequential: &s})
		var ce *eval.ConfigError
		require.ErrorAs(t, err, &ce, "%+v", s)
	}
	_, err := e.Run(context.Background(), eval.Config{Quiet: true, Shard: eval.Shard{Index: 0, Count: 2}, Sequential: &report.Sequential{Bar: 0.7}})
	require.ErrorContains(t, err, "Shard")
}

func TestMainFlagsMakeASequentialGate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate float64
		code int
		out  string
	}{{0.95, 0, "PASS: pass rate ≥ 70.0% at α = 0.1"}, {0.3, 1, "FAIL: not pass rate ≥ 70.0%"}} {
		log := filepath.Join(t.TempDir(), "run.jsonl")
		var out, errOut bytes.Buffer
		e := bernoulli(1000, tc.rate, 100*time.Microsecond, 100*time.Microsecond, nil)
		code := cli.MainArgs(context.Background(), e, eval.Config{Quiet: true},
			[]string{"-log", log, "-sequential", "0.7", "-alpha", "0.1", "-concurrency", "4"}, &out, &errOut)
		require.Equal(t, tc.code, code, errOut.String())
		require.Contains(t, out.String(), tc.out)
		require.Contains(t, out.String(), "episodes not run")
		if tc.code != 0 {
			require.Contains(t, errOut.String(), "the sequential gate did not pass: fail")
		}
		got := decisionOfLog(t, log)
		require.Equal(t, 0.1, got.Alpha, "the manifest holds the gate as the flags set it")
	}
	var out, errOut bytes.Buffer
	code := cli.MainArgs(context.Background(), bernoulli(10, 1, 0, 0, nil), eval.Config{Quiet: true}, []string{"-alpha", "0.1"}, &out, &errOut)
	require.Equal(t, 1, code)
	require.Contains(t, errOut.String(), "Config.Sequential: sequential bar 0")
}

// TestSequentialComparisonDecidesOnPairedDifferences: against a base run's
// log, a head that is the same agent is shown non-inferior within 5
// points, and one that fails a third of the base's passes is shown a
// regression, each long before the dataset runs out; a base run that
// lacks samples (stopped early) decides nothing about them.
func TestSequentialComparisonDecidesOnPairedDifferences(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := filepath.Join(dir, "base.jsonl")
	_, err := bernoulli(1500, 0.8, 0, 0, nil).Run(context.Background(), eval.Config{Log: base, Seed: 5, Quiet: true})
	require.NoError(t, err)

	gate := &report.Sequential{Baseline: base, Margin: 0.05}
	same := bernoulli(1500, 0.8, 50*time.Microsecond, 50*time.Microsecond, nil)
	rep, err := same.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "same.jsonl"), Seed: 5, Quiet: true, Sequential: gate})
	require.NoError(t, err)
	require.Equal(t, report.DecidedPass, rep.Sequential.Decision, "%+v", rep.Sequential)
	require.Less(t, rep.Sequential.Samples, 400)
	require.Greater(t, rep.Sequential.Bounds.Lo, -0.05, "the difference's lower bound clears −margin")
	require.Equal(t, rep.Sequential, decisionOfLog(t, filepath.Join(dir, "same.jsonl")))

	worse := bernoulli(1500, 0.8, 50*time.Microsecond, 50*time.Microsecond, nil)
	inner := worse.Harness
	worse.Harness = harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		if ep.Seed%3 == 0 {
			return "no", nil
		}
		return inner.Run(ctx, ep)
	})
	rep, err = worse.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "worse.jsonl"), Seed: 5, Quiet: true, Sequential: gate})
	require.NoError(t, err)
	require.Equal(t, report.DecidedFail, rep.Sequential.Decision, "%+v", rep.Sequential)
	require.Less(t, rep.Sequential.Samples, 400)
	require.Less(t, rep.Sequential.Bounds.Hi, -0.05)
	require.Contains(t, rep.String(), "FAIL: a regression beyond 5.0 points")

	// The gated head's log, stopped early, as a baseline of a run in
	// another claim order (another seed): most of the samples it meets are
	// missing from the base, unknown, and nothing can be shown.
	rep, err = same.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "third.jsonl"), Seed: 6, Quiet: true,
		Sequential: &report.Sequential{Baseline: filepath.Join(dir, "same.jsonl"), Margin: 0.05}})
	require.NoError(t, err)
	require.Equal(t, report.Undecided, rep.Sequential.Decision)
	require.Less(t, rep.Sequential.Bounds.Lo, -0.05)
}
