// Package costproj projects a run's total cost from the cost of the
// episodes finished so far: what the progress line and the viewer show.
package costproj

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// After is how many finished episodes a projection needs: the first few
// say little about the rest.
const After = 10

// Total projects the total cost of a run of which n episodes have
// finished, costing sum (and sumSq, the sum of their squares), with
// remaining episodes left: sum plus remaining × the mean, with a 95%
// prediction interval for the cost of the episodes left,
// t₀.₉₇₅,ₙ₋₁ · s · √(R + R²/n) either side for R left and s the standard
// deviation of the finished costs (the spread of the costs to come and
// the uncertainty of their mean), never below sum. ok is false before
// After episodes have finished or while they cost nothing.
//
// It assumes the episodes left cost what the finished ones did. Costs
// skewed to the right make the range a little narrow: it held the true
// total in 93.2–94.3% of 5 × 2,000 simulated runs of exponential costs,
// projected from 60 of 500 (eval's TestProjectedCostCoversTheTotal).
func Total(sum, sumSq float64, n, remaining int64) (lo, hi float64, ok bool) {
	if n < After || !(sum > 0) {
		return 0, 0, false
	}
	if remaining <= 0 {
		return sum, sum, true
	}
	mean := sum / float64(n)
	variance := max(0, (sumSq-float64(n)*mean*mean)/float64(n-1))
	r := float64(remaining)
	q := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(0.975)
	half := q * math.Sqrt(variance) * math.Sqrt(r+r*r/float64(n))
	mid := sum + r*mean
	return max(sum, mid-half), mid + half, true
}
