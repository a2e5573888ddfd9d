package stats

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// ebIncreasing reports whether an empirical-Bernstein term at bet l,
// l·x − 4(x − m)²·ψ_E(l), is non-decreasing in x over [0, 1] for every
// plug-in mean m in [0, 1]: its slope l − 8(x − m)·ψ_E(l) is at least
// l − 8ψ_E(l).
func ebIncreasing(l float64) bool {
	psi := (-math.Log1p(-l) - l) / 4
	return l-8*psi >= 0
}

// TestEmpiricalBernsteinBetCap: AddRange counts an observation known only to
// lie in [lo, hi] as lo on the lower side and hi on the upper. That is valid
// (the process it builds lies under the one of the true value, a
// supermartingale) only while each side's term is monotone in the
// observation, which holds for bets up to about 0.58 and fails above: the
// cap of 1/2 is what makes the ranges valid. The bets the sequence takes
// never exceed it, even at the start, when the plug-in bet is far larger.
func TestEmpiricalBernsteinBetCap(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0.5, ebTruncation)
	for l := 0.001; l <= ebTruncation; l += 0.001 {
		require.True(t, ebIncreasing(l), "bet %v", l)
	}
	require.False(t, ebIncreasing(0.6), "above the cap the lower side could rise by counting a range as its low end")

	s := NewEmpiricalBernstein(0.1)
	require.Greater(t, s.p.bet(), 1.0, "the first plug-in bet is above the cap")
	for i := range 200 {
		before := s.lambda
		s.AddRange(0, float64(i%2))
		require.LessOrEqual(t, s.lambda-before, ebTruncation+1e-15, "observation %d", i)
	}
}
