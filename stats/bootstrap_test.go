package stats_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/stats"
)

// clusteredData returns per-sample totals for nClusters samples of epochs
// 0/1 episodes each, with per-sample pass probabilities spread over [0, 1]
// (strong within-sample correlation).
func clusteredData(nClusters, epochs int, seed uint64) (sums, counts []float64) {
	rng := rand.New(rand.NewPCG(seed, 0))
	sums = make([]float64, nClusters)
	counts = make([]float64, nClusters)
	for c := range sums {
		p := rng.Float64()
		for range epochs {
			if rng.Float64() < p {
				sums[c]++
			}
		}
		counts[c] = float64(epochs)
	}
	return sums, counts
}

// For many clusters the percentile interval approaches mean ± z·SE with the
// cluster-robust SE (the bootstrap and the sandwich estimator target the same
// sampling variance).
func TestBootstrapClustersAgreesWithClusteredSE(t *testing.T) {
	t.Parallel()
	sums, counts := clusteredData(5000, 5, 7)
	mean, se := stats.ClusteredMean(sums, counts, true)
	iv := stats.BootstrapClusters(sums, counts, 2000, 0.95, 42)
	assert.Equal(t, stats.MethodClusterBootstrap, iv.Method)
	assert.Equal(t, 0.95, iv.Level)
	assert.True(t, iv.Contains(mean))
	assert.InEpsilon(t, 2*1.96*se, iv.Width(), 0.08)
	assert.InDelta(t, mean, (iv.Lo+iv.Hi)/2, 0.1*se)
}

func TestBootstrapClustersDeterministic(t *testing.T) {
	sums, counts := clusteredData(3000, 3, 1)
	a := stats.BootstrapClusters(sums, counts, 200, 0.9, 5)
	b := stats.BootstrapClusters(sums, counts, 200, 0.9, 5)
	require.Equal(t, a, b, "same seed, same interval")
	c := stats.BootstrapClusters(sums, counts, 200, 0.9, 6)
	assert.NotEqual(t, a, c, "another seed, another interval")

	// Independent of GOMAXPROCS. This test is not parallel so that changing
	// GOMAXPROCS does not race with other tests.
	prev := runtime.GOMAXPROCS(1)
	d := stats.BootstrapClusters(sums, counts, 200, 0.9, 5)
	runtime.GOMAXPROCS(4)
	e := stats.BootstrapClusters(sums, counts, 200, 0.9, 5)
	runtime.GOMAXPROCS(prev)
	assert.Equal(t, a, d)
	assert.Equal(t, a, e)
}

// BootstrapClusters is the generic Bootstrap over cluster indices with the
// ratio-of-sums statistic, draw for draw: for 0/1 scores (totals exact as
// float32, the compact layout) and for continuous scores (float64 layout),
// with an empty cluster that both must skip.
func TestBootstrapClustersMatchesGeneric(t *testing.T) {
	t.Parallel()
	binary, counts := clusteredData(500, 4, 3)
	rng := rand.New(rand.NewPCG(3, 3))
	continuous := make([]float64, len(binary))
	for i := range continuous {
		continuous[i] = rng.Float64() * counts[i]
	}
	for name, sums := range map[string][]float64{"binary": binary, "continuous": continuous} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := append([]float64{0}, sums...)
			c := append([]float64{0}, counts...)
			want := stats.Bootstrap(len(sums), 300, 0.95, 11, func(idx []int) float64 {
				var a, n float64
				for _, i := range idx {
					a += sums[i]
					n += counts[i]
				}
				return a / n
			})
			got := stats.BootstrapClusters(s, c, 300, 0.95, 11)
			assert.InDelta(t, want.Lo, got.Lo, 1e-13)
			assert.InDelta(t, want.Hi, got.Hi, 1e-13)
		})
	}
}

func TestBootstrapClustersEdges(t *testing.T) {
	t.Parallel()
	iv := stats.BootstrapClusters(nil, nil, 10, 0.95, 1)
	assert.True(t, math.IsNaN(iv.Lo) && math.IsNaN(iv.Hi), "no clusters: NaN")
	iv = stats.BootstrapClusters([]float64{0, 3}, []float64{0, 4}, 10, 0.95, 1)
	assert.Equal(t, [2]float64{0.75, 0.75}, [2]float64{iv.Lo, iv.Hi}, "one cluster: a point")
	iv = stats.BootstrapClusters([]float64{1, 0}, []float64{1, 1}, 1, 0.95, 1)
	assert.Equal(t, iv.Lo, iv.Hi, "one resample: a point")
	assert.Panics(t, func() { stats.BootstrapClusters([]float64{1}, []float64{1}, 0, 0.95, 1) })
	assert.Panics(t, func() { stats.BootstrapClusters([]float64{1}, []float64{1}, 10, 95, 1) })
	assert.Panics(t, func() { stats.BootstrapClusters([]float64{1}, []float64{1, 1}, 10, 0.95, 1) })
	assert.Panics(t, func() { stats.BootstrapClusters([]float64{1}, []float64{0}, 10, 0.95, 1) })
}

// The bootstrap of a mean of n independent normal draws gives roughly
// mean ± 1.96·s/√n; NaN statistics are dropped.
func TestBootstrapGeneric(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 9))
	x := make([]float64, 2000)
	var mean float64
	for i := range x {
		x[i] = rng.NormFloat64()
		mean += x[i]
	}
	mean /= float64(len(x))
	calls := 0
	iv := stats.Bootstrap(len(x), 1000, 0.95, 3, func(idx []int) float64 {
		calls++
		if calls%2 == 0 {
			return math.NaN()
		}
		var s float64
		for _, i := range idx {
			s += x[i]
		}
		return s / float64(len(idx))
	})
	assert.Equal(t, 1000, calls)
	assert.Equal(t, stats.MethodBootstrap, iv.Method)
	assert.InEpsilon(t, 2*1.96/math.Sqrt(float64(len(x))), iv.Width(), 0.1)
	assert.True(t, iv.Contains(mean))

	iv = stats.Bootstrap(0, 10, 0.95, 1, func([]int) float64 { return 1 })
	assert.True(t, math.IsNaN(iv.Lo))
	iv = stats.Bootstrap(5, 10, 0.95, 1, func([]int) float64 { return math.NaN() })
	assert.True(t, math.IsNaN(iv.Lo) && math.IsNaN(iv.Hi))
	assert.Panics(t, func() { stats.Bootstrap(-1, 10, 0.95, 1, func([]int) float64 { return 0 }) })
}
