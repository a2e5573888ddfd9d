package stats

import (
	"fmt"
	"math"
)

// PassAtK returns the unbiased estimate of pass@k, the probability that at
// least one of k attempts passes, from n attempts of which c passed:
//
//	pass@k = 1 − C(n−c, k) / C(n, k)
//	       = 1 − ∏_{i=n−c+1}^{n} (1 − k/i)
//
// The product form (Chen et al., "Evaluating Large Language Models Trained
// on Code", 2021, arXiv:2107.03374, figure 3) avoids the huge binomial
// coefficients. Averaged over samples it is unbiased for the population
// pass@k, unlike 1 − (1 − c/n)^k.
//
// If n − c < k every k-subset holds a pass and the result is 1. k = 0 gives
// 0 (no attempts never pass). If k > n the estimator is undefined and
// PassAtK returns NaN: this happens legitimately when some of a sample's
// episodes errored and were excluded, and the caller decides whether to drop
// or flag the sample. It panics if n < 0, k < 0 or c is outside [0, n].
func PassAtK(n, c, k int) float64 {
	checkPassK("PassAtK", n, c, k)
	if k > n {
		return math.NaN()
	}
	if k == 0 {
		return 0
	}
	if n-c < k {
		return 1
	}
	prod := 1.0
	kf := float64(k)
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - kf/float64(i)
	}
	return 1 - prod
}

// PassHatK returns the unbiased estimate of pass^k, the probability that all
// of k attempts pass, from n attempts of which c passed:
//
//	pass^k = C(c, k) / C(n, k) = ∏_{i=0}^{k−1} (c − i)/(n − i)
//
// Reference: Yao et al., "τ-bench: A Benchmark for Tool-Agent-User
// Interaction in Real-World Domains", 2024, arXiv:2406.12045.
// It measures consistency: pass^1 = c/n, and pass^k falls with k.
//
// If c < k the result is 0; k = 0 gives 1. If k > n it returns NaN (see
// [PassAtK]). It panics if n < 0, k < 0 or c is outside [0, n].
func PassHatK(n, c, k int) float64 {
	checkPassK("PassHatK", n, c, k)
	if k > n {
		return math.NaN()
	}
	if c < k {
		return 0
	}
	prod := 1.0
	for i := 0; i < k; i++ {
		prod *= float64(c-i) / float64(n-i)
	}
	return prod
}

func checkPassK(fn string, n, c, k int) {
	if n < 0 || k < 0 || c < 0 || c > n {
		panic(fmt.Sprintf("stats: %s: invalid arguments n=%d c=%d k=%d", fn, n, c, k))
	}
}
