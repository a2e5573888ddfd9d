package stats_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/stats"
)

// The floor's promise, by simulation: two runs of one agent (200
// samples of pass probabilities 0.2…0.8, 5 epochs each) differ by more
// than the 95% floor in about 5% of 2,000 pairs of runs.
func TestNoiseFloorCoverageBySimulation(t *testing.T) {
	t.Parallel()
	const runs, n, epochs = 2000, 200, 5
	r := rand.New(rand.NewPCG(7, 11))
	outside := 0
	draw := func() (passes, scored []int, rate float64) {
		for i := range n {
			p := 0.2 + 0.6*float64(i%7)/6
			k := 0
			for range epochs {
				if r.Float64() < p {
					k++
				}
			}
			passes, scored = append(passes, k), append(scored, epochs)
			rate += float64(k) / epochs / n
		}
		return passes, scored, rate
	}
	for range runs {
		pa, sa, ra := draw()
		pb, sb, rb := draw()
		v, _ := stats.WithinVariance(append(pa, pb...), append(sa, sb...))
		if nf := stats.Noise(v, n, epochs, epochs, 0.95); !nf.Within(rb - ra) {
			outside++
		}
	}
	rate := float64(outside) / runs
	t.Logf("%d of %d pairs of runs of one agent (%d epochs) outside the 95%% floor (%.1f%%)", outside, runs, epochs, 100*rate)
	require.InDelta(t, 0.05, rate, 0.015, "%d of %d pairs of runs of one agent outside the 95%% floor", outside, runs)
}

// TestNoiseFloorOfTwoSingleEpochRunsBySimulation: two runs of one agent,
// one epoch each, pooled per sample as two epochs of that agent (what
// report.Compare does for runs of one agent): the floor holds their
// difference 95% of the time. 2,000 simulated pairs of runs of 200
// samples.
func TestNoiseFloorOfTwoSingleEpochRunsBySimulation(t *testing.T) {
	t.Parallel()
	const runs, n = 2000, 200
	r := rand.New(rand.NewPCG(13, 17))
	outside := 0
	for range runs {
		var passes, scored []int
		var diff float64
		for i := range n {
			p := 0.2 + 0.6*float64(i%7)/6
			a, b := 0, 0
			if r.Float64() < p {
				a = 1
			}
			if r.Float64() < p {
				b = 1
			}
			passes, scored = append(passes, a+b), append(scored, 2)
			diff += float64(b-a) / n
		}
		v, dof := stats.WithinVariance(passes, scored)
		require.Equal(t, n, dof)
		if nf := stats.Noise(v, n, 1, 1, 0.95); !nf.Within(diff) {
			outside++
		}
	}
	rate := float64(outside) / runs
	t.Logf("%d of %d pairs of single-epoch runs of one agent outside the 95%% floor (%.1f%%)", outside, runs, 100*rate)
	require.InDelta(t, 0.05, rate, 0.015, "%d of %d pairs of runs of one agent outside the 95%% floor", outside, runs)
}
