package stats_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/proctor-evals/proctor/stats"
)

// fromTable expands a confusion table (rows: rater a's label, columns: rater
// b's label) into label slices.
func fromTable(table [][]int) (a, b []int) {
	for i, row := range table {
		for j, n := range row {
			for range n {
				a = append(a, i)
				b = append(b, j)
			}
		}
	}
	return a, b
}

func TestCohenKappa(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		table [][]int
		want  float64
	}{
		// Wikipedia, "Cohen's kappa", first worked example: 50 proposals,
		// yes/yes 20, yes/no 5, no/yes 10, no/no 15: p_o = 0.7, p_e = 0.5.
		{"Wikipedia yes/no", [][]int{{20, 5}, {10, 15}}, 0.4},
		// Wikipedia's second pair of examples: same p_o = 0.6, different
		// marginals: κ = 0.1304 and 0.2593.
		{"Wikipedia balanced", [][]int{{45, 15}, {25, 15}}, 0.130435},
		{"Wikipedia unbalanced", [][]int{{25, 35}, {5, 35}}, 0.259259},
		// By hand: N = 100, p_o = 0.70, marginals a = (40, 30, 30),
		// b = (35, 35, 30), p_e = (1400 + 1050 + 900)/10000 = 0.335,
		// κ = 0.365/0.665 = 0.548872.
		{"three labels", [][]int{{30, 5, 5}, {5, 20, 5}, {0, 10, 20}}, 0.365 / 0.665},
		{"perfect", [][]int{{10, 0}, {0, 5}}, 1},
		{"all disagree, balanced", [][]int{{0, 5}, {5, 0}}, -1},
		{"constant and same", [][]int{{8}}, math.NaN()},
		{"empty", [][]int{}, math.NaN()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := fromTable(tc.table)
			assertFloat(t, tc.want, stats.CohenKappa(a, b), 1e-6)
		})
	}
	// Labels are nominal: any ints, only equality matters.
	assert.InDelta(t, 0.4, func() float64 {
		a, b := fromTable([][]int{{20, 5}, {10, 15}})
		for i := range a {
			a[i], b[i] = 7-100*a[i], 7-100*b[i]
		}
		return stats.CohenKappa(a, b)
	}(), 1e-12)
	assert.Panics(t, func() { stats.CohenKappa([]int{1}, nil) })
}

func TestCohenKappaInterval(t *testing.T) {
	t.Parallel()
	a, b := fromTable([][]int{{200, 50}, {100, 150}})
	k := stats.CohenKappa(a, b)
	iv := stats.CohenKappaInterval(a, b, 1000, 0.95, 1)
	assert.True(t, iv.Contains(k), "%v ∌ %v", iv, k)
	// Large-sample SE of kappa (Fleiss, Cohen and Everitt 1969) here is about
	// 0.04, so the 95% interval is about 0.16 wide.
	assert.InDelta(t, 0.16, iv.Width(), 0.03)
	assert.Equal(t, iv, stats.CohenKappaInterval(a, b, 1000, 0.95, 1))
}

func TestSpearman(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		x, y []float64
		want float64
	}{
		// Wikipedia, "Spearman's rank correlation coefficient", IQ vs hours
		// of TV per week: ρ = −29/165.
		{
			"Wikipedia IQ/TV",
			[]float64{106, 100, 86, 101, 99, 103, 97, 113, 112, 110},
			[]float64{7, 27, 2, 50, 28, 29, 20, 12, 6, 17},
			-29.0 / 165,
		},
		// By hand with a tie: ranks x = (1, 2.5, 2.5, 4), y = (1, 3, 2, 4);
		// centred: (−1.5, 0, 0, 1.5) and (−1.5, 0.5, −0.5, 1.5);
		// ρ = 4.5/√(4.5·5) = 3/√10.
		{"tie", []float64{1, 2, 2, 3}, []float64{1, 3, 2, 4}, 3 / math.Sqrt(10)},
		// By hand, ties on both sides: ranks x = (1.5, 1.5, 3, 4),
		// y = (1, 2.5, 2.5, 4); centred (−1, −1, 0.5, 1.5) and
		// (−1.5, 0, 0, 1.5): ρ = 3.75/√(4.5·4.5) = 5/6.
		{"ties both", []float64{0, 0, 1, 2}, []float64{1, 2, 2, 3}, 3.75 / 4.5},
		{"monotone, not linear", []float64{1, 2, 3, 4, 5}, []float64{1, 8, 27, 64, 125}, 1},
		{"reversed", []float64{1, 2, 3}, []float64{0.3, 0.2, 0.1}, -1},
		{"constant", []float64{1, 1, 1}, []float64{1, 2, 3}, math.NaN()},
		{"one pair", []float64{1}, []float64{2}, math.NaN()},
		{"NaN", []float64{1, math.NaN(), 3}, []float64{1, 2, 3}, math.NaN()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assertFloat(t, tc.want, stats.Spearman(tc.x, tc.y), 1e-12)
		})
	}
	assert.Panics(t, func() { stats.Spearman([]float64{1}, nil) })
}

func TestSpearmanInterval(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(4, 4))
	x, y := make([]float64, 300), make([]float64, 300)
	for i := range x {
		x[i] = float64(rng.IntN(5)) // judge grades 0..4, many ties
		y[i] = x[i] + 2*rng.NormFloat64()
	}
	rho := stats.Spearman(x, y)
	iv := stats.SpearmanInterval(x, y, 500, 0.95, 2)
	assert.True(t, iv.Contains(rho), "%v ∌ %v", iv, rho)
	assert.True(t, -1 <= iv.Lo && iv.Hi <= 1)
	// Fisher-z approximation: SE ≈ 1.06/√(n−3) in z units ≈ 0.06 here.
	assert.InDelta(t, 0.2, iv.Width(), 0.08)
	assert.Equal(t, iv, stats.SpearmanInterval(x, y, 500, 0.95, 2))
}
