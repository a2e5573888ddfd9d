package stats_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/stats"
)

// Hand example: three samples, two epochs each: A passes twice, B fails
// twice, C passes once. mean = 3/6; cluster residuals s_c − n_c·mean are
// 1, −1, 0, so Var = 2/36 and SE = √2/6; corrected, Var·3/2 gives √3/6.
// The naive (independent) SE would be √(0.25/6) ≈ 0.204, too small.
func TestClusteredMeanHand(t *testing.T) {
	t.Parallel()
	sums, counts := []float64{2, 0, 1}, []float64{2, 2, 2}
	mean, se := stats.ClusteredMean(sums, counts, false)
	assert.InDelta(t, 0.5, mean, 1e-15)
	assert.InDelta(t, math.Sqrt2/6, se, 1e-15)
	_, se = stats.ClusteredMean(sums, counts, true)
	assert.InDelta(t, math.Sqrt(3)/6, se, 1e-15)

	scores := []float64{1, 1, 0, 0, 1, 0}
	ids := []string{"A", "A", "B", "B", "C", "C"}
	assert.InDelta(t, math.Sqrt2/6, stats.ClusteredSE(scores, ids), 1e-15)
	assert.InDelta(t, math.Sqrt(3)/6, stats.ClusteredSECorrected(scores, ids), 1e-15)
}

// Miller's formula written out literally: SE² = SE_CLT² + (1/N²) Σ_c Σ_i
// Σ_{j≠i} (x_ic − x̄)(x_jc − x̄), with SE_CLT² = Σ(x − x̄)²/N². O(N²) per
// cluster, independent of the implementation's grouping.
func millerSE(scores []float64, ids []string) float64 {
	n := float64(len(scores))
	var mean float64
	for _, x := range scores {
		mean += x
	}
	mean /= n
	var v float64
	for i := range scores {
		for j := range scores {
			if ids[i] == ids[j] { // includes i == j: the SE_CLT² term
				v += (scores[i] - mean) * (scores[j] - mean)
			}
		}
	}
	return math.Sqrt(v) / n
}

func TestClusteredSEMatchesDirect(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		nClusters := 2 + rng.IntN(30)
		var scores []float64
		var ids []string
		for c := range nClusters {
			p := rng.Float64()
			for range 1 + rng.IntN(6) { // unbalanced clusters
				x := 0.0
				if rng.Float64() < p {
					x = 1
				}
				if trial%2 == 1 {
					x = rng.Float64() // continuous scores
				}
				scores = append(scores, x)
				ids = append(ids, fmt.Sprint("s", c))
			}
		}
		// Shuffle so clusters are interleaved, as records arrive.
		rng.Shuffle(len(scores), func(i, j int) {
			scores[i], scores[j] = scores[j], scores[i]
			ids[i], ids[j] = ids[j], ids[i]
		})
		want := millerSE(scores, ids)
		assert.InDelta(t, want, stats.ClusteredSE(scores, ids), 1e-12, "trial %d", trial)
		c := float64(nClusters)
		assert.InDelta(t, want*math.Sqrt(c/(c-1)), stats.ClusteredSECorrected(scores, ids), 1e-12, "trial %d", trial)
	}
}

// With one observation per cluster the clustered SE is the ordinary one:
// uncorrected it is the plug-in √(Σ(x−x̄)²)/N (√(p̂(1−p̂)/N) for 0/1 scores),
// corrected it is s/√N with the n−1 sample standard deviation.
func TestClusteredSESingletons(t *testing.T) {
	t.Parallel()
	scores := []float64{1, 0, 1, 1, 0, 1, 1, 1, 0, 1} // p̂ = 0.7
	ids := make([]string, len(scores))
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	n := float64(len(scores))
	assert.InDelta(t, math.Sqrt(0.7*0.3/n), stats.ClusteredSE(scores, ids), 1e-15)
	s := math.Sqrt(0.7 * 0.3 * n / (n - 1))
	assert.InDelta(t, s/math.Sqrt(n), stats.ClusteredSECorrected(scores, ids), 1e-15)
}

func TestClusteredMeanEdges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		sums     []float64
		counts   []float64
		mean, se float64
	}{
		{"empty", nil, nil, math.NaN(), math.NaN()},
		{"all empty clusters", []float64{0, 0}, []float64{0, 0}, math.NaN(), math.NaN()},
		{"one cluster", []float64{3}, []float64{4}, 0.75, math.NaN()},
		{"one non-empty cluster", []float64{3, 0}, []float64{4, 0}, 0.75, math.NaN()},
		{"empty clusters ignored", []float64{2, 0, 0, 1}, []float64{2, 0, 2, 2}, 0.5, math.Sqrt(3) / 6},
		{"no variance", []float64{2, 4}, []float64{2, 4}, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mean, se := stats.ClusteredMean(tc.sums, tc.counts, true)
			assertFloat(t, tc.mean, mean, 1e-15)
			assertFloat(t, tc.se, se, 1e-15)
		})
	}
	assert.Panics(t, func() { stats.ClusteredMean([]float64{1}, []float64{1, 2}, false) })
	assert.Panics(t, func() { stats.ClusteredMean([]float64{1}, []float64{-1}, false) })
	assert.Panics(t, func() { stats.ClusteredMean([]float64{1}, []float64{0}, false) })
	assert.Panics(t, func() { stats.ClusteredSE([]float64{1}, nil) })
}

func TestClusterTotalsOrder(t *testing.T) {
	t.Parallel()
	sums, counts := stats.ClusterTotals([]float64{1, 0.5, 0, 1}, []string{"b", "a", "b", "c"})
	require.Equal(t, []float64{1, 0.5, 1}, sums)
	require.Equal(t, []float64{2, 1, 1}, counts)
}

// With fractional weights ClusteredMean is the Hájek ratio Σw·x/Σw, and
// scaling every weight leaves mean and standard error unchanged.
func TestClusteredMeanWeighted(t *testing.T) {
	t.Parallel()
	sums := []float64{2.5, 0, 5, 1}    // weighted passes per cluster
	weights := []float64{2.5, 1, 5, 2} // total weight per cluster
	mean, se := stats.ClusteredMean(sums, weights, true)
	require.InDelta(t, 8.5/10.5, mean, 1e-12)
	scaled := []float64{5, 0, 10, 2}
	mean2, se2 := stats.ClusteredMean(scaled, []float64{5, 2, 10, 4}, true)
	require.InDelta(t, mean, mean2, 1e-12)
	require.InDelta(t, se, se2, 1e-12)
}
