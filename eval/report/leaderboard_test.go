package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// variantRun is one variant's outcomes: pass(i, epoch) over samples
// s0…s(n-1), with cost per episode and latency.
type variantRun struct {
	name   string
	pass   func(i, epoch int) bool
	cost   float64
	ms     float64
	errors func(i, epoch int) bool // nil: none
}

// variantRecords builds the records of a log of variants, interleaved by
// sample as a run records them.
func variantRecords(n, epochs int, vs ...variantRun) []sink.Record {
	var recs []sink.Record
	for i := range n {
		for _, v := range vs {
			for ep := range epochs {
				r := sink.Record{Schema: 1, RunID: "r", Eval: "e", Variant: v.name, SampleID: fmt.Sprintf("s%d", i), Epoch: ep,
					Status: sink.Fail, CostUSD: v.cost, DurationMS: v.ms, Tags: map[string]string{"k": fmt.Sprint(i % 2)}}
				switch {
				case v.errors != nil && v.errors(i, ep):
					r.Status, r.Error = sink.Error, "boom"
				case v.pass(i, ep):
					r.Status, r.Score = sink.Pass, 1
				}
				recs = append(recs, r)
			}
		}
	}
	return recs
}

// recordsOfVariant keeps one variant's records, without the variant: a log
// of that variant alone.
func recordsOfVariant(recs []sink.Record, name string) []sink.Record {
	var out []sink.Record
	for _, r := range recs {
		if r.Variant == name {
			r.Variant = ""
			out = append(out, r)
		}
	}
	return out
}

// TestLeaderboardIsEachVariantsOwnReport: each standing is the report of a
// log of that variant alone (pass rate, clustered interval, worst case,
// cost, latency), the variants are ranked, and nothing is pooled.
func TestLeaderboardIsEachVariantsOwnReport(t *testing.T) {
	t.Parallel()
	recs := variantRecords(40, 3,
		variantRun{name: "cheap", pass: func(i, ep int) bool { return i%2 == 0 }, cost: 0.001, ms: 100},
		variantRun{name: "strong", pass: func(i, ep int) bool { return i%5 != 0 || ep == 0 }, cost: 0.01, ms: 300,
			errors: func(i, ep int) bool { return i == 7 && ep == 2 }},
		variantRun{name: "mid", pass: func(i, ep int) bool { return i%3 != 0 }, cost: 0.02, ms: 200})
	rep, err := report.FromRecords(seqOf(recs), nil)
	require.NoError(t, err)
	lb := rep.Leaderboard
	require.NotNil(t, lb)
	require.Equal(t, []string{"strong", "mid", "cheap"}, rep.VariantNames())
	require.True(t, math.IsNaN(rep.PassRate), "a report of variants pools no pass rate")
	require.Equal(t, report.MethodByVariant, rep.Interval.Method)
	require.Nil(t, rep.WorstCase)
	require.Equal(t, 40*3*3, rep.Episodes)
	for _, s := range lb.Variants {
		alone, err := report.FromRecords(seqOf(recordsOfVariant(recs, s.Variant)), nil)
		require.NoError(t, err)
		require.Equal(t, alone.PassRate, s.PassRate, s.Variant)
		require.Equal(t, alone.Interval, s.Interval, s.Variant)
		require.Equal(t, report.MethodClustered, s.Interval.Method)
		require.Equal(t, alone.WorstCase, s.WorstCase, s.Variant)
		require.Equal(t, alone.Latency, s.Latency, s.Variant)
		require.InDelta(t, alone.Usage.CostUSD/40, s.CostPerSample, 1e-12)
		require.Equal(t, 40, s.Samples)
		require.Equal(t, alone.PassRate, rep.VariantReport(s.Variant).PassRate)
	}
	require.NotNil(t, lb.Variants[0].WorstCase, "strong errored once")
	// The frontier: cheap (cheapest), strong (best); mid is dominated by strong.
	require.Equal(t, []string{"cheap", "strong"}, lb.Frontier)
	// Pairs: every pair once, the better first, A − B as Compare gives it.
	require.Len(t, lb.Pairs, 3)
	for _, d := range lb.Pairs {
		c := report.Compare(rep.VariantReport(d.B), rep.VariantReport(d.A), nil)
		require.Equal(t, c.PassRate, d.PassRate)
		require.GreaterOrEqual(t, d.HolmP, d.PassRate.P)
	}
	c := report.Compare(rep.VariantReport("cheap"), rep, nil)
	require.Contains(t, strings.Join(c.Warnings, "\n"), "the head is a log of 3 variants (strong, mid, cheap), pooled here")
	sum := 0.0
	for _, s := range lb.Variants {
		sum += s.PBest
	}
	require.InDelta(t, 1, sum, 1e-9)
	require.Equal(t, 1000, lb.Resamples)
	require.Greater(t, lb.Variants[0].PBest, 0.95)

	text := rep.String()
	for _, want := range []string{"3 variants, not pooled", "leaderboard", "pairwise differences", "Holm", "P(best)", "Pareto frontier", "1000 bootstrap resamples"} {
		require.Contains(t, text, want)
	}
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(b, &back))
	require.Nil(t, back["pass_rate"], "no pooled pass rate in JSON")
	require.Len(t, back["leaderboard"].(map[string]any)["variants"], 3)
}

// TestLeaderboardDeterministic: the same records in another order give the
// same leaderboard, P(best) included (its seed is the records' hash).
func TestLeaderboardDeterministic(t *testing.T) {
	t.Parallel()
	recs := variantRecords(30, 2,
		variantRun{name: "a", pass: func(i, ep int) bool { return (i*7+ep)%3 != 0 }},
		variantRun{name: "b", pass: func(i, ep int) bool { return (i*5+ep)%3 != 0 }})
	one, err := report.FromRecords(seqOf(recs), nil)
	require.NoError(t, err)
	rev := make([]sink.Record, len(recs))
	for i, r := range recs {
		rev[len(recs)-1-i] = r
	}
	two, err := report.FromRecords(seqOf(rev), nil)
	require.NoError(t, err)
	require.Equal(t, one.Leaderboard.Variants, two.Leaderboard.Variants)
	require.Equal(t, one.Leaderboard.Seed, two.Leaderboard.Seed)
	require.Equal(t, one.Leaderboard.Pairs, two.Leaderboard.Pairs)
}

// TestVariantGates: the gates hold per variant. A variant under the bar
// fails GateBound however good another is; a variant the run eliminated
// is no candidate and gates nothing; each variant's sequential gate is
// decided on its own records.
func TestVariantGates(t *testing.T) {
	t.Parallel()
	recs := variantRecords(60, 1,
		variantRun{name: "good", pass: func(i, ep int) bool { return i%10 != 0 }},
		variantRun{name: "bad", pass: func(i, ep int) bool { return i%2 == 0 }})
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	for _, r := range recs {
		require.NoError(t, w.Write(t.Context(), r))
	}
	require.NoError(t, w.Close(t.Context()))

	rep, err := report.FromLog(log, &report.Options{Sequential: &report.Sequential{Bar: 0.7, Samples: 60, Epochs: 1}})
	require.NoError(t, err)
	lo, which := rep.GateBoundVariant(false)
	require.Equal(t, "bad", which)
	require.Equal(t, rep.VariantReport("bad").GateBound(false), lo)
	require.Equal(t, lo, rep.GateBound(false))
	why := rep.GateFailure()
	require.Contains(t, why, "variant bad: the sequential gate did not pass")
	require.NotContains(t, why, "variant good")
	require.Equal(t, report.DecidedPass, rep.Leaderboard.Variants[0].Sequential.Decision)
	require.Equal(t, report.DecidedFail, rep.Leaderboard.Variants[1].Sequential.Decision)

	// Eliminated by the run: the manifest says so, the report shows what
	// it saved, and the gate leaves it out.
	require.NoError(t, manifest.Write(log, &manifest.Manifest{Schema: manifest.Schema, Eval: "e", RunID: "r",
		Eliminations: []manifest.Elimination{{Variant: "bad", By: "good", Alpha: 0.05, AfterSamples: 60, Saved: 140}}}))
	rep, err = report.FromLog(log, &report.Options{Sequential: &report.Sequential{Bar: 0.7, Samples: 60, Epochs: 1}})
	require.NoError(t, err)
	require.Equal(t, "", rep.GateFailure())
	lo, which = rep.GateBoundVariant(false)
	require.Equal(t, "good", which)
	require.Equal(t, rep.VariantReport("good").GateBound(false), lo)
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b))
	require.Contains(t, b.String(), "eliminated: bad stopped after 60 samples; saved 140 episodes (worse than good at α = 0.05)")
	require.True(t, strings.Contains(b.String(), "eliminated by good"))
}

// TestPBestNormalMatchesTheBootstrap: the normal approximation a large log
// gets agrees with the bootstrap on a log both can afford: 3,000 samples
// of three close variants, 2,000 resamples each; within 3 points.
func TestPBestNormalMatchesTheBootstrap(t *testing.T) {
	recs := variantRecords(3000, 2,
		variantRun{name: "a", pass: func(i, ep int) bool { return (i*7919+ep*31)%100 < 61 }},
		variantRun{name: "b", pass: func(i, ep int) bool { return (i*104729+ep*17)%100 < 60 }},
		variantRun{name: "c", pass: func(i, ep int) bool { return (i*1299709+ep*13)%100 < 58 }})
	opts := &report.Options{Resamples: 2000}
	boot, err := report.FromRecords(seqOf(recs), opts)
	require.NoError(t, err)
	require.Equal(t, report.PBestBootstrap, boot.Leaderboard.PBestMethod)
	restore := report.SetPBestBudget(0)
	normal, err := report.FromRecords(seqOf(recs), opts)
	restore()
	require.NoError(t, err)
	require.Equal(t, report.PBestNormal, normal.Leaderboard.PBestMethod)
	require.Contains(t, normal.String(), "normal approximation")
	for i, s := range boot.Leaderboard.Variants {
		n := normal.Leaderboard.Variants[i]
		t.Logf("%s: P(best) bootstrap %.3f, normal %.3f", s.Variant, s.PBest, n.PBest)
		require.InDelta(t, s.PBest, n.PBest, 0.03, s.Variant)
	}
}

// BenchmarkReportOfVariants folds 4 variants × 5,000 samples × 2 epochs
// into a report, against the same 40,000 records as one run without
// variants: the cost of the leaderboard (each variant's own aggregator,
// 6 paired comparisons, 1,000 resamples of P(best)).
func BenchmarkReportOfVariants(b *testing.B) {
	vs := []variantRun{
		{name: "a", pass: func(i, ep int) bool { return (i+ep)%3 != 0 }, cost: 0.01, ms: 100},
		{name: "b", pass: func(i, ep int) bool { return (i+ep)%4 != 0 }, cost: 0.02, ms: 200},
		{name: "c", pass: func(i, ep int) bool { return (i+ep)%5 != 0 }, cost: 0.03, ms: 300},
		{name: "d", pass: func(i, ep int) bool { return (i+ep)%2 != 0 }, cost: 0.04, ms: 400},
	}
	recs := variantRecords(5000, 2, vs...)
	plain := make([]sink.Record, len(recs))
	for i, r := range recs {
		r.Variant = ""
		r.SampleID = fmt.Sprintf("%s-%s", r.SampleID, vs[i/2%4].name)
		plain[i] = r
	}
	for _, c := range []struct {
		name string
		recs []sink.Record
	}{{"one-run", plain}, {"4-variants", recs}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := report.FromRecords(seqOf(c.recs), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestNoPooledSequentialDecision: an indexed aggregator (the engine's)
// with a sequential gate decides nothing from records of variants as they
// arrive, however clearly they pooled would pass: the gate is each
// variant's, and the report decides it per variant.
func TestNoPooledSequentialDecision(t *testing.T) {
	t.Parallel()
	const n = 400
	id := func(i int) string { return fmt.Sprintf("s%d", i) }
	var order []string
	for _, i := range report.ClaimOrder(1, n, id) {
		order = append(order, id(int(i)))
	}
	seq := &report.Sequential{Bar: 0.5, Seed: 1, Epochs: 1, Samples: n, Order: order}
	require.NoError(t, seq.Load())
	a := report.NewIndexed(&report.Options{Sequential: seq, Resamples: -1}, n, func(i int) (string, map[string]string) { return id(i), nil })
	for _, o := range report.ClaimOrder(1, n, id) {
		for _, v := range []string{"good", "bad"} {
			r := sink.Record{Schema: 1, RunID: "r", Eval: "e", Variant: v, SampleID: id(int(o)), Status: sink.Pass, Score: 1}
			if v == "bad" && o%5 == 0 {
				r.Status, r.Score = sink.Fail, 0
			}
			a.AddAt(int(o), &r)
		}
	}
	d, _ := a.Decided()
	require.Equal(t, report.Undecided, d, "no pooled decision")
	rep := a.Report()
	require.Nil(t, rep.Sequential)
	for _, s := range rep.Leaderboard.Variants {
		require.Equal(t, report.DecidedPass, s.Sequential.Decision, s.Variant)
	}
}

// TestLeaderboardOfNamesThatTieNaturally: variants "v1" and "v01", and
// samples "s1" and "s01", equal in natural order, give the same
// leaderboard (P(best)'s seed and resamples included) in any record
// order: names that tie naturally are ordered bytewise.
func TestLeaderboardOfNamesThatTieNaturally(t *testing.T) {
	t.Parallel()
	var recs []sink.Record
	for i, id := range []string{"s1", "s01", "s2", "s02", "s3", "s03"} {
		for j, v := range []string{"v1", "v01"} {
			r := sink.Record{Schema: 1, RunID: "r", Eval: "e", Variant: v, SampleID: id, Status: sink.Fail}
			if (i+j)%3 != 0 {
				r.Status, r.Score = sink.Pass, 1
			}
			recs = append(recs, r)
		}
	}
	one, err := report.FromRecords(seqOf(recs), nil)
	require.NoError(t, err)
	slices.Reverse(recs)
	two, err := report.FromRecords(seqOf(recs), nil)
	require.NoError(t, err)
	a, err := json.Marshal(one)
	require.NoError(t, err)
	b, err := json.Marshal(two)
	require.NoError(t, err)
	require.JSONEq(t, string(a), string(b))
}
