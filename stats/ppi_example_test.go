package stats_test

import (
	"fmt"

	"github.com/proctor-evals/proctor/stats"
)

// A judge passed 7 of 10 episodes; people reviewed 4 of them, picked
// uniformly (each with probability 4/10), and failed one the judge had
// passed.
func ExamplePPIMean() {
	judge := []float64{1, 1, 1, 0, 1, 1, 0, 1, 1, 0}
	labels := []stats.Label{
		{Index: 0, Value: 1, Prob: 0.4},
		{Index: 1, Value: 0, Prob: 0.4}, // the judge was too lenient
		{Index: 3, Value: 0, Prob: 0.4},
		{Index: 4, Value: 1, Prob: 0.4},
	}
	ppi := stats.PPIMean(judge, labels, nil, 0.95)
	alone := stats.PPIMeanLambda(judge, labels, nil, 0, 0.95)
	fmt.Printf("judge 0.70, prediction-powered %.2f ± %.2f (λ %.2f), reviews alone %.2f ± %.2f\n",
		ppi.Mean, ppi.Interval.Width()/2, ppi.Lambda, alone.Mean, alone.Interval.Width()/2)
	// Output:
	// judge 0.70, prediction-powered 0.47 ± 0.47 (λ 0.66), reviews alone 0.50 ± 0.52
}

// Krippendorff's own example (2011): four reviewers, twelve items, some
// not graded by everyone.
func ExampleKrippendorffAlpha() {
	units := [][]int{{1, 1, 1}, {2, 2, 3, 2}, {3, 3, 3, 3}, {3, 3, 3, 3}, {2, 2, 2, 2}, {1, 2, 3, 4},
		{4, 4, 4, 4}, {1, 1, 2, 1}, {2, 2, 2, 2}, {5, 5, 5}, {1, 1}, {3}}
	fmt.Printf("%.3f\n", stats.KrippendorffAlpha(units))
	// Output: 0.743
}
