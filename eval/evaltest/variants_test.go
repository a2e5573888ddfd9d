package evaltest_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/evaltest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
)

// TestGateHoldsPerVariant: the gate of a run of variants is each
// variant's, on its own records: a weak variant fails it however strong
// another is, and the message names it. Check of such a report panicked
// on a nil WorstCase before, a report of variants having no pooled one.
func TestGateHoldsPerVariant(t *testing.T) {
	t.Parallel()
	var recs []sink.Record
	for i := range 60 {
		for _, v := range []string{"strong", "weak"} {
			r := sink.Record{Schema: 1, RunID: "r", Eval: "e", Variant: v, SampleID: fmt.Sprintf("s%d", i), Status: sink.Pass, Score: 1}
			if v == "weak" && i%2 == 0 || v == "strong" && i%20 == 0 {
				r.Status, r.Score = sink.Fail, 0
			}
			recs = append(recs, r)
		}
	}
	rep, err := report.FromRecords(func(yield func(sink.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}, nil)
	require.NoError(t, err)
	rec := &recorder{TB: t}
	evaltest.Check(rec, rep, evaltest.Gate{MinLowerBound: 0.8})
	require.Len(t, rec.errors, 1)
	require.Contains(t, rec.errors[0], "variant weak: pass rate 50.0%")
	require.NotContains(t, rec.errors[0], "variant strong:")
	require.Contains(t, rec.errors[0], "variant weak  s0 epoch 0: fail")

	rec = &recorder{TB: t}
	evaltest.Check(rec, rep, evaltest.Gate{MinLowerBound: 0.3})
	require.Empty(t, rec.errors)
}
