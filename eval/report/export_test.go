package report

import "github.com/proctor-evals/proctor/internal/natural"

// NaturalCompare exposes the order of samples to the external tests.
var NaturalCompare = natural.Compare

// SetPBestBudget sets the work above which P(best) is drawn from the
// normal approximation, and returns a function that restores it.
func SetPBestBudget(b float64) func() {
	old := pBestBudget
	pBestBudget = b
	return func() { pBestBudget = old }
}
