package eval_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
	"github.com/proctor-evals/proctor/sink"
)

// rateVariants is an eval of variants, each passing an episode when its
// seed falls under its rate (percent): variants share episode seeds, so
// their outcomes are paired as a run's are. calls counts the episodes
// each ran.
func rateVariants(n int, rate map[string]uint64, names []string, calls *variantCalls) *eval.Eval[string, string] {
	var d dataset.Slice[string]
	for i := range n {
		d = append(d, dataset.Sample[string]{ID: fmt.Sprintf("s%03d", i), Input: "x"})
	}
	e := &eval.Eval[string, string]{Name: "gated", Dataset: d, Judge: judge.Func[string, string](func(_ context.Context, _ *harness.Episode[string], out string) (judge.Verdict, error) {
		return judge.Verdict{Pass: out == "pass"}, nil
	})}
	for _, name := range names {
		e.Variants = append(e.Variants, eval.Variant[string, string]{Name: name, Harness: harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
			calls.mu.Lock()
			if calls.n == nil {
				calls.n = map[string]int{}
			}
			calls.n[name]++
			calls.mu.Unlock()
			if (ep.Seed>>7)%100 < rate[name] {
				return "pass", nil
			}
			return "fail", nil
		})})
	}
	return e
}

// reportOfLog is the report proctor report makes of a log: its gate
// read from the manifest.
func reportOfLog(t *testing.T, log string) *report.Report {
	t.Helper()
	m, err := manifest.Read(log)
	require.NoError(t, err)
	seq, err := report.SequentialOf(m)
	require.NoError(t, err)
	require.NotNil(t, seq, "the manifest holds the gate")
	rep, err := report.FromLog(log, &report.Options{Sequential: seq})
	require.NoError(t, err)
	return rep
}

// gateOf is the sequential gate of variant name in rep.
func gateOf(t *testing.T, rep *report.Report, name string) report.SequentialResult {
	t.Helper()
	v := rep.VariantReport(name)
	require.NotNil(t, v, "variant %s", name)
	require.NotNil(t, v.Sequential, "variant %s's gate", name)
	return *v.Sequential
}

// TestSequentialPerVariant: with Config.Sequential and variants, each
// variant has its own gate; the one that decides early stops being run
// (its remaining episodes are not claimed) while the others go on; each
// environment is still provisioned once per sample and closed; the
// report of the log decides every variant's gate as the run did; and a
// resume runs nothing of a decided variant.
func TestSequentialPerVariant(t *testing.T) {
	t.Parallel()
	const n = 200
	var calls variantCalls
	// Against a bar of 0.7: a passes always (decides "pass" within a few
	// samples), b is at the bar (undecided), c far under it (decides
	// "fail").
	e := rateVariants(n, map[string]uint64{"a": 100, "b": 70, "c": 40}, []string{"a", "b", "c"}, &calls)
	e.Sandbox = func(dataset.Sample[string]) sandbox.Spec { return sandbox.Spec{} }
	c := &counting{Provider: &sandboxtest.Fake{}}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	cfg := eval.Config{Log: log, Sandbox: c.provider(), Sequential: &report.Sequential{Bar: 0.7}, Concurrency: 4, Quiet: true, Seed: 5}
	rep, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	ran := calls.count()

	a, b, cg := gateOf(t, rep, "a"), gateOf(t, rep, "b"), gateOf(t, rep, "c")
	require.Equal(t, report.DecidedPass, a.Decision)
	require.Equal(t, report.Undecided, b.Decision)
	require.Equal(t, report.DecidedFail, cg.Decision)
	// A decided variant's claims stop within the window: the concurrency
	// plus 5%, and a block of samples (a sample's variants are claimed
	// within its block).
	require.LessOrEqual(t, ran["a"], a.Samples+2*4+1, "a stopped being run once decided")
	require.Equal(t, n, ran["b"], "b, undecided, runs every sample")
	require.Less(t, ran["c"], n, "c stopped being run once decided")
	require.Equal(t, n-ran["a"], a.NotRun, "a's gate says what it did not run")
	require.Equal(t, int32(n), c.provisions.Load(), "one environment per sample still")
	c.requireAllClosed(t)
	require.NotEqual(t, "", rep.GateFailure(), "b's gate is undecided, c's failed: the run does not pass")
	text := rep.String()
	require.Contains(t, text, fmt.Sprintf("sequential gate of a: PASS: pass rate ≥ 70.0%% at α = 0.05, decided after %d samples", a.Samples))
	require.Contains(t, text, fmt.Sprintf("; %d episodes not run", a.NotRun))
	require.Contains(t, text, "sequential gate of b: undecided after 200 samples")
	require.Contains(t, text, "sequential gate of c: FAIL: not pass rate ≥ 70.0%")

	fromLog := reportOfLog(t, log)
	for _, name := range []string{"a", "b", "c"} {
		got, want := gateOf(t, fromLog, name), gateOf(t, rep, name)
		require.Equal(t, want.Decision, got.Decision, name)
		require.Equal(t, want.Samples, got.Samples, name)
		require.Equal(t, want.Bounds, got.Bounds, name)
	}

	calls = variantCalls{}
	rep2, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Empty(t, calls.count(), "resumed, nothing runs: a and c decided, b ran every sample")
	require.Equal(t, a.Samples, gateOf(t, rep2, "a").Samples)
}

// TestSequentialPerVariantResumedDecidesAsOneRun: a run of three variants
// under the gate, stopped midway and resumed, decides every variant's
// gate at the same sample as one run that was never stopped; once every
// gate decided, the run stops claiming, and a resume runs nothing.
func TestSequentialPerVariantResumedDecidesAsOneRun(t *testing.T) {
	t.Parallel()
	const n = 400
	rate := map[string]uint64{"a": 95, "b": 40, "c": 88}
	names := []string{"a", "b", "c"}
	dir := t.TempDir()
	cfg := eval.Config{Sequential: &report.Sequential{Bar: 0.7}, Epochs: 2, Concurrency: 8, Seed: 11, Quiet: true}

	var calls variantCalls
	e := rateVariants(n, rate, names, &calls)
	one := cfg
	one.Log = filepath.Join(dir, "one.jsonl")
	want, err := e.Run(context.Background(), one)
	require.NoError(t, err)
	for _, name := range names {
		require.NotEqual(t, report.Undecided, gateOf(t, want, name).Decision, "the test needs variant %s decided", name)
	}
	total := 0
	for _, k := range calls.count() {
		total += k
	}
	require.Less(t, total, 3*2*n/2, "every gate decided: the run stopped claiming")

	var calls2 variantCalls
	e = rateVariants(n, rate, names, &calls2)
	resumed := cfg
	resumed.Log = filepath.Join(dir, "resumed.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := resumed
	stop.Sinks = []sink.Sink{&cancelAfter{n: 30, cancel: cancel}}
	_, err = e.Run(ctx, stop)
	require.Error(t, err, "stopped midway")
	got, err := e.Run(context.Background(), resumed)
	require.NoError(t, err)
	fromLog := reportOfLog(t, resumed.Log)
	for _, name := range names {
		w := gateOf(t, want, name)
		for _, r := range []*report.Report{got, fromLog} {
			g := gateOf(t, r, name)
			require.Equal(t, w.Decision, g.Decision, name)
			require.Equal(t, w.Samples, g.Samples, name)
			require.Equal(t, w.Bounds, g.Bounds, name)
		}
	}

	var calls3 variantCalls
	e = rateVariants(n, rate, names, &calls3)
	_, err = e.Run(context.Background(), resumed)
	require.NoError(t, err)
	require.Empty(t, calls3.count(), "a decided log runs nothing more")
}

// TestSequentialWithElimination: gates per variant and elimination
// together. A variant leaves the elimination tests at the claim position
// its gate decided, and an eliminated variant is no longer waited for by
// the gates, so the run neither stalls nor runs a decided variant; the
// report of the log decides as the run did, and a run stopped midway and
// resumed decides the same gates and eliminations as one run.
func TestSequentialWithElimination(t *testing.T) {
	t.Parallel()
	const n = 400
	// The gates at α = 0.001 against a bar of 0.7, elimination at 0.2: b
	// (never passes) is eliminated by a (always passes) before its gate
	// fails; a's gate passes later; c, at the bar, is undecided unless a
	// eliminates it first.
	rate := map[string]uint64{"a": 100, "b": 0, "c": 70}
	names := []string{"a", "b", "c"}
	dir := t.TempDir()
	cfg := eval.Config{Sequential: &report.Sequential{Bar: 0.7, Alpha: 0.001}, EliminateVariants: 0.2, Concurrency: 4, Seed: 7, Quiet: true}

	var calls variantCalls
	one := cfg
	one.Log = filepath.Join(dir, "one.jsonl")
	want, err := rateVariants(n, rate, names, &calls).Run(context.Background(), one)
	require.NoError(t, err)
	wantM, err := manifest.Read(one.Log)
	require.NoError(t, err)
	eliminated := map[string]bool{}
	for _, e := range wantM.Eliminations {
		eliminated[e.Variant] = true
	}
	decided := 0
	for _, name := range names {
		g := gateOf(t, want, name)
		if g.Decision != report.Undecided {
			decided++
			require.LessOrEqual(t, calls.count()[name], g.Samples+2*4+1, "%s stopped being run near its decision", name)
		}
		t.Logf("%s: gate %s after %d samples, ran %d, eliminated %v", name, g.Decision, g.Samples, calls.count()[name], eliminated[name])
	}
	require.NotEmpty(t, wantM.Eliminations, "the test needs an elimination")
	require.Positive(t, decided, "the test needs a decided gate")
	fromLog := reportOfLog(t, one.Log)
	for _, name := range names {
		require.Equal(t, gateOf(t, want, name).Decision, gateOf(t, fromLog, name).Decision, name)
		require.Equal(t, gateOf(t, want, name).Samples, gateOf(t, fromLog, name).Samples, name)
	}

	var calls2 variantCalls
	e := rateVariants(n, rate, names, &calls2)
	resumed := cfg
	resumed.Log = filepath.Join(dir, "resumed.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := resumed
	stop.Sinks = []sink.Sink{&cancelAfter{n: 25, cancel: cancel}}
	_, err = e.Run(ctx, stop)
	require.Error(t, err, "stopped midway")
	got, err := e.Run(context.Background(), resumed)
	require.NoError(t, err)
	gotM, err := manifest.Read(resumed.Log)
	require.NoError(t, err)
	strip := func(es []manifest.Elimination) []manifest.Elimination {
		out := make([]manifest.Elimination, len(es))
		for i, e := range es {
			e.Saved = 0 // episodes in flight when the first run stopped may differ
			out[i] = e
		}
		return out
	}
	require.Equal(t, strip(wantM.Eliminations), strip(gotM.Eliminations))
	for _, name := range names {
		w, g := gateOf(t, want, name), gateOf(t, got, name)
		require.Equal(t, w.Decision, g.Decision, name)
		if w.Decision == report.Undecided && eliminated[name] {
			// An eliminated variant's undecided gate was fed the records
			// of its episodes in flight at the elimination, as many as
			// the timing allowed: its count of samples is not the run's.
			continue
		}
		require.Equal(t, w.Samples, g.Samples, name)
	}
}

// TestEliminationsInTheRunsReport: the report Run returns marks the
// variants it eliminated in its leaderboard, as a report of the log does
// from its manifest, and leaves them out of the gates alike: before, the
// run's report held no eliminations, and its lowest lower bound was an
// eliminated variant's where proctor report's was the winner's.
func TestEliminationsInTheRunsReport(t *testing.T) {
	t.Parallel()
	var calls variantCalls
	e := rateVariants(200, map[string]uint64{"a": 100, "b": 0, "c": 0}, []string{"a", "b", "c"}, &calls)
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rep, err := e.Run(context.Background(), eval.Config{Log: log, EliminateVariants: 0.05, Concurrency: 4, Seed: 3, Quiet: true})
	require.NoError(t, err)
	fromLog, err := report.FromLog(log, nil)
	require.NoError(t, err)
	eliminated := 0
	for _, s := range rep.Leaderboard.Variants {
		var want *report.Standing
		for i := range fromLog.Leaderboard.Variants {
			if fromLog.Leaderboard.Variants[i].Variant == s.Variant {
				want = &fromLog.Leaderboard.Variants[i]
			}
		}
		require.NotNil(t, want, s.Variant)
		require.Equal(t, want.Eliminated, s.Eliminated, s.Variant)
		if s.Eliminated != nil {
			eliminated++
			require.Equal(t, "a", s.Eliminated.By)
			require.Positive(t, s.Eliminated.Saved)
		}
	}
	require.Equal(t, 2, eliminated, "b and c are eliminated")
	lo, name := rep.GateBoundVariant(false)
	wantLo, wantName := fromLog.GateBoundVariant(false)
	require.Equal(t, "a", name, "the gate's lowest bound is of a variant not eliminated")
	require.Equal(t, wantName, name)
	require.Equal(t, wantLo, lo)
}

// TestEliminationOfManyVariants: elimination is not bounded at 64
// variants (its set of eliminated variants was one machine word, and
// more were refused): of 70, the one that always passes eliminates the
// 69 that always fail, the 65th on as the first.
func TestEliminationOfManyVariants(t *testing.T) {
	t.Parallel()
	const n, k = 120, 70
	rate := map[string]uint64{"v00": 100}
	var names []string
	for i := range k {
		names = append(names, fmt.Sprintf("v%02d", i))
	}
	var calls variantCalls
	log := filepath.Join(t.TempDir(), "run.jsonl")
	_, err := rateVariants(n, rate, names, &calls).Run(context.Background(), eval.Config{Log: log, EliminateVariants: 0.05, Concurrency: 4, Seed: 1, Quiet: true})
	require.NoError(t, err)
	m, err := manifest.Read(log)
	require.NoError(t, err)
	require.Len(t, m.Eliminations, k-1)
	ran := calls.count()
	require.Equal(t, n, ran["v00"])
	for _, e := range m.Eliminations {
		require.Equal(t, "v00", e.By)
		require.Less(t, ran[e.Variant], n, "%s stopped being run", e.Variant)
	}
	require.Less(t, ran["v69"], n)
}

// TestSequentialPerVariantSelected: a run of some variants
// (Config.Variants) is decided once those are; running the others later
// on the same log runs only theirs, and the decided one stays decided.
func TestSequentialPerVariantSelected(t *testing.T) {
	t.Parallel()
	const n = 200
	rate := map[string]uint64{"a": 100, "b": 0}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	cfg := eval.Config{Log: log, Sequential: &report.Sequential{Bar: 0.7}, Concurrency: 4, Seed: 2, Quiet: true}

	var calls variantCalls
	onlyA := cfg
	onlyA.Variants = []string{"a"}
	rep, err := rateVariants(n, rate, []string{"a", "b"}, &calls).Run(context.Background(), onlyA)
	require.NoError(t, err)
	a := gateOf(t, rep, "a")
	require.Equal(t, report.DecidedPass, a.Decision)
	require.Empty(t, calls.count()["b"], "b is not selected")
	require.Less(t, calls.count()["a"], n, "the run stopped once a, its one variant, decided")

	var calls2 variantCalls
	rep, err = rateVariants(n, rate, []string{"a", "b"}, &calls2).Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Empty(t, calls2.count()["a"], "a decided: nothing of it runs")
	require.Positive(t, calls2.count()["b"])
	require.Less(t, calls2.count()["b"], n, "b stops once decided")
	require.Equal(t, a.Samples, gateOf(t, rep, "a").Samples)
	require.Equal(t, report.DecidedFail, gateOf(t, rep, "b").Decision)
}
