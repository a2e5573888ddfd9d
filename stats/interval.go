package stats

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Method names reported in [Interval.Method].
const (
	MethodWilson           = "wilson"
	MethodClopperPearson   = "clopper-pearson"
	MethodBootstrap        = "percentile-bootstrap"
	MethodClusterBootstrap = "cluster-percentile-bootstrap"
)

// Interval is a two-sided confidence interval [Lo, Hi] at confidence Level
// (0.95 for a 95% interval), computed by Method.
type Interval struct {
	Lo, Hi float64
	Level  float64
	Method string
}

// Contains reports whether Lo ≤ x ≤ Hi.
func (iv Interval) Contains(x float64) bool { return iv.Lo <= x && x <= iv.Hi }

// Width returns Hi − Lo.
func (iv Interval) Width() float64 { return iv.Hi - iv.Lo }

// String formats the interval as "[0.490, 0.943] (95% wilson)".
func (iv Interval) String() string {
	return fmt.Sprintf("[%.3f, %.3f] (%g%% %s)", iv.Lo, iv.Hi, 100*iv.Level, iv.Method)
}

// Wilson returns the Wilson score interval for a binomial proportion with
// the given number of successes out of n trials:
//
//	p̂ = successes/n, z = Φ⁻¹(1 − (1−level)/2)
//	center = (p̂ + z²/(2n)) / (1 + z²/n)
//	half   = z/(1 + z²/n) · √(p̂(1−p̂)/n + z²/(4n²))
//	[Lo, Hi] = [center − half, center + half]
//
// Reference: E. B. Wilson, "Probable inference, the law of succession, and
// statistical inference", JASA 22 (1927); R. G. Newcombe, "Two-sided
// confidence intervals for the single proportion", Statistics in Medicine
// 17 (1998), method 3. Unlike the Wald interval p̂ ± z√(p̂(1−p̂)/n), it stays
// inside [0, 1] and does not collapse to a point at 0/n or n/n, and its
// coverage is close to nominal even for small n; it is the interval to use
// for pass rates.
//
// Edge cases: for successes = 0, Lo is exactly 0 (and Hi = z²/(n+z²)); for
// successes = n, Hi is exactly 1. For n = 0 it returns [0, 1]. It panics if
// n < 0, successes is outside [0, n], or level is outside (0, 1).
func Wilson(successes, n int, level float64) Interval {
	checkBinomial("Wilson", successes, n)
	z := zQuantile("Wilson", level)
	iv := Interval{Lo: 0, Hi: 1, Level: level, Method: MethodWilson}
	if n == 0 {
		return iv
	}
	nf := float64(n)
	p := float64(successes) / nf
	z2 := z * z
	d := 1 + z2/nf
	center := (p + z2/(2*nf)) / d
	half := z / d * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	if successes > 0 {
		iv.Lo = math.Max(0, center-half)
	}
	if successes < n {
		iv.Hi = math.Min(1, center+half)
	}
	return iv
}

// ClopperPearson returns the Clopper–Pearson ("exact") interval for a
// binomial proportion, the set of p for which neither one-sided binomial
// test rejects at (1−level)/2, written with Beta quantiles (α = 1 − level,
// x = successes):
//
//	Lo = B⁻¹(α/2;     x,   n−x+1)   (0 when x = 0)
//	Hi = B⁻¹(1 − α/2; x+1, n−x)     (1 when x = n)
//
// where B⁻¹(q; a, b) is the q-quantile of the Beta(a, b) distribution.
// Reference: C. J. Clopper and E. S. Pearson, "The use of confidence or
// fiducial limits illustrated in the case of the binomial", Biometrika 26
// (1934); Newcombe (1998), method 5. Its coverage is at least level for
// every p, so it is wider than [Wilson]; prefer it when a guarantee is
// needed (tiny n, safety claims).
//
// Edge cases: at x = 0 or x = n the open end uses α/2 like the other end
// (the usual convention; some texts use α there). For n = 0 it returns
// [0, 1]. It panics if n < 0, successes is outside [0, n], or level is
// outside (0, 1).
func ClopperPearson(successes, n int, level float64) Interval {
	checkBinomial("ClopperPearson", successes, n)
	checkLevel("ClopperPearson", "level", level)
	iv := Interval{Lo: 0, Hi: 1, Level: level, Method: MethodClopperPearson}
	if n == 0 {
		return iv
	}
	alpha := 1 - level
	x, nf := float64(successes), float64(n)
	if successes > 0 {
		iv.Lo = distuv.Beta{Alpha: x, Beta: nf - x + 1}.Quantile(alpha / 2)
	}
	if successes < n {
		iv.Hi = distuv.Beta{Alpha: x + 1, Beta: nf - x}.Quantile(1 - alpha/2)
	}
	return iv
}

// zQuantile returns Φ⁻¹(1 − (1−level)/2), the two-sided standard normal
// critical value.
func zQuantile(fn string, level float64) float64 {
	checkLevel(fn, "level", level)
	return distuv.UnitNormal.Quantile(1 - (1-level)/2)
}

func checkLevel(fn, name string, v float64) {
	if !(v > 0 && v < 1) {
		panic(fmt.Sprintf("stats: %s: %s %v outside (0, 1)", fn, name, v))
	}
}

func checkBinomial(fn string, successes, n int) {
	if n < 0 || successes < 0 || successes > n {
		panic(fmt.Sprintf("stats: %s: invalid counts successes=%d n=%d", fn, successes, n))
	}
}

func checkLen(fn string, a, b int) {
	if a != b {
		panic(fmt.Sprintf("stats: %s: length mismatch %d != %d", fn, a, b))
	}
}
