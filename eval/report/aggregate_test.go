package report_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
)

// randomRecords returns the records of a run of n samples × epochs with
// every kind of outcome, tags, weights, durations and usage.
func randomRecords(rng *rand.Rand, n, epochs int) []sink.Record {
	return randomWeightedRecords(rng, n, epochs, false)
}

// randomWeightedRecords is randomRecords with, when weighted, a weight
// other than 1 on a third of the samples' records.
func randomWeightedRecords(rng *rand.Rand, n, epochs int, weighted bool) []sink.Record {
	var recs []sink.Record
	for s := range n {
		tags := map[string]string{"difficulty": strconv.Itoa(s % 3)}
		if s%4 == 0 {
			tags["repo"] = "r" + strconv.Itoa(s%7)
		}
		for ep := range epochs {
			r := sink.Record{Schema: 1, RunID: "run", Eval: "e", SampleID: "s" + strconv.Itoa(s), Epoch: ep, Tags: tags,
				DurationMS: rng.Float64() * 100, InputTokens: int64(rng.IntN(100)), OutputTokens: int64(rng.IntN(50)), CostUSD: 0.001}
			switch k := rng.IntN(10); {
			case k < 5:
				r.Status, r.Score = sink.Pass, 1
			case k < 8:
				r.Status, r.Score, r.Reason = sink.Fail, 0.25, "wrong"
			case k < 9:
				r.Status, r.ErrorKind, r.Error = sink.Error, sink.KindHarness, "boom\nstack"
			default:
				r.Status, r.Reason = sink.Unscored, "no grade"
			}
			if weighted && s%3 == 0 {
				r.Weight = 0.25 + float64(s%5)
			}
			recs = append(recs, r)
		}
	}
	rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	return recs
}

// equalReports compares reports up to what the way they were folded may
// change: the order of SampleResults, and float rounding. Failures are listed in one order.
func equalReports(t *testing.T, want, got *report.Report) {
	t.Helper()
	opts := cmp.Options{
		cmpopts.IgnoreUnexported(report.Report{}),
		cmpopts.SortSlices(func(a, b report.SampleResult) bool { return a.ID < b.ID }),
		cmpopts.EquateApprox(0, 1e-12),
		cmpopts.EquateNaNs(),
	}
	if d := cmp.Diff(want, got, opts); d != "" {
		t.Errorf("reports differ (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want.SampleResults(), got.SampleResults(), opts); d != "" {
		t.Errorf("sample results differ (-want +got):\n%s", d)
	}
}

// Failures are listed by sample ID, epoch and attempt, and the ones listed
// under MaxFailures are the first in that order, whatever order the
// episodes finished in.
func TestFailuresInKeyOrder(t *testing.T) {
	t.Parallel()
	var recs []sink.Record
	for _, id := range []string{"b", "a10", "a9", "c", "a"} {
		for ep := range 2 {
			recs = append(recs, sink.Record{SampleID: id, Epoch: ep, Status: sink.Fail, Reason: id})
		}
	}
	recs = append(recs, sink.Record{SampleID: "a", Epoch: 1, Attempt: 1, Status: sink.Error, Error: "again"})
	want := []string{"a/0/0", "a/1/0", "a/1/1", "a10/0/0", "a10/1/0"}
	opts := &report.Options{MaxFailures: 5, Resamples: -1}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
		a := report.NewAggregator(opts)
		for i := range recs {
			a.Add(&recs[i])
		}
		rep := a.Report()
		var got []string
		for _, f := range rep.Failures {
			got = append(got, fmt.Sprintf("%s/%d/%d", f.SampleID, f.Epoch, f.Attempt))
		}
		require.Equal(t, want, got)
		require.Equal(t, len(recs)-5, rep.FailuresOmitted)
	}
}

// TestIndexedExcludesSamplesNotInTheDataset: records of samples the
// dataset no longer has (a resumed log) are counted as excluded, in none of
// the counts, and printed.
func TestIndexedExcludesSamplesNotInTheDataset(t *testing.T) {
	t.Parallel()
	ids := []string{"s0", "s1"}
	a := report.NewIndexed(nil, len(ids), func(i int) (string, map[string]string) { return ids[i], nil })
	for _, id := range []string{"s0", "gone", "s1", "gone", "also-gone"} {
		a.Add(&sink.Record{SampleID: id, Status: sink.Pass, Score: 1})
	}
	i, ok := a.Index("s1")
	require.True(t, ok)
	require.Equal(t, 1, i)
	_, ok = a.Index("gone")
	require.False(t, ok)

	rep := a.Report()
	require.Equal(t, 3, rep.Excluded)
	require.Equal(t, 2, rep.Passed)
	require.Equal(t, 2, rep.Episodes)
	require.Equal(t, 2, rep.Samples)
	require.Contains(t, rep.String(), "3 records for samples not in the dataset (excluded)")

	rep.Reused = 4
	require.Contains(t, rep.String(), "reused")
	require.NotContains(t, (&report.Report{}).String(), "reused")
}

// TestReportOrderIndependent: the same records in another order give the
// same report, bootstrap interval included.
func TestReportOrderIndependent(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	recs := randomRecords(rng, 30, 3)
	reversed := make([]sink.Record, len(recs))
	for i := range recs {
		reversed[len(recs)-1-i] = recs[i]
	}
	opts := &report.Options{Resamples: 300}
	a, b := report.NewAggregator(opts), report.NewAggregator(opts)
	for i := range recs {
		a.Add(&recs[i])
		b.Add(&reversed[i])
	}
	ra, rb := a.Report(), b.Report()
	equalReports(t, ra, rb)
	require.True(t, strings.Contains(ra.String(), "bootstrap CI"))
}

// TestWeightedPassRate: the pass rate weighs each scored episode by its
// record's weight, also when the first records weighed 1 and a weighted one
// came later (the aggregator keeps weights only from then on).
func TestWeightedPassRate(t *testing.T) {
	t.Parallel()
	a := report.NewAggregator(&report.Options{Resamples: -1})
	for _, r := range []sink.Record{
		{SampleID: "a", Status: sink.Pass, Score: 1},
		{SampleID: "b", Status: sink.Fail},
		{SampleID: "a", Epoch: 1, Status: sink.Fail, Weight: 3},
		{SampleID: "c", Status: sink.Pass, Score: 1, Weight: 0.5},
		{SampleID: "b", Epoch: 1, Status: sink.Error, Weight: 9}, // errors carry no weight
		{SampleID: "c", Epoch: 1, Status: sink.Pass, Score: 1},
	} {
		a.Add(&r)
	}
	rep := a.Final()
	require.True(t, rep.Weighted)
	// passes: a 1, c 0.5 + 1; weights: a 1 + 3, b 1, c 0.5 + 1.
	require.InDelta(t, 2.5/6.5, rep.PassRate, 1e-12)
	require.Equal(t, 3, rep.Passed)
	require.Equal(t, 2, rep.Failed)
}

// TestReportIsASnapshot: records added after Report do not change the
// report's per-sample results, which are built only when asked for.
func TestReportIsASnapshot(t *testing.T) {
	t.Parallel()
	a := report.NewAggregator(nil)
	a.Add(&sink.Record{SampleID: "a", Status: sink.Pass, Score: 1})
	rep := a.Report()
	a.Add(&sink.Record{SampleID: "a", Epoch: 1, Status: sink.Fail})
	a.Add(&sink.Record{SampleID: "b", Status: sink.Pass, Score: 1})
	require.Equal(t, []report.SampleResult{{ID: "a", Passed: 1, ScoreSum: 1}}, rep.SampleResults())
	final := a.Final()
	require.Equal(t, []report.SampleResult{{ID: "a", Passed: 1, Failed: 1, ScoreSum: 1}, {ID: "b", Passed: 1, ScoreSum: 1}}, final.SampleResults())
	require.Nil(t, (&report.Report{}).SampleResults())
}
