package stats_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/proctor-evals/proctor/stats"
)

// Reference: at α = 0.05 two-sided and power 0.8, (z_{0.975} + z_{0.8})² =
// (1.959964 + 0.841621)² = 7.848880, the "n ≈ 7.85·(σ/δ)²" of standard
// power tables (e.g. Cohen 1988; Lehr's rule of thumb rounds it to 8).
func TestSampleSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		effect, sd, alpha, power float64
		want                     int
	}{
		{0.05, 0.5, 0.05, 0.8, 785},  // 7.84888·100 = 784.888
		{-0.05, 0.5, 0.05, 0.8, 785}, // sign ignored
		{0.1, 0.5, 0.05, 0.8, 197},   // 196.222
		{0.03, 0.3, 0.05, 0.8, 785},  // scale-free in sd/effect
		{0.05, 0.5, 0.05, 0.9, 1051}, // (1.959964 + 1.281552)² · 100 = 1050.742
		{0.05, 0.5, 0.01, 0.8, 1168}, // (2.575829 + 0.841621)² · 100 = 1167.897
		{1, 0.1, 0.05, 0.8, 2},       // floor of two pairs
		{0.05, 0, 0.05, 0.8, 2},      // no variance
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, stats.SampleSize(tc.effect, tc.sd, tc.alpha, tc.power), "%+v", tc)
	}
	assert.Panics(t, func() { stats.SampleSize(0, 0.5, 0.05, 0.8) })
	assert.Panics(t, func() { stats.SampleSize(0.1, -1, 0.05, 0.8) })
	assert.Panics(t, func() { stats.SampleSize(0.1, 0.5, 0, 0.8) })
	assert.Panics(t, func() { stats.SampleSize(0.1, 0.5, 0.05, 1) })
	assert.Panics(t, func() { stats.SampleSize(math.Inf(1), 0.5, 0.05, 0.8) })
}

// SampleSize and MinDetectableEffect invert each other: n samples detect
// the effect they were sized for, and n−1 do not.
func TestSampleSizeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, effect := range []float64{0.01, 0.02, 0.05, 0.1, 0.2} {
		for _, sd := range []float64{0.2, 0.45, 0.7} {
			for _, power := range []float64{0.5, 0.8, 0.9} {
				n := stats.SampleSize(effect, sd, 0.05, power)
				if n <= 2 {
					continue
				}
				assert.LessOrEqual(t, stats.MinDetectableEffect(n, sd, 0.05, power), effect*(1+1e-12))
				assert.Greater(t, stats.MinDetectableEffect(n-1, sd, 0.05, power), effect)
			}
		}
	}
	// Reference: 2.801585·0.3/√1000 = 0.026578.
	assert.InDelta(t, 0.026578, stats.MinDetectableEffect(1000, 0.3, 0.05, 0.8), 1e-6)
	assert.Panics(t, func() { stats.MinDetectableEffect(0, 0.3, 0.05, 0.8) })
}

func TestEffectiveSD(t *testing.T) {
	t.Parallel()
	assert.InDelta(t, math.Sqrt(0.09+0.16/4), stats.EffectiveSD(0.3, 0.4, 4), 1e-15)
	assert.InDelta(t, 0.5, stats.EffectiveSD(0.3, 0.4, 1), 1e-15)
	assert.InDelta(t, 0.3, stats.EffectiveSD(0.3, 0.4, 1<<40), 1e-6, "infinite epochs leave the between-sample part")
	assert.Panics(t, func() { stats.EffectiveSD(0.3, 0.4, 0) })
	assert.Panics(t, func() { stats.EffectiveSD(-0.3, 0.4, 1) })
}

// Two 70% runs: sd = √0.21 each; unpaired √0.42 = 0.648074, with ρ = 0.5
// √0.21 = 0.458258; ρ = 1 and equal sds: 0.
func TestPairedSD(t *testing.T) {
	t.Parallel()
	s := math.Sqrt(0.21)
	assert.InDelta(t, 0.648074, stats.PairedSD(s, s, 0), 1e-6)
	assert.InDelta(t, 0.458258, stats.PairedSD(s, s, 0.5), 1e-6)
	assert.InDelta(t, 0, stats.PairedSD(s, s, 1), 1e-12)
	assert.InDelta(t, 2*s, stats.PairedSD(s, s, -1), 1e-12)
	assert.Panics(t, func() { stats.PairedSD(s, s, 1.1) })
}
