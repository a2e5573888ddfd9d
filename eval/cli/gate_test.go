package cli

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
)

// TestGateOfVariants: -min-lower-bound of a run of variants holds for
// each variant: it fails on the lowest, named, with that variant's
// headline.
func TestGateOfVariants(t *testing.T) {
	t.Parallel()
	rep, err := report.FromRecords(func(yield func(sink.Record, error) bool) {
		for i := range 60 {
			for _, v := range []string{"strong", "weak"} {
				r := sink.Record{Schema: 1, RunID: "r", Eval: "e", Variant: v, SampleID: fmt.Sprintf("s%d", i), Status: sink.Pass, Score: 1}
				if v == "weak" && i%2 == 0 {
					r.Status, r.Score = sink.Fail, 0
				}
				if !yield(r, nil) {
					return
				}
			}
		}
	}, nil)
	require.NoError(t, err)
	var stderr bytes.Buffer
	require.False(t, (&gate{minLowerBound: 0.8}).check(&stderr, rep))
	require.Contains(t, stderr.String(), "variant weak's lower bound")
	require.Contains(t, stderr.String(), "pass rate 50.0%")
	stderr.Reset()
	require.True(t, (&gate{minLowerBound: 0.3}).check(&stderr, rep), stderr.String())
}
