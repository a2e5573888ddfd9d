package report_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/report"
)

// TestCompareDecidesOnTheWorstCase: a head that passes every sample it
// scored but errored on 8 of 40, against a base that passed 36 of 40,
// looks non-inferior on the samples both scored and is not in the worst
// case (its errors as failures); excluding errors decides on the former.
func TestCompareDecidesOnTheWorstCase(t *testing.T) {
	t.Parallel()
	var base, head []outcomes
	for i := range 40 {
		id := fmt.Sprintf("s%02d", i)
		b, h := "P", "P"
		if i%10 == 9 {
			b = "F"
		}
		if i%5 == 0 {
			h = "E"
		}
		base, head = append(base, outcomes{id: id, eps: b}), append(head, outcomes{id: id, eps: h})
	}
	c := report.Compare(synthetic(t, "demo", "b", base), synthetic(t, "demo", "h", head), &report.CompareOptions{Margin: 0.05})
	require.True(t, c.NonInferior, "on the 32 samples both scored the head is better")
	require.NotNil(t, c.WorstCase)
	require.Equal(t, 40, c.WorstCase.PassRate.N)
	require.InDelta(t, 0.9, c.WorstCase.PassRate.MeanA, 1e-12)
	require.InDelta(t, 0.8, c.WorstCase.PassRate.MeanB, 1e-12)
	require.False(t, c.WorstCase.NonInferior)
	nonInferior, _ := c.Decision(false)
	require.False(t, nonInferior, "a gate decides on the worst case")
	nonInferior, _ = c.Decision(true)
	require.True(t, nonInferior, "unless told to exclude errors")
	require.Contains(t, c.String(), "verdict: worst case (the head's errored and unscored episodes as failures, the base's as passes): 90.0% → 80.0%")

	// Without errors on either side there is no worst case, and the
	// decision is the comparison's.
	c = report.Compare(synthetic(t, "demo", "b", base), synthetic(t, "demo", "b2", base), nil)
	require.Nil(t, c.WorstCase)
	nonInferior, regressed := c.Decision(false)
	require.Equal(t, [2]bool{c.NonInferior, c.Regressed}, [2]bool{nonInferior, regressed})
}
