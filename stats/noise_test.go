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
	require.InDelta(t, 0.05, rate, 0.015, "%d of %d pairs of runs of one agent outside the 95%% floor", outside, runs)
}
