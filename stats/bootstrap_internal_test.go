package stats

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResampleCodedIsResampleMean: the coded clusters give every resample
// the mean of the packed ones, bit for bit, whether the totals are exact
// as float32 or not, and codeClusters declines more than 256 kinds.
func TestResampleCodedIsResampleMean(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name  string
		total func(i int) (sum, count float64)
	}{
		{"epochs of 0/1 scores", func(i int) (float64, float64) { return float64(rng.IntN(11)), 10 }},
		{"fractional scores", func(i int) (float64, float64) { return float64(rng.IntN(7)) * 0.1, 3 }},
		{"weights", func(i int) (float64, float64) { w := 0.25 + float64(i%5); return w * float64(rng.IntN(3)), 2 * w }},
		{"empty clusters among them", func(i int) (float64, float64) {
			if i%3 == 0 {
				return 0, 0
			}
			return float64(rng.IntN(2)), 1
		}},
	} {
		n := 1000 + rng.IntN(500)
		sums, counts := make([]float64, n), make([]float64, n)
		c := 0
		for i := range sums {
			sums[i], counts[i] = tc.total(i)
			if counts[i] > 0 {
				c++
			}
		}
		codes, kinds, ok := codeClusters(sums, counts, c)
		require.True(t, ok, tc.name)
		require.Len(t, codes, c, tc.name)
		packed := packClusters[float64](sums, counts, c)
		for r := range 50 {
			want, got := resampleMean(packed, 9, r), resampleCoded(codes, kinds, 9, r)
			require.Equal(t, math.Float64bits(want), math.Float64bits(got), "%s: resample %d: %v, want %v", tc.name, r, got, want)
		}
	}
	sums, counts := make([]float64, 300), make([]float64, 300)
	for i := range sums {
		sums[i], counts[i] = float64(i), 300
	}
	_, _, ok := codeClusters(sums, counts, len(sums))
	require.False(t, ok, "300 kinds of clusters coded in a byte")
}
