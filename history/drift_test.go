package history_test

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/history"
	"github.com/proctor-evals/proctor/sink"
)

// The simulated eval: 2,000 samples, one epoch, in three strata of
// difficulty whose samples pass with probability 0.95, 0.5 and 0.1 (60 %,
// 25 % and 15 % of them: 71 % overall). Samples differ in difficulty,
// so the two runs' outcomes are correlated, as they are in real evals.
const simSamples = 2000

var strata = [...]struct {
	name  string
	share float64
	p     float64
}{{"easy", 0.60, 0.95}, {"medium", 0.25, 0.5}, {"hard", 0.15, 0.1}}

const simMean = 0.60*0.95 + 0.25*0.5 + 0.15*0.1

// simulate returns the reports of a baseline run and of a head run whose
// pass probabilities are each scaled so that the mean drops by drop (0.03
// is 3 points), with outcomes drawn independently given them.
func simulate(rng *rand.Rand, drop float64) (base, head *report.Report) {
	ab, ah := report.NewAggregator(&report.Options{Resamples: -1}), report.NewAggregator(&report.Options{Resamples: -1})
	scale := 1 - drop/simMean
	for i := range simSamples {
		s := strata[0]
		if f := float64(i) / simSamples; f >= strata[0].share+strata[1].share {
			s = strata[2]
		} else if f >= strata[0].share {
			s = strata[1]
		}
		id := "s" + strconv.Itoa(i)
		tags := map[string]string{"difficulty": s.name}
		ab.Add(simRecord("base", id, tags, rng.Float64() < s.p))
		ah.Add(simRecord("head", id, tags, rng.Float64() < s.p*scale))
	}
	return ab.Report(), ah.Report()
}

func simRecord(run, id string, tags map[string]string, pass bool) *sink.Record {
	r := &sink.Record{Schema: sink.SchemaVersion, RunID: run, Eval: "sim", SampleID: id, Status: sink.Fail, Tags: tags}
	if pass {
		r.Status, r.Score = sink.Pass, 1
	}
	return r
}

// alertRate is the share of n simulated pairs of runs, the head's mean
// dropped by drop, that raise a drift alert at the default alpha.
func alertRate(seed uint64, n int, drop float64) float64 {
	rng := rand.New(rand.NewPCG(seed, 22))
	base := &history.Run{Eval: "sim", RunID: "base", HarnessVersion: "h1", JudgeVersion: "j1"}
	head := &history.Run{Eval: "sim", RunID: "head", HarnessVersion: "h1", JudgeVersion: "j1"}
	alerts := 0
	for range n {
		b, h := simulate(rng, drop)
		if history.Compare(base, head, b, h, 0).Alert {
			alerts++
		}
	}
	return float64(alerts) / float64(n)
}

// TestDriftAlertsOnA3PointDropAndRarelyOtherwise: the short version of
// BenchmarkDriftSimulation (200 simulated pairs of runs each). Unchanged
// runs alert in at most 5 % of cases (the test controls the family-wise
// error rate at 5 %); a 3-point drop over 2,000 samples is caught in most.
func TestDriftAlertsOnA3PointDropAndRarelyOtherwise(t *testing.T) {
	t.Parallel()
	const n = 200
	null := alertRate(1, n, 0)
	power := alertRate(2, n, 0.03)
	t.Logf("%d simulated pairs each: false alerts %.3f, power at a 3-point drop %.3f", n, null, power)
	require.LessOrEqual(t, null, 0.05, "unchanged runs alert too often")
	require.Greater(t, power, 0.6, "a 3-point drop is missed too often")
}

// BenchmarkDriftSimulation measures the false-alert rate and the power of
// the drift check over 2,000 simulated pairs of runs each:
//
//	go test ./history -run X -bench DriftSimulation -benchtime 1x
func BenchmarkDriftSimulation(b *testing.B) {
	const n = 2000
	for range b.N {
		b.ReportMetric(alertRate(3, n, 0), "false-alert-rate")
		b.ReportMetric(alertRate(4, n, 0.03), "power-3pts")
		b.ReportMetric(alertRate(5, n, 0.05), "power-5pts")
	}
}

func TestDriftNamesItsCause(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	b, h := simulate(rng, 0.15)
	for _, tc := range []struct {
		name       string
		base, head history.Run
		outside    bool
		cause      string
	}{
		{"same fingerprints", history.Run{HarnessVersion: "h1", JudgeVersion: "j1"}, history.Run{HarnessVersion: "h1", JudgeVersion: "j1"}, true, "outside the agent"},
		{"sandbox changed", history.Run{HarnessVersion: "h1", JudgeVersion: "j1", SandboxVersion: "s1"}, history.Run{HarnessVersion: "h1", JudgeVersion: "j1", SandboxVersion: "s2"}, true, `sandbox "s1" → "s2"`},
		{"harness changed", history.Run{HarnessVersion: "h1", JudgeVersion: "j1"}, history.Run{HarnessVersion: "h2", JudgeVersion: "j1"}, false, `the agent changed: harness "h1" → "h2"`},
		{"unversioned", history.Run{}, history.Run{}, false, "unversioned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := history.Compare(&tc.base, &tc.head, b, h, 0)
			require.True(t, d.Alert, "a 15-point drop must alert")
			require.Equal(t, tc.outside, d.Outside)
			require.Contains(t, d.Cause, tc.cause)
			require.True(t, strings.HasPrefix(d.String(), "DRIFT "), d.String())
			require.Equal(t, "all", d.Tests[0].Name)
			require.Len(t, d.Tests, 4, "all and the three difficulties")
		})
	}
}

func TestNoDriftBetweenIdenticalRuns(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(8, 8))
	b, _ := simulate(rng, 0)
	run := &history.Run{Eval: "sim", RunID: "r"}
	d := history.Compare(run, run, b, b, 0)
	require.False(t, d.Alert)
	require.Empty(t, d.Cause)
	require.True(t, strings.HasPrefix(d.String(), "no drift sim: "), d.String())
}

// TestNoSharedSamplesIsNotNoDrift: a comparison over no shared samples
// said "no drift … over 0 shared samples". Now it says the runs were not
// compared, and raises no alert.
func TestNoSharedSamplesIsNotNoDrift(t *testing.T) {
	t.Parallel()
	ab, ah := report.NewAggregator(&report.Options{Resamples: -1}), report.NewAggregator(&report.Options{Resamples: -1})
	for i := range 50 {
		ab.Add(simRecord("base", "a"+strconv.Itoa(i), nil, true))
		ah.Add(simRecord("head", "b"+strconv.Itoa(i), nil, false))
	}
	base, head := &history.Run{RunID: "base", Eval: "sim"}, &history.Run{RunID: "head", Eval: "sim"}
	d := history.Compare(base, head, ab.Report(), ah.Report(), 0)
	require.False(t, d.Alert)
	require.Zero(t, d.Shared())
	require.Equal(t, "not compared sim: run head and baseline base share no scored sample", d.String())
}

// TestDriftNamesAChangeOfTheEpisodesResources: two runs whose manifests
// agree, the head's episodes of the hard samples run with more memory (an
// OOM retry, a worker joined with other resources): the drift's cause
// names the episodes' resources, as a possible cause; runs whose episodes
// ran alike name none.
func TestDriftNamesAChangeOfTheEpisodesResources(t *testing.T) {
	t.Parallel()
	const small, large = "memory=1073741824", "memory=2147483648"
	rng := rand.New(rand.NewPCG(9, 9))
	ab, ah, same := report.NewAggregator(&report.Options{Resamples: -1}), report.NewAggregator(&report.Options{Resamples: -1}), report.NewAggregator(&report.Options{Resamples: -1})
	for i := range simSamples {
		id := "s" + strconv.Itoa(i)
		b := simRecord("base", id, nil, rng.Float64() < simMean)
		b.Resources = small
		ab.Add(b)
		h := simRecord("head", id, nil, rng.Float64() < simMean-0.15)
		h.Resources = small
		same.Add(h)
		if i%10 == 0 {
			h.Resources = large
		}
		ah.Add(h)
	}
	run := history.Run{HarnessVersion: "h1", JudgeVersion: "j1", Resources: "memory=1073741824"}
	d := history.Compare(&run, &run, ab.Report(), ah.Report(), 0)
	require.True(t, d.Alert, "a 15-point drop must alert")
	require.Contains(t, d.Cause, "the environment changed: the episodes' sandbox resources [memory=1073741824] → [memory=1073741824; memory=2147483648] (a possible cause)")

	d = history.Compare(&run, &run, ab.Report(), same.Report(), 0)
	require.True(t, d.Alert)
	require.NotContains(t, d.Cause, "environment changed")
}
