package stats

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Difference is the result of a paired comparison of a base run a and a head
// run b over the same N samples. Mean is mean(b) − mean(a): positive means
// the head scores higher.
type Difference struct {
	Mean        float64 // mean(b − a) = MeanB − MeanA
	SE          float64 // sd(b − a)/√N, with the N−1 sample standard deviation
	Lo, Hi      float64 // Mean ∓ t·SE, t the Student t quantile with N−1 degrees of freedom
	Level       float64 // confidence level of [Lo, Hi], e.g. 0.95
	P           float64 // two-sided p-value of the paired t-test of Mean = 0
	Correlation float64 // Pearson correlation of a and b; NaN when undefined
	N           int     // number of pairs
	MeanA       float64 // mean(a), the base
	MeanB       float64 // mean(b), the head
}

// Paired compares two runs over the same samples: a[i] and b[i] are the
// scores of sample i in the base run a and the head run b (per-sample means
// over epochs, or 0/1 outcomes). With d_i = b_i − a_i:
//
//	Mean = d̄ = mean(b) − mean(a)
//	SE   = s_d/√N,   s_d² = Σ(d_i − d̄)²/(N−1)
//	[Lo, Hi] = d̄ ∓ t_{1−α/2, N−1}·SE,   α = 1 − level
//	P    = 2·(1 − F_{N−1}(|d̄|/SE))
//	Correlation = Pearson's r of a and b
//
// Pairing removes the between-sample variance the two runs share: Var(d̄) =
// (σ_a² + σ_b² − 2ρσ_aσ_b)/N, so a positive correlation ρ (the usual case:
// hard samples are hard for both) gives a much narrower interval than
// comparing two independent means. Reference: Miller (2024),
// arXiv:2411.00640, "Paired differences"; the t-interval is
// Student's (1908).
//
// Edge cases: N = 0 gives all-NaN statistics; N = 1 gives Mean and NaN for
// the rest. If all differences are equal, SE = 0, Lo = Hi = Mean and P is
// 1 when Mean = 0 and 0 otherwise. Correlation is NaN when N < 2 or a or b is
// constant (an all-pass run, say). It panics if a and b differ in length or
// level is outside (0, 1).
func Paired(a, b []float64, level float64) Difference {
	checkLen("Paired", len(a), len(b))
	checkLevel("Paired", "level", level)
	nan := math.NaN()
	n := len(a)
	d := Difference{Mean: nan, SE: nan, Lo: nan, Hi: nan, P: nan, Correlation: nan, N: n, Level: level, MeanA: nan, MeanB: nan}
	if n == 0 {
		return d
	}
	nf := float64(n)
	var sa, sb float64
	for i := range a {
		sa += a[i]
		sb += b[i]
	}
	d.MeanA, d.MeanB = sa/nf, sb/nf
	d.Mean = d.MeanB - d.MeanA
	if n < 2 {
		return d
	}
	var ss float64
	for i := range a {
		r := (b[i] - a[i]) - d.Mean
		ss += r * r
	}
	d.SE = math.Sqrt(ss / (nf - 1) / nf)
	d.Correlation = pearson(a, b)
	if d.SE == 0 {
		d.Lo, d.Hi = d.Mean, d.Mean
		if d.Mean == 0 {
			d.P = 1
		} else {
			d.P = 0
		}
		return d
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: nf - 1}
	q := t.Quantile(1 - (1-level)/2)
	d.Lo, d.Hi = d.Mean-q*d.SE, d.Mean+q*d.SE
	d.P = math.Min(1, 2*t.Survival(math.Abs(d.Mean)/d.SE))
	return d
}

// McNemar returns the exact two-sided p-value of McNemar's test for paired
// binary outcomes, from the discordant pairs: onlyA samples passed in run a
// but not in b, onlyB passed in b but not in a. Under the null hypothesis
// that both runs have the same pass rate, each discordant pair is equally
// likely to go either way, so with m = onlyA + onlyB:
//
//	p = min(1, 2·P(X ≤ min(onlyA, onlyB))),   X ~ Binomial(m, 1/2)
//
// Reference: Q. McNemar, "Note on the sampling error of the difference
// between correlated proportions or percentages", Psychometrika 12 (1947);
// the exact (binomial) form is in A. Agresti, "Categorical Data Analysis",
// 3rd ed. (2013), ch. 11, and is R's binom.test(onlyA, m). Pairs
// where both runs agree carry no information and are not arguments.
//
// It returns 1 when onlyA = onlyB = 0 and panics if either is negative.
func McNemar(onlyA, onlyB int) float64 {
	if onlyA < 0 || onlyB < 0 {
		panic(fmt.Sprintf("stats: McNemar: negative count onlyA=%d onlyB=%d", onlyA, onlyB))
	}
	m := onlyA + onlyB
	if m == 0 {
		return 1
	}
	k := min(onlyA, onlyB)
	return math.Min(1, 2*distuv.Binomial{N: float64(m), P: 0.5}.CDF(float64(k)))
}

// pearson returns Pearson's correlation of x and y, NaN if len < 2 or either
// is constant.
func pearson(x, y []float64) float64 {
	n := len(x)
	if n < 2 {
		return math.NaN()
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(n)
	my /= float64(n)
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return math.Max(-1, math.Min(1, sxy/math.Sqrt(sxx*syy)))
}
