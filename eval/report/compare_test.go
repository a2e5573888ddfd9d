package report_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/scorer"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/stats"
)

// outcomes is one sample of a synthetic run: one letter per epoch, P
// (pass, score 1), F (fail, score 0.25), E (error) or U (unscored).
type outcomes struct {
	id   string
	eps  string
	tags map[string]string
}

// synthetic builds the report of a run with the given outcomes, through
// ReportFromRecords like a log would.
func synthetic(t testing.TB, name, runID string, ss []outcomes) *report.Report {
	t.Helper()
	var recs iter.Seq2[sink.Record, error] = func(yield func(sink.Record, error) bool) {
		for _, s := range ss {
			for e, o := range s.eps {
				r := sink.Record{Schema: 1, RunID: runID, Eval: name, SampleID: s.id, Epoch: e, Tags: s.tags}
				switch o {
				case 'P':
					r.Status, r.Score = sink.Pass, 1
				case 'F':
					r.Status, r.Score = sink.Fail, 0.25
				case 'E':
					r.Status, r.ErrorKind = sink.Error, sink.KindHarness
				case 'U':
					r.Status = sink.Unscored
				default:
					panic("bad outcome " + string(o))
				}
				if !yield(r, nil) {
					return
				}
			}
		}
	}
	rep, err := report.FromRecords(recs, &report.Options{Resamples: -1})
	require.NoError(t, err)
	return rep
}

// run1 builds outcomes s0…s(n−1) of one epoch each: pass unless fail(i).
func run1(n int, fail func(i int) bool) []outcomes {
	ss := make([]outcomes, n)
	for i := range ss {
		ss[i] = outcomes{id: fmt.Sprintf("s%d", i), eps: "P"}
		if fail(i) {
			ss[i].eps = "F"
		}
	}
	return ss
}

var equateNaN = cmpopts.EquateNaNs()

// TestCompareHandComputed checks a comparison against numbers computed by
// hand: 10 samples, 2 epochs, known per-sample pass rates.
func TestCompareHandComputed(t *testing.T) {
	t.Parallel()
	baseEps := []string{"PP", "PP", "PP", "PF", "FP", "FF", "FF", "PP", "PP", "FF"}
	headEps := []string{"PP", "FF", "PF", "FF", "PP", "FF", "PP", "PP", "FP", "FF"}
	// Per-sample pass rates: base (1, 1, 1, .5, .5, 0, 0, 1, 1, 0), head
	// (1, 0, .5, 0, 1, 0, 1, 1, .5, 0); differences head − base:
	d := []float64{0, -1, -0.5, -0.5, 0.5, 0, 1, 0, -0.5, 0}
	// mean −0.1; Σ(d − d̄)² = 2.9, so SE = √(2.9/9/10) ≈ 0.1795.
	const mean = -0.1
	se := math.Sqrt(2.9 / 9 / 10)
	var base, head []outcomes
	for i := range baseEps {
		tags := map[string]string{"level": "easy", "lang": "go"}
		if i >= 5 {
			tags["level"] = "hard"
		}
		if i%2 == 1 {
			tags["lang"] = "py"
		}
		id := fmt.Sprintf("s%d", i)
		base = append(base, outcomes{id, baseEps[i], tags})
		head = append(head, outcomes{id, headEps[i], tags})
	}
	c := report.Compare(synthetic(t, "demo", "base-run", base), synthetic(t, "demo", "head-run", head), nil)

	require.Equal(t, 10, c.Paired)
	require.Equal(t, 0.95, c.Level)
	require.InDelta(t, mean, c.PassRate.Mean, 1e-12)
	require.InDelta(t, se, c.PassRate.SE, 1e-12)
	q := 2.262157 // t quantile 0.975 with 9 degrees of freedom
	require.InDelta(t, mean-q*se, c.PassRate.Lo, 1e-6)
	require.InDelta(t, mean+q*se, c.PassRate.Hi, 1e-6)
	require.InDelta(t, 0.6, c.PassRate.MeanA, 1e-12)
	require.InDelta(t, 0.5, c.PassRate.MeanB, 1e-12)
	// Scores are 1 for a pass and 0.25 for a fail: the mean score of a
	// sample is 0.25 + 0.75·rate, so the score difference is 0.75·d.
	require.InDelta(t, 0.75*mean, c.Score.Mean, 1e-12)
	require.InDelta(t, 0.75*se, c.Score.SE, 1e-12)

	// Passing is rate ≥ 0.5: s1 (1 → 0) and s3 (.5 → 0) regressed, s6
	// (0 → 1) improved; s2 and s8 (1 → .5) still pass.
	require.Equal(t, 2, c.Regressions)
	require.Equal(t, 1, c.Improvements)
	require.Equal(t, stats.McNemar(2, 1), c.McNemarP)
	wantFlips := []report.Flip{
		{SampleID: "s1", Regression: true, Base: 1, Head: 0},
		{SampleID: "s3", Regression: true, Base: 0.5, Head: 0},
		{SampleID: "s6", Base: 0, Head: 1},
	}
	if diff := cmp.Diff(wantFlips, c.Flips); diff != "" {
		t.Errorf("flips (-want +got):\n%s", diff)
	}
	require.False(t, c.Regressed, "the interval contains 0")
	require.False(t, c.NonInferior, "margin 0 and a lower bound under 0")
	require.Empty(t, c.OnlyBase)
	require.Empty(t, c.OnlyHead)
	require.Empty(t, c.Warnings)

	// By tag: the difference within each group, and Holm across groups.
	groups := []struct {
		tag, value string
		idx        []int
		mean       float64
	}{
		{"lang", "go", []int{0, 2, 4, 6, 8}, 0.1},
		{"lang", "py", []int{1, 3, 5, 7, 9}, -0.3},
		{"level", "easy", []int{0, 1, 2, 3, 4}, -0.3},
		{"level", "hard", []int{5, 6, 7, 8, 9}, 0.1},
	}
	rate := func(eps string) float64 { return float64(strings.Count(eps, "P")) / float64(len(eps)) }
	var want []report.TagDifference
	var ps []float64
	for _, g := range groups {
		var a, b []float64
		for _, i := range g.idx {
			a = append(a, rate(baseEps[i]))
			b = append(b, rate(headEps[i]))
			require.InDelta(t, d[i], rate(headEps[i])-rate(baseEps[i]), 1e-12)
		}
		pd := stats.Paired(a, b, 0.95)
		require.InDelta(t, g.mean, pd.Mean, 1e-12, "%s=%s", g.tag, g.value)
		want = append(want, report.TagDifference{Tag: g.tag, Value: g.value, PassRate: pd})
		ps = append(ps, pd.P)
	}
	for i, p := range stats.Holm(ps) {
		want[i].HolmP = p
	}
	if diff := cmp.Diff(want, c.ByTag, equateNaN, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("by tag (-want +got):\n%s", diff)
	}
}

func TestCompareMissingSamples(t *testing.T) {
	t.Parallel()
	base := []outcomes{
		{id: "s0", eps: "P"}, {id: "s1", eps: "F"}, {id: "s2", eps: "P"}, {id: "s3", eps: "P"},
		{id: "s4", eps: "U"}, // unscored in base only
		{id: "s5", eps: "P"}, // errored in head
		{id: "s6", eps: "F"}, // missing from head
		{id: "s8", eps: "E"}, // scored in neither
	}
	head := []outcomes{
		{id: "s0", eps: "P"}, {id: "s1", eps: "P"}, {id: "s2", eps: "P"}, {id: "s3", eps: "F"},
		{id: "s4", eps: "P"},
		{id: "s5", eps: "E"},
		{id: "s7", eps: "P"}, // missing from base
		{id: "s8", eps: "U"},
	}
	c := report.Compare(synthetic(t, "demo", "b", base), synthetic(t, "demo", "h", head), nil)
	require.Equal(t, 4, c.Paired)
	if diff := cmp.Diff([]string{"s5", "s6"}, c.OnlyBase); diff != "" {
		t.Errorf("OnlyBase (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"s4", "s7"}, c.OnlyHead); diff != "" {
		t.Errorf("OnlyHead (-want +got):\n%s", diff)
	}
	require.Equal(t, 4, c.PassRate.N)
	require.InDelta(t, 0, c.PassRate.Mean, 1e-12) // s1 improved, s3 regressed
	warnings := strings.Join(c.Warnings, "\n")
	for _, w := range []string{
		"2 samples scored in the base only (missing from the head, or only errored or unscored there), left out of the comparison: s5, s6",
		"2 samples scored in the head only (missing from the base, or only errored or unscored there), left out of the comparison: s4, s7",
		"1 samples scored in neither run",
		"errored episodes differ: base 1/8 (12.5%), head 1/8 (12.5%)", // not this one: equal rates
	} {
		if strings.HasPrefix(w, "errored") {
			require.NotContains(t, warnings, w)
			continue
		}
		require.Contains(t, warnings, w)
	}

	// Different evals and an error rate that moved are warned about.
	head = append(head, outcomes{id: "s9", eps: "E"}, outcomes{id: "s10", eps: "E"})
	c = report.Compare(synthetic(t, "demo", "b", base), synthetic(t, "demo-v2", "h", head), nil)
	warnings = strings.Join(c.Warnings, "\n")
	require.Contains(t, warnings, `comparing different evals: base "demo", head "demo-v2"`)
	require.Contains(t, warnings, "errored episodes differ: base 1/8 (12.5%), head 3/10 (30.0%)")
}

func TestCompareVerdicts(t *testing.T) {
	t.Parallel()
	// The base passes 90 of 100 samples: all but i%10 == 0.
	base := run1(100, func(i int) bool { return i%10 == 0 })
	tests := []struct {
		name        string
		headFails   func(i int) bool
		margin      float64
		regressed   bool
		nonInferior bool
		flips       [2]int // regressions, improvements
	}{
		{"identical", func(i int) bool { return i%10 == 0 }, 0, false, true, [2]int{0, 0}},
		{"clearly worse", func(i int) bool { return i%10 <= 3 }, 0.05, true, false, [2]int{30, 0}},
		{"clearly better", func(i int) bool { return false }, 0, false, true, [2]int{0, 10}},
		// Two samples swap each way: no difference on average, but an
		// interval of about ±4 points, inside a 5-point margin only.
		{"noise, margin 5 points", func(i int) bool { return i%10 == 0 && i >= 20 || i%10 == 1 && i < 20 }, 0.05, false, true, [2]int{2, 2}},
		{"noise, margin 0", func(i int) bool { return i%10 == 0 && i >= 20 || i%10 == 1 && i < 20 }, 0, false, false, [2]int{2, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := report.Compare(synthetic(t, "demo", "b", base), synthetic(t, "demo", "h", run1(100, tc.headFails)), &report.CompareOptions{Margin: tc.margin})
			require.Equal(t, 100, c.Paired)
			require.Equal(t, tc.regressed, c.Regressed, "Regressed: %v", c.PassRate)
			require.Equal(t, tc.nonInferior, c.NonInferior, "NonInferior: %v", c.PassRate)
			require.Equal(t, tc.flips, [2]int{c.Regressions, c.Improvements})
			require.Len(t, c.Flips, c.Regressions+c.Improvements)
			require.Equal(t, stats.McNemar(c.Regressions, c.Improvements), c.McNemarP)
			for i, f := range c.Flips {
				require.Equal(t, i < c.Regressions, f.Regression, "regressions first")
			}
		})
	}
}

func TestCompareIdentical(t *testing.T) {
	t.Parallel()
	ss := []outcomes{{id: "a", eps: "PPF"}, {id: "b", eps: "FFF"}, {id: "c", eps: "PPP"}, {id: "d", eps: "PFU"}}
	c := report.Compare(synthetic(t, "demo", "r1", ss), synthetic(t, "demo", "r2", ss), nil)
	require.Equal(t, 4, c.Paired)
	require.Zero(t, c.PassRate.Mean)
	require.Zero(t, c.PassRate.SE)
	require.Zero(t, c.Score.Mean)
	require.Equal(t, 1.0, c.PassRate.P)
	require.Equal(t, 1.0, c.McNemarP)
	require.True(t, c.NonInferior)
	require.False(t, c.Regressed)
	require.Empty(t, c.Flips)
	// Only the runs' own warning: 1 of 12 episodes unscored is over the
	// 5% a report allows.
	require.Len(t, c.Warnings, 2)
	for _, w := range c.Warnings {
		require.Contains(t, w, "errored or were unscored, over the 5.0%")
	}
}

func TestCompareFlipsCapped(t *testing.T) {
	t.Parallel()
	base := run1(100, func(i int) bool { return i >= 90 })
	head := run1(100, func(i int) bool { return i < 30 })
	c := report.Compare(synthetic(t, "demo", "b", base), synthetic(t, "demo", "h", head), &report.CompareOptions{MaxFlips: 35})
	require.Equal(t, 30, c.Regressions)
	require.Equal(t, 10, c.Improvements)
	require.Len(t, c.Flips, 35)
	require.Equal(t, 5, c.FlipsOmitted)
	require.Equal(t, "s0", c.Flips[0].SampleID)
	require.True(t, c.Flips[29].Regression)
	require.Equal(t, report.Flip{SampleID: "s90", Base: 0, Head: 1}, c.Flips[30])
}

func TestCompareJSON(t *testing.T) {
	t.Parallel()
	// One paired sample: SE, the interval, P and the correlation are NaN.
	one := []outcomes{{id: "a", eps: "P", tags: map[string]string{"k": "v"}}}
	c := report.Compare(synthetic(t, "demo", "b", one), synthetic(t, "demo", "h", one), nil)
	require.True(t, math.IsNaN(c.PassRate.SE))
	b, err := json.Marshal(c)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	want := map[string]any{
		"mean": 0.0, "se": nil, "lo": nil, "hi": nil, "level": 0.95, "p": nil,
		"correlation": nil, "n": 1.0, "mean_base": 1.0, "mean_head": 1.0,
	}
	if diff := cmp.Diff(want, got["pass_rate"]); diff != "" {
		t.Errorf("pass_rate (-want +got):\n%s", diff)
	}
	for _, k := range []string{"base_eval", "base_run_id", "head_run_id", "paired", "mcnemar_p", "base_only", "head_only", "regressed", "non_inferior", "by_tag", "method"} {
		require.Contains(t, got, k)
	}
	require.Equal(t, nil, got["by_tag"].([]any)[0].(map[string]any)["holm_p"])

	// A value marshals too.
	_, err = json.Marshal(*c)
	require.NoError(t, err)
}

func TestCompareNeedsSampleResults(t *testing.T) {
	t.Parallel()
	rep := synthetic(t, "demo", "b", run1(5, func(int) bool { return false }))
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var decoded report.Report
	require.NoError(t, json.Unmarshal(b, &decoded))
	c := report.Compare(&decoded, rep, nil)
	require.Zero(t, c.Paired)
	require.False(t, c.NonInferior)
	require.Contains(t, strings.Join(c.Warnings, "\n"), "the base report has no per-sample results")
}

func TestCompareText(t *testing.T) {
	t.Parallel()
	tags := func(i int) map[string]string {
		return map[string]string{"difficulty": []string{"easy", "hard"}[i%2]}
	}
	// The base fails i%10 = 0; the head passes s0 and s10 (2 improvements)
	// and fails i%10 = 1 and 2 under 50 (10 regressions).
	base := run1(100, func(i int) bool { return i%10 == 0 })
	head := run1(100, func(i int) bool { return i%10 == 0 && i >= 20 || (i%10 == 1 || i%10 == 2) && i < 50 })
	for i := range base {
		base[i].tags, head[i].tags = tags(i), tags(i)
	}
	c := report.Compare(synthetic(t, "addition", "run-base", base), synthetic(t, "addition", "run-head", head), &report.CompareOptions{Margin: 0.02})
	var b strings.Builder
	require.NoError(t, c.WriteText(&b))
	text := b.String()
	t.Log("\n" + text)
	for _, s := range []string{
		"compare addition: base run run-base → head run run-head",
		"paired samples   100",
		"pass rate        90.0%",
		"paired t over samples",
		"McNemar (exact)  10 pass→fail",
		"verdict: REGRESSED",
		"verdict: NOT non-inferior at margin 2.0 pts",
		"regressions (pass → fail): 10 (10 listed)",
		"improvements (fail → pass): 2 (2 listed)",
		"by tag (paired t per group; Holm-adjusted across 2 groups)",
	} {
		require.Contains(t, text, s)
	}
	b.Reset()
	require.NoError(t, c.WriteMarkdown(&b))
	require.Contains(t, b.String(), "| pass rate | 90.0% | 82.0% | -8.0 pts |")
	require.Contains(t, b.String(), "- verdict: REGRESSED")
}

// TestCompareIntervalCalibrated simulates comparisons of a head that is
// truly the same as the base (the same per-sample pass probabilities,
// independent draws): the 95% interval of the difference must contain 0 in
// about 95% of them.
func TestCompareIntervalCalibrated(t *testing.T) {
	t.Parallel()
	for _, epochs := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d epochs", epochs), func(t *testing.T) {
			t.Parallel()
			const samples, sims = 300, 200
			rng := rand.New(rand.NewPCG(7, uint64(epochs)))
			p := make([]float64, samples)
			for i := range p {
				p[i] = rng.Float64() // hard and easy samples alike
			}
			draw := func() []outcomes {
				ss := make([]outcomes, samples)
				for i := range ss {
					eps := make([]byte, epochs)
					for e := range eps {
						eps[e] = 'F'
						if rng.Float64() < p[i] {
							eps[e] = 'P'
						}
					}
					ss[i] = outcomes{id: fmt.Sprintf("s%d", i), eps: string(eps)}
				}
				return ss
			}
			covered := 0
			for range sims {
				c := report.Compare(synthetic(t, "sim", "b", draw()), synthetic(t, "sim", "h", draw()), nil)
				require.Equal(t, samples, c.Paired)
				if c.PassRate.Lo <= 0 && 0 <= c.PassRate.Hi {
					covered++
				}
			}
			coverage := float64(covered) / sims
			t.Logf("coverage %.3f", coverage)
			require.GreaterOrEqual(t, coverage, 0.90)
			require.LessOrEqual(t, coverage, 0.99)
		})
	}
}

// TestCompareLogs runs an eval twice into real logs and compares them,
// from the logs and from the reports Run returned.
func TestCompareLogs(t *testing.T) {
	t.Parallel()
	var d dataset.Slice[int]
	for i := range 60 {
		d = append(d, dataset.Sample[int]{ID: fmt.Sprintf("q%d", i), Input: i, Tags: map[string]string{"parity": []string{"even", "odd"}[i%2]}})
	}
	agent := func(wrong func(i, epoch int) bool) harness.Harness[int, string] {
		return harness.Func[int, string](func(_ context.Context, ep *harness.Episode[int]) (string, error) {
			if wrong(ep.Sample.Input, ep.Epoch) {
				return "no", nil
			}
			return "ok", nil
		})
	}
	run := func(name string, wrong func(i, epoch int) bool) (string, *report.Report) {
		e := &eval.Eval[int, string]{Name: "parity", Dataset: d, Harness: agent(wrong), Judge: scorer.Exact(func(int) string { return "ok" })}
		log := filepath.Join(t.TempDir(), name+".jsonl")
		rep, err := e.Run(t.Context(), eval.Config{Log: log, Epochs: 2, Concurrency: 4})
		require.NoError(t, err)
		return log, rep
	}
	// Base: wrong on multiples of 10, both epochs. Head: also wrong on
	// i%10 == 3 in both epochs (6 regressions), and on i%10 == 7 in epoch 1
	// only (rate 0.5: still passing), and right on 0 and 10 in epoch 0
	// (rate 0.5: 2 improvements).
	baseLog, baseRep := run("base", func(i, _ int) bool { return i%10 == 0 })
	headLog, headRep := run("head", func(i, epoch int) bool {
		switch {
		case i%10 == 0:
			return i > 10 || epoch == 1
		case i%10 == 3:
			return true
		case i%10 == 7:
			return epoch == 1
		}
		return false
	})
	c, err := report.CompareLogs(baseLog, headLog, &report.CompareOptions{Margin: 0.05})
	require.NoError(t, err)
	require.Equal(t, 60, c.Paired)
	require.Equal(t, 2, c.BaseEpochs)
	require.Equal(t, baseRep.RunID, c.BaseRunID)
	require.Equal(t, headRep.RunID, c.HeadRunID)
	require.Equal(t, 6, c.Regressions)
	require.Equal(t, 2, c.Improvements)
	var regressions, improvements []string
	for _, f := range c.Flips {
		if f.Regression {
			regressions = append(regressions, f.SampleID)
			require.Equal(t, [2]float64{1, 0}, [2]float64{f.Base, f.Head})
		} else {
			improvements = append(improvements, f.SampleID)
			require.Equal(t, [2]float64{0, 0.5}, [2]float64{f.Base, f.Head})
		}
	}
	require.Equal(t, []string{"q3", "q13", "q23", "q33", "q43", "q53"}, regressions)
	require.Equal(t, []string{"q0", "q10"}, improvements)
	// Rates: base 54/60; head: 42 samples at 1, the six i%10 = 7 and q0,
	// q10 at 0.5, the rest at 0: (42 + 8·0.5)/60 = 46/60.
	require.InDelta(t, 54.0/60, c.PassRate.MeanA, 1e-12)
	require.InDelta(t, 46.0/60, c.PassRate.MeanB, 1e-12)
	require.InDelta(t, -8.0/60, c.PassRate.Mean, 1e-12)
	require.Len(t, c.ByTag, 2)
	require.Equal(t, "even", c.ByTag[0].Value)

	// The reports Run returned give the same comparison.
	direct := report.Compare(baseRep, headRep, &report.CompareOptions{Margin: 0.05})
	if diff := cmp.Diff(c, direct, equateNaN); diff != "" {
		t.Errorf("Compare(Run reports) vs CompareLogs (-logs +reports):\n%s", diff)
	}

	_, err = report.CompareLogs(filepath.Join(t.TempDir(), "missing.jsonl"), headLog, nil)
	require.ErrorContains(t, err, "report: compare: base: ")
}

func TestNaturalCompare(t *testing.T) {
	t.Parallel()
	ids := []string{"q10", "q5", "q100", "q05x", "q5a", "p9", "q", "q0"}
	slices.SortFunc(ids, report.NaturalCompare)
	require.Equal(t, []string{"p9", "q", "q0", "q5", "q5a", "q05x", "q10", "q100"}, ids)
}
