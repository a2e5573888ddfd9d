package stats

import (
	"encoding/json"
	"fmt"
	"math"
)

// MethodPPI is the [Interval.Method] of a prediction-powered interval.
const MethodPPI = "prediction-powered"

// Label is the ground truth of one item of a prediction-powered estimate:
// the grade a person gave it, and the probability it had of being picked
// for review.
type Label struct {
	Index int     // the item: an index into the predictions
	Value float64 // the true value: 1 pass, 0 fail, a score, or the mean of several reviewers' grades
	Prob  float64 // the item's inclusion probability, in (0, 1]
}

// PPI is a prediction-powered estimate of a mean: see [PPIMean].
type PPI struct {
	Mean     float64
	SE       float64  // standard error of Mean
	Interval Interval // Mean ± z·SE; not clipped to the range of the values
	// Lambda is the weight the predictions got: 0 ignores them (the
	// estimate from the labels alone), 1 is the original PPI.
	Lambda   float64
	N        int // items
	Labelled int // items with a label
}

type ppiJSON struct {
	Mean     Float    `json:"mean"`
	SE       Float    `json:"se"`
	Interval Interval `json:"interval"`
	Lambda   Float    `json:"lambda"`
	N        int      `json:"n"`
	Labelled int      `json:"labelled"`
}

// MarshalJSON writes the estimate in snake_case, NaN as null.
func (p PPI) MarshalJSON() ([]byte, error) {
	return json.Marshal(ppiJSON{Float(p.Mean), Float(p.SE), p.Interval, Float(p.Lambda), p.N, p.Labelled})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *PPI) UnmarshalJSON(b []byte) error {
	var j ppiJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = PPI{float64(j.Mean), float64(j.SE), j.Interval, float64(j.Lambda), j.N, j.Labelled}
	return nil
}

// PPIMean estimates the mean of the true values of N items from a
// prediction for every item (a model judge's verdicts: 1 pass, 0 fail, or
// scores) and the true values of a few (people's grades), picked at random
// with known inclusion probabilities. Its interval is valid however biased
// the predictions are; the better they predict the truth, the narrower it
// is than the labels alone would give. This is prediction-powered inference
// (A. N. Angelopoulos, S. Bates, C. Fannjiang, M. I. Jordan, T. Zrnic,
// "Prediction-powered inference", Science 382, 2023) with power tuning
// (PPI++: A. N. Angelopoulos, J. C. Duchi, T. Zrnic, "PPI++: Efficient
// prediction-powered inference", arXiv:2311.01453, 2023), with the
// rectifier weighted by inverse inclusion probabilities (Horvitz–Thompson,
// as in T. Zrnic, E. J. Candès, "Active statistical inference", ICML 2024)
// so that any sampling design stays unbiased: uniform, stratified, or one
// that oversamples suspected failures.
//
// With f_i the predictions of all N items, S the labelled items, Y_i their
// values and π_i their inclusion probabilities, the estimate is the mean of
// λ·f over all items plus the mean of the rectifier r = Y − λf over the
// labelled ones, each weighted by 1/π_i (the Hájek ratio form, which equals
// the Horvitz–Thompson one for uniform and stratified samples of fixed
// size):
//
//	θ̂ = λ·f̄ + r̄,   r̄ = Σ_S (r_i/π_i) / Σ_S (1/π_i)
//
// Its standard error comes from the linearized contribution of each item,
// φ_i = λf_i + [i ∈ S]·(N/Σ_S 1/π)·(r_i − r̄)/π_i, as SE² = s²(φ)/N. It
// targets the mean of the population the N items are drawn from (as a
// Wilson interval on a pass rate does), so it is about √(σ²/N) wide even
// when every item is labelled.
//
// λ is tuned to minimize the variance: the slope of a regression of Y on f
// over the labelled items, weighted by (1 − π_i)/π_i² (the design variance
// each contributes), clipped to [0, 1]. For a uniform sample it is
// Cov(f, Y)/Var(f); PPI++ has Cov/((1 + n/N)·Var) because there the
// labelled items are not among the N. Use [PPIMeanLambda] for a fixed λ.
//
// Items are independent when clusters is nil. Otherwise clusters[i] is
// item i's cluster (its sample, when a run has several epochs: a hard
// sample fails on every epoch), and the standard error is cluster-robust,
// SE² = C/(C−1)·Σ_c (Σ_{i∈c} (φ_i − θ̂))² / N² over the C clusters (as
// [ClusteredMean]); items are still picked one by one. The labels'
// inclusion must be independent of their values given what decided the
// probabilities (tags, the judge's verdict). The interval is the normal
// one, Mean ± z·SE; its coverage is checked by simulation in ppi_test.go.
// Mean, SE and the interval are NaN with fewer than two labels. It panics
// if a label's index is out of range or repeated, its probability is
// outside (0, 1], clusters is neither nil nor as long as pred, or level is
// outside (0, 1).
func PPIMean(pred []float64, labels []Label, clusters []int, level float64) PPI {
	checkLabels("PPIMean", len(pred), labels)
	return PPIMeanLambda(pred, labels, clusters, ppiLambda(pred, labels), level)
}

// PPIMeanLambda is [PPIMean] with a fixed λ: 1 for the original PPI, 0
// for the estimate from the labels alone (the Hájek estimator of the mean,
// on the same design), which is what the predictions are measured
// against.
func PPIMeanLambda(pred []float64, labels []Label, clusters []int, lambda, level float64) PPI {
	checkLabels("PPIMeanLambda", len(pred), labels)
	if clusters != nil {
		checkLen("PPIMeanLambda", len(pred), len(clusters))
	}
	z := zQuantile("PPIMeanLambda", level)
	n := len(pred)
	res := PPI{Lambda: lambda, N: n, Labelled: len(labels)}
	nan := math.NaN()
	res.Mean, res.SE = nan, nan
	res.Interval = Interval{Lo: nan, Hi: nan, Level: level, Method: MethodPPI}
	if len(labels) < 2 {
		return res
	}
	fbar, fss := meanSS(pred)
	var nhat, rsum float64
	for _, l := range labels {
		nhat += 1 / l.Prob
		rsum += (l.Value - lambda*pred[l.Index]) / l.Prob
	}
	rbar := rsum / nhat
	res.Mean = lambda*fbar + rbar

	// φ_i = λf_i + rbar + e_i, where e_i = (N/N̂)(r_i − rbar)/π_i for a
	// labelled item and 0 otherwise. Σ e_i = 0 (rbar is their weighted
	// mean), so mean(φ) = Mean and Σ(φ_i − Mean)² = λ²·Σ(f_i − f̄)² +
	// Σ_S (2λ(f_i − f̄)e_i + e_i²).
	scale := float64(n) / nhat
	e := func(l Label) float64 { return scale * (l.Value - lambda*pred[l.Index] - rbar) / l.Prob }
	if clusters == nil {
		ss := lambda * lambda * fss
		for _, l := range labels {
			ei := e(l)
			ss += 2*lambda*(pred[l.Index]-fbar)*ei + ei*ei
		}
		res.SE = math.Sqrt(ss / float64(n-1) / float64(n))
	} else {
		// D_c = Σ_{i∈c} (φ_i − Mean) = λ·Σ_{i∈c} (f_i − f̄) + Σ_{S∩c} e_i,
		// clusters numbered in order of appearance so that the sums, and
		// the result, do not depend on a map's order.
		dense := make(map[int]int)
		of := make([]int, n)
		for i, c := range clusters {
			j, ok := dense[c]
			if !ok {
				j = len(dense)
				dense[c] = j
			}
			of[i] = j
		}
		d := make([]float64, len(dense))
		for i, f := range pred {
			d[of[i]] += lambda * (f - fbar)
		}
		for _, l := range labels {
			d[of[l.Index]] += e(l)
		}
		var ss float64
		for _, x := range d {
			ss += x * x
		}
		c := float64(len(d))
		res.SE = math.Sqrt(c / (c - 1) * ss / (float64(n) * float64(n)))
	}
	res.Interval.Lo, res.Interval.Hi = res.Mean-z*res.SE, res.Mean+z*res.SE
	return res
}

// ppiLambda returns the power-tuned λ of PPIMean: the weighted regression
// slope of the labels on the predictions, clipped to [0, 1].
func ppiLambda(pred []float64, labels []Label) float64 {
	if len(labels) < 2 {
		return 1
	}
	fbar, _ := meanSS(pred)
	var nhat, ysum float64
	for _, l := range labels {
		nhat += 1 / l.Prob
		ysum += l.Value / l.Prob
	}
	ybar := ysum / nhat
	var sxy, sxx float64
	for _, l := range labels {
		w := (1 - l.Prob) / (l.Prob * l.Prob)
		df := pred[l.Index] - fbar
		sxy += w * df * (l.Value - ybar)
		sxx += w * df * df
	}
	if sxx == 0 {
		// Every label was certain to be picked (no design variance to
		// reduce) or the predictions are constant: they cannot help.
		return 0
	}
	return min(1, max(0, sxy/sxx))
}

// meanSS returns the mean of xs and the sum of squared deviations from it.
func meanSS(xs []float64) (mean, ss float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		d := x - mean
		ss += d * d
	}
	return mean, ss
}

func checkLabels(fn string, n int, labels []Label) {
	seen := make(map[int]bool, len(labels))
	for _, l := range labels {
		if l.Index < 0 || l.Index >= n {
			panic(fmt.Sprintf("stats: %s: label index %d outside [0, %d)", fn, l.Index, n))
		}
		if seen[l.Index] {
			panic(fmt.Sprintf("stats: %s: item %d labelled twice", fn, l.Index))
		}
		seen[l.Index] = true
		if !(l.Prob > 0 && l.Prob <= 1) {
			panic(fmt.Sprintf("stats: %s: label of item %d has inclusion probability %v outside (0, 1]", fn, l.Index, l.Prob))
		}
	}
}

// PPISampleSize returns how many items of N a uniform random sample must
// label for a [PPIMean] interval of the given width (Hi − Lo) at level, when
// the true values have standard deviation sd (√(p(1−p)) for a pass rate p)
// and the predictions correlate with them by rho (for pass/fail, the phi
// coefficient of the judge's verdicts and the people's grades). From the
// variance of the tuned estimate, σ²·((1−ρ²)/n + ρ²/N):
//
//	n = (1 − ρ²)·σ² / ((w/2z)² − ρ²·σ²/N)
//
// rounded up. The tuned estimate weighs the predictions by λ clipped to
// [0, 1] (PPIMean), so the plan does too: the variance is
// σ²·((1 − 2λρ + λ²)/n + λ²/N) at λ = clip(ρ, 0, 1), the PPI++ variance
// of a mean (Angelopoulos, Duchi, Zrnic, arXiv:2311.01453, for predictions
// as spread as the truth), minimal at λ = ρ when ρ ≥ 0. A negative rho
// gets λ = 0 and plans what the labels alone need (unclipped, ρ = −0.9
// planned 334 reviews of 10,000 for a width of 0.05 where 1,537 are
// needed). With rho = 0 it is what the labels alone need. It returns
// N+1 when even labelling every item cannot reach the width (the interval
// is then at least 2z·σ/√N wide), and at least 2. It panics if width or sd
// is negative or not finite, rho is outside [−1, 1], N < 1 or level is
// outside (0, 1).
func PPISampleSize(width, sd, rho float64, N int, level float64) int {
	z := zQuantile("PPISampleSize", level)
	if !(width > 0) || math.IsInf(width, 0) {
		panic(fmt.Sprintf("stats: PPISampleSize: width %v must be positive and finite", width))
	}
	checkSD("PPISampleSize", "sd", sd)
	if !(rho >= -1 && rho <= 1) {
		panic(fmt.Sprintf("stats: PPISampleSize: rho %v outside [-1, 1]", rho))
	}
	if N < 1 {
		panic(fmt.Sprintf("stats: PPISampleSize: N %d < 1", N))
	}
	h := width / (2 * z)
	lambda := max(rho, 0) // as PPIMean clips it; λ = ρ minimizes the variance
	v, r2 := sd*sd, lambda*lambda
	den := h*h - r2*v/float64(N)
	if den <= 0 {
		return N + 1
	}
	n := math.Ceil((1-r2)*v/den - 1e-9)
	if n > float64(N) {
		return N + 1
	}
	return max(2, int(n))
}
