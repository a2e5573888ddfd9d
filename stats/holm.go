package stats

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Holm returns Holm–Bonferroni adjusted p-values, in the order of pvalues.
// With the m p-values sorted ascending, p_(1) ≤ … ≤ p_(m):
//
//	adj_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j))
//
// Rejecting the hypotheses whose adjusted p-value is at most α controls the
// family-wise error rate at α for any dependence between the tests, and is
// uniformly more powerful than Bonferroni's m·p. Use it when a report tests
// many breakdowns (tags, categories) at once. Reference: S. Holm, "A simple
// sequentially rejective multiple test procedure", Scandinavian Journal of
// Statistics 6 (1979); adjusted p-values as in R's p.adjust(method =
// "holm").
//
// NaN p-values (tests that could not be run) stay NaN and do not count
// towards m. It panics if a p-value is outside [0, 1]. The input is not
// modified.
func Holm(pvalues []float64) []float64 {
	adj := make([]float64, len(pvalues))
	order := make([]int, 0, len(pvalues))
	for i, p := range pvalues {
		switch {
		case math.IsNaN(p):
			adj[i] = p
		case p < 0 || p > 1:
			panic(fmt.Sprintf("stats: Holm: p-value %v at %d outside [0, 1]", p, i))
		default:
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(pvalues[x], pvalues[y]) })
	m := len(order)
	running := 0.0
	for j, i := range order {
		running = math.Max(running, math.Min(1, float64(m-j)*pvalues[i]))
		adj[i] = running
	}
	return adj
}
