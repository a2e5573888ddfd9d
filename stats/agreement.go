package stats

import (
	"cmp"
	"math"
	"slices"
)

// CohenKappa returns Cohen's kappa, the chance-corrected agreement between
// two raters who labelled the same items: a[i] and b[i] are the labels the
// two raters (say a model judge and a human) gave item i. With p_o the
// observed fraction of agreement and p_e the agreement expected if each
// rater labelled independently at their own label frequencies:
//
//	κ = (p_o − p_e) / (1 − p_e),   p_e = Σ_l (n_a(l)/N)·(n_b(l)/N)
//
// κ is 1 for perfect agreement, 0 for chance agreement, and negative below
// chance. Reference: J. Cohen, "A coefficient of agreement for nominal
// scales", Educational and Psychological Measurement 20 (1960). Labels are
// nominal: any ints, compared only for equality.
//
// It returns NaN for N = 0, and when p_e = 1 (both raters used one and the
// same label for every item, so agreement is perfect but uninformative).
// It panics if a and b differ in length.
func CohenKappa(a, b []int) float64 {
	checkLen("CohenKappa", len(a), len(b))
	la, lb, nl := labelIndex(a, b)
	all := make([]int, len(a))
	for i := range all {
		all[i] = i
	}
	return kappaIdx(la, lb, nl, all, make([]int, 2*nl))
}

// CohenKappaInterval returns a percentile-bootstrap interval for
// [CohenKappa], resampling items (pairs of labels) with replacement; see
// [Bootstrap]. Resamples where kappa is undefined are dropped.
func CohenKappaInterval(a, b []int, resamples int, level float64, seed uint64) Interval {
	checkLen("CohenKappaInterval", len(a), len(b))
	la, lb, nl := labelIndex(a, b)
	scratch := make([]int, 2*nl)
	return Bootstrap(len(a), resamples, level, seed, func(idx []int) float64 {
		return kappaIdx(la, lb, nl, idx, scratch)
	})
}

// labelIndex maps the labels of a and b to dense indices 0..nl−1.
func labelIndex(a, b []int) (la, lb []int, nl int) {
	index := make(map[int]int)
	dense := func(xs []int) []int {
		out := make([]int, len(xs))
		for i, x := range xs {
			j, ok := index[x]
			if !ok {
				j = len(index)
				index[x] = j
			}
			out[i] = j
		}
		return out
	}
	la, lb = dense(a), dense(b)
	return la, lb, len(index)
}

// kappaIdx computes kappa over the items idx of the dense labels la, lb;
// scratch has length 2·nl.
func kappaIdx(la, lb []int, nl int, idx []int, scratch []int) float64 {
	n := len(idx)
	if n == 0 {
		return math.NaN()
	}
	clear(scratch)
	na, nb := scratch[:nl], scratch[nl:]
	agree := 0
	for _, i := range idx {
		x, y := la[i], lb[i]
		na[x]++
		nb[y]++
		if x == y {
			agree++
		}
	}
	nf := float64(n)
	var pe float64
	for l := range nl {
		pe += float64(na[l]) * float64(nb[l])
	}
	pe /= nf * nf
	if pe >= 1 {
		return math.NaN()
	}
	po := float64(agree) / nf
	return (po - pe) / (1 - pe)
}

// Spearman returns Spearman's rank correlation of x and y: Pearson's
// correlation of their ranks, with tied values given the average of the
// ranks they span (so it is correct with ties, unlike the shortcut
// 1 − 6Σd²/(n(n²−1))):
//
//	ρ = Σ(R_i − R̄)(S_i − S̄) / √(Σ(R_i − R̄)² · Σ(S_i − S̄)²)
//
// where R and S are the average ranks of x and y. Use it to check that a
// graded judge orders outputs like human raters. Reference: C. Spearman,
// "The proof and measurement of association between two things", American
// Journal of Psychology 15 (1904); ties: M. G. Kendall, "Rank Correlation
// Methods" (1948), ch. 3.
//
// It returns NaN if n < 2, if x or y is constant, or if any value is NaN.
// It panics if x and y differ in length.
func Spearman(x, y []float64) float64 {
	checkLen("Spearman", len(x), len(y))
	for i := range x {
		if math.IsNaN(x[i]) || math.IsNaN(y[i]) {
			return math.NaN()
		}
	}
	return pearson(ranks(x, nil, nil), ranks(y, nil, nil))
}

// SpearmanInterval returns a percentile-bootstrap interval for [Spearman],
// resampling pairs (x[i], y[i]) with replacement and re-ranking each
// resample; see [Bootstrap]. Resamples where the correlation is undefined
// are dropped.
func SpearmanInterval(x, y []float64, resamples int, level float64, seed uint64) Interval {
	checkLen("SpearmanInterval", len(x), len(y))
	n := len(x)
	for i := range x {
		if math.IsNaN(x[i]) || math.IsNaN(y[i]) {
			n = 0 // NaN interval
			break
		}
	}
	rx, ry := make([]float64, len(x)), make([]float64, len(y))
	order := make([]int, len(x))
	bx, by := make([]float64, len(x)), make([]float64, len(y))
	return Bootstrap(n, resamples, level, seed, func(idx []int) float64 {
		for j, i := range idx {
			bx[j], by[j] = x[i], y[i]
		}
		return pearson(ranks(bx, rx, order), ranks(by, ry, order))
	})
}

// ranks returns the average ranks (1-based) of xs, written into out (and
// using order as scratch) when they are non-nil.
func ranks(xs, out []float64, order []int) []float64 {
	n := len(xs)
	if out == nil {
		out = make([]float64, n)
		order = make([]int, n)
	}
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	for i := 0; i < n; {
		j := i + 1
		for j < n && xs[order[j]] == xs[order[i]] {
			j++
		}
		// Positions i..j−1 hold ranks i+1..j: their average is (i+1+j)/2.
		r := float64(i+1+j) / 2
		for k := i; k < j; k++ {
			out[order[k]] = r
		}
		i = j
	}
	return out
}
