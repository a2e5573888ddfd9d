package stats

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Reference: R, quantile(1:10, c(0, 0.025, 0.5, 0.975, 1)) (type 7) =
// 1, 1.225, 5.5, 9.775, 10.
func TestQuantileSorted(t *testing.T) {
	t.Parallel()
	x := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ p, want float64 }{{0, 1}, {0.025, 1.225}, {0.5, 5.5}, {0.975, 9.775}, {1, 10}} {
		assert.InDelta(t, tc.want, quantileSorted(x, tc.p), 1e-12, "p = %v", tc.p)
	}
	assert.Equal(t, 3.0, quantileSorted([]float64{3}, 0.975))
}

// draw must stay in range and uniform, including on the rejection path:
// for n = 3·2³⁰, 2³² mod n = 2³⁰ and a quarter of the products are
// rejected. Chi-square over 8 equal bins of [0, n) with 7 df: the 0.999
// quantile is 24.32.
func TestDrawUniform(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 7, 1000, 3 << 30, 1<<32 - 1} {
		var d draw
		d.seed(1, 0, n)
		buf := make([]uint32, 80001) // odd: the tail path too
		var bins [8]float64
		for range 4 {
			d.fill(buf)
			for _, v := range buf {
				if uint64(v) >= uint64(n) {
					t.Fatalf("n = %d: draw %d out of range", n, v)
				}
				bins[uint64(v)*8/uint64(n)]++
			}
		}
		if n < 8 {
			continue
		}
		total := 4 * float64(len(buf))
		chi2 := 0.0
		for _, o := range bins {
			e := total / 8
			chi2 += (o - e) * (o - e) / e
		}
		assert.Less(t, chi2, 24.32, "n = %d: bins %v", n, bins)
	}
}
