package stats_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/proctor-evals/proctor/stats"
)

// Reference values: computed by hand as R's p.adjust(p, method = "holm")
// defines them; the first case: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 is 0.02, 0.03,
// 0.06, 0.04, made monotone 0.02, 0.03, 0.06, 0.06, then put back in input
// order.
func TestHolm(t *testing.T) {
	t.Parallel()
	nan := math.NaN()
	tests := []struct {
		name string
		in   []float64
		want []float64
	}{
		{"hand example", []float64{0.01, 0.04, 0.03, 0.005}, []float64{0.03, 0.06, 0.06, 0.02}},
		{"capped at 1", []float64{0.5, 0.6}, []float64{1, 1}},
		{"single", []float64{0.2}, []float64{0.2}},
		{"empty", []float64{}, []float64{}},
		{"ties", []float64{0.01, 0.01, 0.5}, []float64{0.03, 0.03, 0.5}},
		// 8·0.001, 7·0.008, 6·0.039 = 0.234, and the running maximum keeps 0.234
		// above 5·0.041, 4·0.042, 3·0.06, 2·0.074, 0.205.
		{"running maximum", []float64{0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205}, []float64{0.008, 0.056, 0.234, 0.234, 0.234, 0.234, 0.234, 0.234}},
		{"NaN not counted", []float64{0.01, nan, 0.04}, []float64{0.02, nan, 0.04}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := append([]float64(nil), tc.in...)
			got := stats.Holm(tc.in)
			assert.Len(t, got, len(tc.want))
			for i := range tc.want {
				assertFloat(t, tc.want[i], got[i], 1e-12, i)
			}
			assert.Equal(t, len(in), len(tc.in))
			for i := range in {
				assertFloat(t, in[i], tc.in[i], 0, "input unchanged")
			}
		})
	}
	assert.Panics(t, func() { stats.Holm([]float64{0.5, 1.5}) })
	assert.Panics(t, func() { stats.Holm([]float64{-0.1}) })
}
