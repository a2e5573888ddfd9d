package stats_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/stats"
)

// Reference values: R. G. Newcombe, "Two-sided confidence intervals for the
// single proportion", Statistics in Medicine 17 (1998), table I, methods 3
// (Wilson) and 5 (Clopper–Pearson), given there to 4 decimals; the 6-decimal
// values below were recomputed independently (Wilson from its closed form,
// Clopper–Pearson by bisection on exact binomial tail sums in Python) and
// agree with the paper's to its precision. 8/10 is the brief's example.
var binomialCases = []struct {
	x, n               int
	wilsonLo, wilsonHi float64
	cpLo, cpHi         float64
}{
	{8, 10, 0.490162, 0.943318, 0.443905, 0.974789},
	{81, 263, 0.255289, 0.366210, 0.252737, 0.367622},
	{15, 148, 0.062386, 0.160487, 0.057844, 0.161650},
	{0, 20, 0, 0.161125, 0, 0.168433},
	{1, 29, 0.006113, 0.171755, 0.000873, 0.177644},
	{29, 29, 0.883030, 1, 0.880555, 1},
	{0, 1, 0, 0.793451, 0, 0.975},
}

func TestWilson(t *testing.T) {
	t.Parallel()
	for _, c := range binomialCases {
		iv := stats.Wilson(c.x, c.n, 0.95)
		assert.InDelta(t, c.wilsonLo, iv.Lo, 1e-6, "%d/%d Lo", c.x, c.n)
		assert.InDelta(t, c.wilsonHi, iv.Hi, 1e-6, "%d/%d Hi", c.x, c.n)
		assert.Equal(t, 0.95, iv.Level)
		assert.Equal(t, stats.MethodWilson, iv.Method)
	}
}

func TestClopperPearson(t *testing.T) {
	t.Parallel()
	for _, c := range binomialCases {
		iv := stats.ClopperPearson(c.x, c.n, 0.95)
		assert.InDelta(t, c.cpLo, iv.Lo, 1e-6, "%d/%d Lo", c.x, c.n)
		assert.InDelta(t, c.cpHi, iv.Hi, 1e-6, "%d/%d Hi", c.x, c.n)
		assert.Equal(t, stats.MethodClopperPearson, iv.Method)
	}
}

func TestBinomialIntervalEdges(t *testing.T) {
	t.Parallel()
	for _, f := range []struct {
		name string
		fn   func(x, n int, level float64) stats.Interval
	}{{"Wilson", stats.Wilson}, {"ClopperPearson", stats.ClopperPearson}} {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			iv := f.fn(0, 0, 0.95)
			assert.Equal(t, [2]float64{0, 1}, [2]float64{iv.Lo, iv.Hi}, "n = 0 is uninformative")
			for _, n := range []int{1, 2, 7, 100, 100000} {
				assert.Equal(t, 0.0, f.fn(0, n, 0.95).Lo, "0/%d Lo is exactly 0", n)
				assert.Equal(t, 1.0, f.fn(n, n, 0.95).Hi, "%d/%d Hi is exactly 1", n, n)
				for _, x := range []int{0, 1, n / 2, n - 1, n} {
					iv := f.fn(x, n, 0.95)
					p := float64(x) / float64(n)
					assert.True(t, 0 <= iv.Lo && iv.Lo <= p && p <= iv.Hi && iv.Hi <= 1, "%d/%d: %v", x, n, iv)
					assert.LessOrEqual(t, iv.Width(), f.fn(x, n, 0.99).Width()+1e-12, "99%% is wider")
				}
			}
			assert.Panics(t, func() { f.fn(3, 2, 0.95) })
			assert.Panics(t, func() { f.fn(-1, 2, 0.95) })
			assert.Panics(t, func() { f.fn(1, 2, 1) })
			assert.Panics(t, func() { f.fn(1, 2, 0) })
			assert.Panics(t, func() { f.fn(1, 2, math.NaN()) })
		})
	}
}

// At x = 0 the Wilson upper bound is z²/(n+z²) (solve the score equation).
func TestWilsonZeroClosedForm(t *testing.T) {
	t.Parallel()
	z := 1.959963984540054
	for _, n := range []int{1, 10, 1000} {
		assert.InDelta(t, z*z/(float64(n)+z*z), stats.Wilson(0, n, 0.95).Hi, 1e-12)
	}
}

// Clopper–Pearson guarantees coverage ≥ level for every p. Check it exactly
// on a grid of p for n = 20 by summing binomial probabilities of the x whose
// interval covers p.
func TestClopperPearsonCoverage(t *testing.T) {
	t.Parallel()
	const n = 20
	ivs := make([]stats.Interval, n+1)
	for x := range ivs {
		ivs[x] = stats.ClopperPearson(x, n, 0.95)
	}
	for i := 1; i < 200; i++ {
		p := float64(i) / 200
		cover := 0.0
		for x, iv := range ivs {
			if iv.Contains(p) {
				cover += float64(binom(n, x)) * math.Pow(p, float64(x)) * math.Pow(1-p, float64(n-x))
			}
		}
		require.GreaterOrEqual(t, cover, 0.95-1e-9, "p = %v", p)
	}
}

func TestIntervalString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "[0.490, 0.943] (95% wilson)", stats.Wilson(8, 10, 0.95).String())
}

func binom(n, k int) int64 {
	r := int64(1)
	for i := 1; i <= k; i++ {
		r = r * int64(n-k+i) / int64(i)
	}
	return r
}
