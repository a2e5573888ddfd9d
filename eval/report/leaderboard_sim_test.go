package report_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
)

// The leaderboard by simulation. A run of variants draws each sample's
// difficulty u ~ U(0, 1), shared by the variants (a hard sample is hard
// for all); variant v passes the sample with probability
// m_v + w_v (u − ½), w_v = 1.6 min(m_v, 1 − m_v), each epoch
// independently: its pass rate on the population of samples is exactly
// m_v, the truth the leaderboard estimates.

// simVariants returns the records of one simulated run of variants with
// true pass rates truth over n samples and the given epochs.
func simVariants(rng *rand.Rand, truth []float64, n, epochs int) []sink.Record {
	recs := make([]sink.Record, 0, n*epochs*len(truth))
	for i := range n {
		u := rng.Float64()
		for v, m := range truth {
			p := m + 1.6*min(m, 1-m)*(u-0.5)
			for ep := range epochs {
				r := sink.Record{Schema: 1, RunID: "sim", Eval: "sim", Variant: fmt.Sprintf("v%d", v), SampleID: fmt.Sprintf("s%d", i), Epoch: ep, Status: sink.Fail}
				if rng.Float64() < p {
					r.Status, r.Score = sink.Pass, 1
				}
				recs = append(recs, r)
			}
		}
	}
	return recs
}

// TestLeaderboardCoverageBySimulation: each variant's clustered 95%
// interval holds its true pass rate in about 95% of runs, at true rates
// 0.3, 0.6 and 0.9: 1,000 runs of 50 samples × 3 epochs, seeded. Measured:
// 94.0%, 93.4%, 93.9% (the clustered SE with a normal quantile over 50
// clusters runs a little narrow); the test asks for at least 92.5%, which
// a calibrated interval (95% ± 0.7% over 1,000 runs) misses with
// probability under 1e-3.
func TestLeaderboardCoverageBySimulation(t *testing.T) {
	t.Parallel()
	truth := []float64{0.3, 0.6, 0.9}
	const runs, n, epochs = 1000, 50, 3
	rng := rand.New(rand.NewPCG(33, 1))
	covered := make([]int, len(truth))
	for range runs {
		rep, err := report.FromRecords(seqOf(simVariants(rng, truth, n, epochs)), &report.Options{Resamples: -1})
		if err != nil {
			t.Fatal(err)
		}
		for v, m := range truth {
			s := rep.VariantReport(fmt.Sprintf("v%d", v))
			if s.Interval.Method != report.MethodClustered {
				t.Fatalf("variant v%d: interval method %q, want clustered", v, s.Interval.Method)
			}
			if s.Interval.Contains(m) {
				covered[v]++
			}
		}
	}
	for v, m := range truth {
		c := float64(covered[v]) / runs
		t.Logf("true pass rate %.2f: the 95%% interval covered it in %d of %d runs (%.1f%%)", m, covered[v], runs, 100*c)
		if c < 0.925 {
			t.Errorf("true pass rate %.2f: coverage %.1f%% over %d runs, want ≥ 92.5%%", m, 100*c, runs)
		}
	}
}

// TestPBestCalibratedBySimulation: among variants given P(best) ≈ p, the
// variant is truly best about p of the time. 1,500 runs of 3 variants
// whose true rates are drawn from U(0.45, 0.65), 40 samples × 2 epochs,
// 200 resamples each, seeded; P(best) is binned in fifths and each bin's
// share of truly-best variants is compared with its mean P(best).
// Measured (mean P(best) → share truly best, of n variants): 0.055 →
// 0.091 (2,154), 0.290 → 0.294 (704), 0.497 → 0.493 (515), 0.696 →
// 0.640 (503), 0.914 → 0.833 (624); Brier score 0.146 against 0.222 for
// 1/3 each. Calibrated in the middle, overconfident at the ends by up to
// 8 points: the bootstrap resamples around the observed rates, and the
// variant that looks best is favoured by its own luck (the winner's
// curse); docs/comparing-agents.md says so. The test asks each bin with
// at least 100 variants to be within 0.1 of its mean P(best), and the
// Brier score to beat 1/3's.
func TestPBestCalibratedBySimulation(t *testing.T) {
	t.Parallel()
	const runs, k, n, epochs, bins = 1500, 3, 40, 2, 5
	rng := rand.New(rand.NewPCG(33, 2))
	var sumP, sumBest [bins]float64
	var count [bins]int
	brier, brierFlat := 0.0, 0.0
	for range runs {
		truth := make([]float64, k)
		best := 0
		for v := range truth {
			truth[v] = 0.45 + 0.2*rng.Float64()
			if truth[v] > truth[best] {
				best = v
			}
		}
		rep, err := report.FromRecords(seqOf(simVariants(rng, truth, n, epochs)), &report.Options{Resamples: 200})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range rep.Leaderboard.Variants {
			isBest := 0.0
			if s.Variant == fmt.Sprintf("v%d", best) {
				isBest = 1
			}
			b := min(bins-1, int(s.PBest*bins))
			sumP[b] += s.PBest
			sumBest[b] += isBest
			count[b]++
			brier += (s.PBest - isBest) * (s.PBest - isBest)
			brierFlat += (1.0/k - isBest) * (1.0/k - isBest)
		}
	}
	for b := range bins {
		if count[b] == 0 {
			continue
		}
		p, obs := sumP[b]/float64(count[b]), sumBest[b]/float64(count[b])
		t.Logf("P(best) in [%.1f, %.1f): mean %.3f, truly best %.3f, %d variants", float64(b)/bins, float64(b+1)/bins, p, obs, count[b])
		if count[b] >= 100 && math.Abs(p-obs) > 0.1 {
			t.Errorf("P(best) bin %d: mean %.3f but truly best %.3f of %d times", b, p, obs, count[b])
		}
	}
	t.Logf("Brier score %.4f (P(best)) against %.4f (1/%d each), %d runs", brier/(runs*k), brierFlat/(runs*k), k, runs)
	if brier >= brierFlat {
		t.Errorf("P(best) Brier score %.4f is no better than 1/%d's %.4f", brier/(runs*k), k, brierFlat/(runs*k))
	}
}
