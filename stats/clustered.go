package stats

import (
	"fmt"
	"math"
)

// ClusteredMean returns the mean of all observations and its cluster-robust
// standard error, from per-cluster totals: sums[i] is the sum of the scores
// in cluster i and counts[i] its number of observations — or, for a
// weighted (inverse-probability) mean, the total weight of its observations
// with sums[i] the weighted sum. In an eval a cluster is a sample and its
// observations are its scored epochs, so an incremental aggregator only
// keeps two numbers per sample.
//
// With N = Σ counts[i], C the number of clusters with counts[i] > 0:
//
//	mean = Σ sums[i] / N
//	Var  = (1/N²) · Σ_i (sums[i] − counts[i]·mean)²
//	se   = √Var                  (corrected = false)
//	se   = √(Var · C/(C−1))      (corrected = true)
//
// This is the clustered standard error of E. Miller, "Adding Error Bars to
// Evals: A Statistical Approach to Language Model Evaluations", 2024,
// arXiv:2411.00640 ("Clustered standard errors"):
//
//	SE_clustered² = SE_CLT² + (1/N²) Σ_c Σ_i Σ_{j≠i} (x_ic − x̄)(x_jc − x̄)
//
// with SE_CLT² = (1/N²) Σ (x − x̄)²; grouping the terms by cluster gives
// the sum of squared cluster residuals above. It is
// the Liang–Zeger sandwich estimator for a regression on a constant.
//
// The uncorrected form is Miller's; with one observation per cluster it is
// the plug-in √(p̂(1−p̂)/N) for 0/1 scores. The corrected form applies the
// small-sample factor C/(C−1) (Stata's CR1 for a mean); with one
// observation per cluster it equals the familiar s/√N with the n−1 sample
// standard deviation. Prefer corrected = true when clusters are few (under
// about 50); the two agree to within 1% beyond C = 50.
//
// Clusters with a zero count are ignored. If N = 0 both results are NaN; if
// fewer than two clusters are non-empty, se is NaN. It panics if the slices
// differ in length, a count is negative, or an empty cluster has a non-zero
// sum.
//
// With weights, mean is the ratio (Hájek) estimator Σ w·x / Σ w and se its
// linearization (sandwich) standard error: the same formula.
func ClusteredMean(sums, counts []float64, corrected bool) (mean, se float64) {
	checkLen("ClusteredMean", len(sums), len(counts))
	var total, n float64
	var c int
	for i, k := range counts {
		checkCluster("ClusteredMean", i, sums[i], k)
		if k == 0 {
			continue
		}
		total += sums[i]
		n += k
		c++
	}
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	mean = total / n
	if c < 2 {
		return mean, math.NaN()
	}
	var ss float64
	for i, k := range counts {
		r := sums[i] - k*mean
		ss += r * r
	}
	v := ss / (n * n)
	if corrected {
		v *= float64(c) / float64(c-1)
	}
	return mean, math.Sqrt(v)
}

// ClusteredSE returns the cluster-robust standard error of the mean of
// scores, where clusters[i] names the cluster of scores[i] (in an eval, the
// sample ID). It is [ClusteredMean] over [ClusterTotals] with corrected =
// false, Miller's formula exactly; see [ClusteredSECorrected] for the
// C/(C−1) small-sample correction. With every observation in its own
// cluster it is √(Σ(x − x̄)²)/N. It panics if the slices differ in length.
func ClusteredSE(scores []float64, clusters []string) float64 {
	sums, counts := ClusterTotals(scores, clusters)
	_, se := ClusteredMean(sums, counts, false)
	return se
}

// ClusteredSECorrected is [ClusteredSE] with the small-sample factor
// C/(C−1) applied to the variance (C = number of clusters); see
// [ClusteredMean]. With every observation in its own cluster it equals the
// usual s/√N.
func ClusteredSECorrected(scores []float64, clusters []string) float64 {
	sums, counts := ClusterTotals(scores, clusters)
	_, se := ClusteredMean(sums, counts, true)
	return se
}

// ClusterTotals groups scores by cluster and returns the per-cluster sums
// and counts, in order of each cluster's first appearance (so results
// computed from them are deterministic). It panics if the slices differ in
// length.
func ClusterTotals(scores []float64, clusters []string) (sums, counts []float64) {
	checkLen("ClusterTotals", len(scores), len(clusters))
	index := make(map[string]int)
	for i, x := range scores {
		j, ok := index[clusters[i]]
		if !ok {
			j = len(sums)
			index[clusters[i]] = j
			sums = append(sums, 0)
			counts = append(counts, 0)
		}
		sums[j] += x
		counts[j]++
	}
	return sums, counts
}

func checkCluster(fn string, i int, sum, count float64) {
	if count < 0 || (count == 0 && sum != 0) {
		panic(fmt.Sprintf("stats: %s: cluster %d has count %v and sum %v", fn, i, count, sum))
	}
}
