package stats_test

import (
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/proctor-evals/proctor/stats"
)

// Hand example: a = 1..5, b = (2, 2, 4, 5, 7), d = (1, 0, 1, 1, 2):
// mean 1, s_d = √0.5, SE = √0.1 = 0.316228, t = 3.162278 on 4 df,
// t_{0.975,4} = 2.776445 (statistical tables), so [0.122011, 1.877989];
// two-sided p = 0.034109 (R: t.test(b, a, paired = TRUE)); r(a, b) =
// 0.968963. The t tail and quantile were checked by numerical integration
// of the t density, independently of gonum.
func TestPairedHand(t *testing.T) {
	t.Parallel()
	d := stats.Paired([]float64{1, 2, 3, 4, 5}, []float64{2, 2, 4, 5, 7}, 0.95)
	assert.Equal(t, 5, d.N)
	assert.Equal(t, 0.95, d.Level)
	assert.InDelta(t, 1.0, d.Mean, 1e-15)
	assert.InDelta(t, 3.0, d.MeanA, 1e-15)
	assert.InDelta(t, 4.0, d.MeanB, 1e-15)
	assert.InDelta(t, math.Sqrt(0.1), d.SE, 1e-15)
	assert.InDelta(t, 0.122011, d.Lo, 1e-6)
	assert.InDelta(t, 1.877989, d.Hi, 1e-6)
	assert.InDelta(t, 0.034109, d.P, 1e-6)
	assert.InDelta(t, 0.968963, d.Correlation, 1e-6)
}

func TestPairedSign(t *testing.T) {
	t.Parallel()
	base := []float64{0, 0, 1, 1, 0, 1}
	head := []float64{1, 0, 1, 1, 1, 1}
	assert.Greater(t, stats.Paired(base, head, 0.95).Mean, 0.0, "head better: positive")
	assert.Less(t, stats.Paired(head, base, 0.95).Mean, 0.0)
}

func TestPairedEdges(t *testing.T) {
	t.Parallel()
	d := stats.Paired(nil, nil, 0.95)
	assert.Equal(t, 0, d.N)
	assert.True(t, math.IsNaN(d.Mean) && math.IsNaN(d.SE) && math.IsNaN(d.Lo) && math.IsNaN(d.P) && math.IsNaN(d.Correlation))

	d = stats.Paired([]float64{0.5}, []float64{1}, 0.95)
	assert.Equal(t, 0.5, d.Mean)
	assert.True(t, math.IsNaN(d.SE) && math.IsNaN(d.Lo) && math.IsNaN(d.Hi) && math.IsNaN(d.P))

	d = stats.Paired([]float64{1, 2, 3}, []float64{2, 3, 4}, 0.95)
	assert.Equal(t, [4]float64{1, 0, 1, 1}, [4]float64{d.Mean, d.SE, d.Lo, d.Hi}, "constant difference")
	assert.Equal(t, 0.0, d.P)
	assert.InDelta(t, 1.0, d.Correlation, 1e-15)

	d = stats.Paired([]float64{1, 0, 1}, []float64{1, 0, 1}, 0.95)
	assert.Equal(t, 1.0, d.P, "identical runs")

	d = stats.Paired([]float64{1, 1, 1}, []float64{1, 0, 1}, 0.95)
	assert.True(t, math.IsNaN(d.Correlation), "constant run: correlation undefined")
	assert.False(t, math.IsNaN(d.SE))

	assert.Panics(t, func() { stats.Paired([]float64{1}, nil, 0.95) })
	assert.Panics(t, func() { stats.Paired(nil, nil, 1.5) })
}

// exactMcNemar is min(1, 2·Σ_{i≤k} C(m, i)/2^m) in exact rational
// arithmetic.
func exactMcNemar(a, b int) float64 {
	m, k := a+b, min(a, b)
	sum := new(big.Int)
	for i := 0; i <= k; i++ {
		sum.Add(sum, new(big.Int).Binomial(int64(m), int64(i)))
	}
	p, _ := new(big.Rat).SetFrac(new(big.Int).Lsh(sum, 1), new(big.Int).Lsh(big.NewInt(1), uint(m))).Float64()
	return math.Min(1, p)
}

// Reference values: R, binom.test(x, m)$p.value — 1 of 8: 0.0703125
// (= 18/256), 0 of 5: 0.0625 (= 2/32), 5 of 20: 0.04138947, 3 of 15:
// 0.03515625; 10 of 21 and equal counts: 1.
func TestMcNemar(t *testing.T) {
	t.Parallel()
	tests := []struct {
		onlyA, onlyB int
		want         float64
	}{
		{0, 0, 1},
		{1, 7, 0.0703125},
		{7, 1, 0.0703125},
		{0, 5, 0.0625},
		{5, 15, 0.04138947},
		{3, 12, 0.03515625},
		{10, 11, 1},
		{4, 4, 1},
		{0, 1, 1},
	}
	for _, tc := range tests {
		assert.InDelta(t, tc.want, stats.McNemar(tc.onlyA, tc.onlyB), 1e-8, "%d vs %d", tc.onlyA, tc.onlyB)
	}
	for _, tc := range [][2]int{{450, 550}, {40, 60}, {0, 30}, {2, 3}, {100, 180}, {1000, 1100}} {
		want := exactMcNemar(tc[0], tc[1])
		got := stats.McNemar(tc[0], tc[1])
		if want < 1e-300 {
			assert.InDelta(t, 0, got, 1e-300)
			continue
		}
		assert.InEpsilon(t, want, got, 1e-9, "%v", tc)
	}
	assert.InEpsilon(t, 0.0017305360849763, stats.McNemar(450, 550), 1e-9)
	assert.Panics(t, func() { stats.McNemar(-1, 3) })
}
