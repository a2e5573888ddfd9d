package stats_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/proctor-evals/proctor/stats"
)

// TestKrippendorffAlpha checks the published worked examples of
// Krippendorff, "Computing Krippendorff's alpha-reliability" (2011).
func TestKrippendorffAlpha(t *testing.T) {
	t.Parallel()
	// Section A: two observers, binary data, 10 units: α = 0.095.
	a := []int{0, 1, 0, 0, 0, 0, 0, 0, 1, 0}
	b := []int{1, 1, 1, 0, 0, 1, 0, 0, 0, 0}
	var units [][]int
	for i := range a {
		units = append(units, []int{a[i], b[i]})
	}
	assert.InDelta(t, 0.095, stats.KrippendorffAlpha(units), 0.0005)
	assert.InDelta(t, 1-19.0*8/(2*14*6), stats.KrippendorffAlpha(units), 1e-12) // by hand: n = 20, n_0 = 14, n_1 = 6

	// Section C: four observers, nominal values 1..5, 12 units with
	// missing data (0 here): α = 0.743.
	const missing = 0
	obs := [][]int{
		{1, 2, 3, 3, 2, 1, 4, 1, 2, 0, 0, 0},
		{1, 2, 3, 3, 2, 2, 4, 1, 2, 5, 0, 3},
		{0, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, 0},
		{1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, 0},
	}
	units = make([][]int, 12)
	for _, row := range obs {
		for u, v := range row {
			if v != missing {
				units[u] = append(units[u], v)
			}
		}
	}
	assert.InDelta(t, 0.743, stats.KrippendorffAlpha(units), 0.0005)

	// Perfect agreement, and none: a unit of one value is left out.
	assert.Equal(t, 1.0, stats.KrippendorffAlpha([][]int{{1, 1}, {0, 0, 0}, {1}}))
	assert.True(t, math.IsNaN(stats.KrippendorffAlpha([][]int{{1, 1}, {1}})), "no variation")
	assert.True(t, math.IsNaN(stats.KrippendorffAlpha([][]int{{1}, {0}})), "nothing paired")
	// Two raters who always disagree on a balanced set: below chance.
	assert.Less(t, stats.KrippendorffAlpha([][]int{{0, 1}, {1, 0}, {0, 1}, {1, 0}}), 0.0)
}

func TestConfusion(t *testing.T) {
	t.Parallel()
	// Wikipedia's kappa example (as in TestCohenKappa): yes/yes 20, yes/no
	// 5, no/yes 10, no/no 15: κ = 0.4.
	var c stats.Confusion
	add := func(judge, human bool, n int) {
		for range n {
			c.Add(judge, human)
		}
	}
	add(true, true, 20)
	add(true, false, 5)
	add(false, true, 10)
	add(false, false, 15)
	assert.Equal(t, stats.Confusion{BothPass: 20, FalsePass: 5, FalseFail: 10, BothFail: 15}, c)
	assert.Equal(t, 50, c.N())
	assert.InDelta(t, 0.7, c.Agreement(), 1e-12)
	assert.InDelta(t, 0.4, c.Kappa(), 1e-12)
	a, b := fromTable([][]int{{20, 5}, {10, 15}})
	assert.InDelta(t, stats.CohenKappa(a, b), c.Kappa(), 1e-12)
	// φ = (20·15 − 5·10)/√(25·25·30·20) = 250/612.37.
	assert.InDelta(t, 250/math.Sqrt(25*25*30*20), c.Phi(), 1e-12)
	var empty stats.Confusion
	assert.True(t, math.IsNaN(empty.Kappa()) && math.IsNaN(empty.Agreement()) && math.IsNaN(empty.Phi()))
}
