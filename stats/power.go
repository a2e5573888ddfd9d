package stats

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// SampleSize returns the number of samples needed for a paired comparison
// (see [Paired]) to detect a true mean difference of effect with the given
// power in a two-sided test at significance alpha, when per-sample
// differences have standard deviation sdDiff:
//
//	n = ⌈((z_{1−α/2} + z_{power}) · sdDiff / effect)²⌉
//
// with z_q the standard normal q-quantile (normal approximation; a t-test
// needs one or two samples more when n is small). The sign of effect is
// ignored. sdDiff is the standard deviation of d_i = b_i − a_i, the
// difference of the two runs' per-sample scores: build it from the two runs'
// standard deviations and their correlation with [PairedSD], and fold in
// epochs with [EffectiveSD]. Reference: Miller (2024), arXiv:2411.00640,
// "Power analysis"; J. Cohen, "Statistical Power Analysis for the
// Behavioral Sciences", 2nd ed. (1988), ch. 2.
//
// The result is at least 2, the fewest pairs with a standard error. It
// panics if alpha or power is outside (0, 1), effect is zero or not finite,
// or sdDiff is negative or not finite.
func SampleSize(effect, sdDiff, alpha, power float64) int {
	checkLevel("SampleSize", "alpha", alpha)
	checkLevel("SampleSize", "power", power)
	if effect == 0 || math.IsNaN(effect) || math.IsInf(effect, 0) {
		panic(fmt.Sprintf("stats: SampleSize: effect %v must be finite and non-zero", effect))
	}
	checkSD("SampleSize", "sdDiff", sdDiff)
	x := (zTwoSided(alpha) + distuv.UnitNormal.Quantile(power)) * sdDiff / effect
	// The tolerance keeps an exact integer from rounding up on float noise.
	n := math.Ceil(x*x - 1e-9)
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return max(2, int(n))
}

// MinDetectableEffect returns the smallest true mean difference that a
// paired comparison over n samples detects with the given power in a
// two-sided test at significance alpha, when per-sample differences have
// standard deviation sdDiff; it inverts [SampleSize]:
//
//	MDE = (z_{1−α/2} + z_{power}) · sdDiff / √n
//
// Reference: as for [SampleSize]. For example, at α = 0.05 and power 0.8
// the multiplier is 2.80, so with sdDiff = 0.3 and 1,000 samples the MDE is
// 2.8·0.3/√1000 ≈ 0.027, under three points. It panics if n < 1, alpha or
// power is outside (0, 1), or sdDiff is negative or not finite.
func MinDetectableEffect(n int, sdDiff, alpha, power float64) float64 {
	if n < 1 {
		panic(fmt.Sprintf("stats: MinDetectableEffect: n %d < 1", n))
	}
	checkLevel("MinDetectableEffect", "alpha", alpha)
	checkLevel("MinDetectableEffect", "power", power)
	checkSD("MinDetectableEffect", "sdDiff", sdDiff)
	return (zTwoSided(alpha) + distuv.UnitNormal.Quantile(power)) * sdDiff / math.Sqrt(float64(n))
}

// EffectiveSD returns the standard deviation of a sample's mean score over
// epochs independent epochs:
//
//	√(sdBetween² + sdWithin²/epochs)
//
// sdBetween is the standard deviation, across samples, of a sample's true
// (infinite-epoch) mean; sdWithin is the standard deviation of one epoch's
// score around its sample's true mean, pooled over samples. For a paired
// comparison pass the standard deviations of the differences: sdBetween of
// the true per-sample differences, and sdWithin of one epoch's difference
// (for independent runs, √(σ²_within,a + σ²_within,b)). More epochs shrink
// only the within-sample part, which is why adding samples beats adding
// epochs once sdWithin²/epochs is small next to sdBetween². For 0/1 scores
// with per-sample pass probability p_i, sdWithin² = mean(p_i(1−p_i)) and
// sdBetween² = Var(p_i). Reference: Miller (2024), arXiv:2411.00640,
// "Resampling" (Var = σ²_between +
// σ²_within/K).
//
// It panics if epochs < 1 or either standard deviation is negative or not
// finite.
func EffectiveSD(sdBetween, sdWithin float64, epochs int) float64 {
	if epochs < 1 {
		panic(fmt.Sprintf("stats: EffectiveSD: epochs %d < 1", epochs))
	}
	checkSD("EffectiveSD", "sdBetween", sdBetween)
	checkSD("EffectiveSD", "sdWithin", sdWithin)
	return math.Sqrt(sdBetween*sdBetween + sdWithin*sdWithin/float64(epochs))
}

// PairedSD returns the standard deviation of the difference b − a of two
// scores with standard deviations sdA and sdB and correlation rho:
//
//	√(sdA² + sdB² − 2·rho·sdA·sdB)
//
// For 0/1 scores with pass rates pA and pB, sdA = √(pA(1−pA)). With rho = 0
// (unpaired) two runs at 70% give 0.65; at the rho ≈ 0.5 typical of two
// versions of one agent it drops to 0.46, halving the samples [SampleSize]
// asks for. Reference: Miller (2024), arXiv:2411.00640, "Paired differences". It
// panics if rho is outside [−1, 1] or a standard deviation is negative or
// not finite.
func PairedSD(sdA, sdB, rho float64) float64 {
	checkSD("PairedSD", "sdA", sdA)
	checkSD("PairedSD", "sdB", sdB)
	if !(rho >= -1 && rho <= 1) {
		panic(fmt.Sprintf("stats: PairedSD: rho %v outside [-1, 1]", rho))
	}
	return math.Sqrt(math.Max(0, sdA*sdA+sdB*sdB-2*rho*sdA*sdB))
}

// zTwoSided returns z_{1−α/2}.
func zTwoSided(alpha float64) float64 {
	return distuv.UnitNormal.Quantile(1 - alpha/2)
}

func checkSD(fn, name string, v float64) {
	if !(v >= 0) || math.IsInf(v, 0) {
		panic(fmt.Sprintf("stats: %s: %s %v must be finite and non-negative", fn, name, v))
	}
}
