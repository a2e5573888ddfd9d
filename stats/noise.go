package stats

import "math"

// NoiseFloor is the run-to-run noise of a pass rate: how far apart two
// runs of the same agent on the same samples land by chance alone, from
// the spread of each sample's outcomes across its epochs. See
// docs/statistics.md, "The noise floor".
type NoiseFloor struct {
	Level float64 `json:"level"`
	// WithinVar is the pooled within-sample variance of an episode's
	// outcome (1 pass, 0 fail) across epochs: Σ k(m−k)/m over the
	// samples scored at least twice (k passes of m), over Σ (m−1).
	WithinVar float64 `json:"within_var"`
	// Samples is n, the samples the difference is over; EpochsA and
	// EpochsB the epochs each run averages per sample.
	Samples int     `json:"samples"`
	EpochsA float64 `json:"epochs_a"`
	EpochsB float64 `json:"epochs_b"`
	// HalfWidth is z·√(WithinVar/(n·EpochsA) + WithinVar/(n·EpochsB)):
	// the two runs' pass rates differ by less than this with probability
	// Level when the agent did not change. NaN when no sample was scored
	// twice (one epoch: nothing measures the noise).
	HalfWidth float64 `json:"half_width"`
}

// WithinVariance pools the within-sample variance of 0/1 outcomes across
// epochs: passes[i] of scored[i] for sample i. dof is Σ (m−1) over the
// samples scored at least twice; the variance is NaN when dof is 0.
func WithinVariance(passes, scored []int) (v float64, dof int) {
	var ss float64
	for i, m := range scored {
		if m < 2 {
			continue
		}
		k := float64(passes[i])
		ss += k * (float64(m) - k) / float64(m)
		dof += m - 1
	}
	if dof == 0 {
		return math.NaN(), 0
	}
	return ss / float64(dof), dof
}

// Noise is the noise floor of the difference between two runs of n
// samples averaging epochsA and epochsB epochs each, at level, from a
// pooled within-sample variance.
func Noise(withinVar float64, n int, epochsA, epochsB, level float64) NoiseFloor {
	nf := NoiseFloor{Level: level, WithinVar: withinVar, Samples: n, EpochsA: epochsA, EpochsB: epochsB, HalfWidth: math.NaN()}
	if n > 0 && epochsA > 0 && epochsB > 0 && !math.IsNaN(withinVar) {
		nf.HalfWidth = zQuantile("Noise", level) * math.Sqrt(withinVar/(float64(n)*epochsA)+withinVar/(float64(n)*epochsB))
	}
	return nf
}

// Within reports whether a difference lies inside the floor.
func (nf NoiseFloor) Within(diff float64) bool { return math.Abs(diff) <= nf.HalfWidth }
