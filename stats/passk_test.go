package stats_test

import (
	"math"
	"math/big"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/proctor-evals/proctor/stats"
)

// Brute force: with attempts 0..c−1 passing out of n, enumerate every
// k-subset and count those with at least one pass (pass@k) and with only
// passes (pass^k). This is the definition both estimators are unbiased for.
func TestPassKBruteForce(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 12; n++ {
		for c := 0; c <= n; c++ {
			for k := 0; k <= n; k++ {
				var total, any, all int
				for s := uint(0); s < 1<<n; s++ {
					if bits.OnesCount(s) != k {
						continue
					}
					total++
					passes := bits.OnesCount(s & (1<<c - 1))
					if passes > 0 {
						any++
					}
					if passes == k {
						all++
					}
				}
				assert.InDelta(t, float64(any)/float64(total), stats.PassAtK(n, c, k), 1e-12, "pass@k n=%d c=%d k=%d", n, c, k)
				assert.InDelta(t, float64(all)/float64(total), stats.PassHatK(n, c, k), 1e-12, "pass^k n=%d c=%d k=%d", n, c, k)
			}
		}
	}
}

// Large n: compare with exact rational arithmetic on the binomial
// coefficients (math/big), where the naive float formula would overflow.
func TestPassKExactLarge(t *testing.T) {
	t.Parallel()
	cases := []struct{ n, c, k int }{{100, 3, 50}, {200, 100, 10}, {1000, 1, 1}, {1000, 999, 500}, {500, 250, 100}}
	for _, tc := range cases {
		cnk := new(big.Int).Binomial(int64(tc.n), int64(tc.k))
		fail := new(big.Rat).SetFrac(new(big.Int).Binomial(int64(tc.n-tc.c), int64(tc.k)), cnk)
		wantAt, _ := new(big.Rat).Sub(big.NewRat(1, 1), fail).Float64()
		wantHat, _ := new(big.Rat).SetFrac(new(big.Int).Binomial(int64(tc.c), int64(tc.k)), cnk).Float64()
		assert.InDelta(t, wantAt, stats.PassAtK(tc.n, tc.c, tc.k), 1e-12, "%+v", tc)
		if wantHat == 0 {
			assert.Zero(t, stats.PassHatK(tc.n, tc.c, tc.k), "%+v", tc)
		} else {
			assert.InEpsilon(t, wantHat, stats.PassHatK(tc.n, tc.c, tc.k), 1e-10, "%+v", tc)
		}
	}
}

func TestPassKEdges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		n, c, k int
		wantAt  float64
		wantHat float64
	}{
		{"k=1 is the pass rate", 10, 3, 1, 0.3, 0.3},
		{"Chen et al. n=10 c=3 k=5", 10, 3, 5, 1 - 21.0/252, 0},
		{"k=0", 5, 2, 0, 0, 1},
		{"no passes", 10, 0, 4, 0, 0},
		{"all pass", 10, 10, 4, 1, 1},
		{"c > n-k", 10, 8, 3, 1, 56.0 / 120},
		{"k = n", 5, 4, 5, 1, 0},
		{"k > n", 3, 1, 4, math.NaN(), math.NaN()},
		{"n = 0, k = 0", 0, 0, 0, 0, 1},
		{"n = 0, k = 1", 0, 0, 1, math.NaN(), math.NaN()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assertFloat(t, tc.wantAt, stats.PassAtK(tc.n, tc.c, tc.k), 1e-12)
			assertFloat(t, tc.wantHat, stats.PassHatK(tc.n, tc.c, tc.k), 1e-12)
		})
	}
	assert.Panics(t, func() { stats.PassAtK(3, 4, 1) })
	assert.Panics(t, func() { stats.PassAtK(3, -1, 1) })
	assert.Panics(t, func() { stats.PassHatK(3, 1, -1) })
	assert.Panics(t, func() { stats.PassHatK(-1, 0, 0) })
}

// assertFloat is InDelta that also accepts NaN == NaN.
func assertFloat(t *testing.T, want, got, delta float64, msg ...any) {
	t.Helper()
	if math.IsNaN(want) {
		assert.True(t, math.IsNaN(got), "want NaN, got %v %v", got, msg)
		return
	}
	assert.InDelta(t, want, got, delta, msg...)
}
