package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// writeLog writes a log of 40 samples, one epoch, whose outcome is
// status(i).
func writeLog(t *testing.T, path, runID string, status func(i int) sink.Status) {
	t.Helper()
	w, err := jsonl.Create(path, nil)
	require.NoError(t, err)
	for i := range 40 {
		r := sink.Record{Schema: 1, RunID: runID, Eval: "cli", SampleID: fmt.Sprintf("s%02d", i), Status: status(i)}
		if r.Status == sink.Error {
			r.ErrorKind, r.ErrorSource, r.Error = sink.KindJudge, "judge/cascade.expensive/rubric", "openai: HTTP 503"
		}
		require.NoError(t, w.Write(context.Background(), r))
	}
	require.NoError(t, w.Close(context.Background()))
}

// TestCompareFailsOnTheWorstCase: a head whose grader was down on 8 of
// 40 samples passes every sample it scored; -fail-on-regression decides
// on the worst case (its errors as failures) and exits 3, and
// -exclude-errors decides on the samples both runs scored and exits 0.
func TestCompareFailsOnTheWorstCase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, head := filepath.Join(dir, "base.jsonl"), filepath.Join(dir, "head.jsonl")
	writeLog(t, base, "b", func(i int) sink.Status {
		if i%10 == 9 {
			return sink.Fail
		}
		return sink.Pass
	})
	writeLog(t, head, "h", func(i int) sink.Status {
		if i%5 == 0 {
			return sink.Error
		}
		return sink.Pass
	})
	code, out, errs := cli("compare", "-fail-on-regression", "-margin", "0.05", base, head)
	require.Equal(t, exitRegression, code, out+errs)
	require.Contains(t, out, "worst case")
	code, out, errs = cli("compare", "-fail-on-regression", "-exclude-errors", "-margin", "0.05", base, head)
	require.Zero(t, code, out+errs)

	code, out, errs = cli("report", head)
	require.Equal(t, exitError, code, "20%% without a verdict is over -max-no-verdict")
	require.Contains(t, errs, "over -max-no-verdict")
	require.Contains(t, out, "pass rate 100.0% [89.3%, 100.0%] of scored episodes — 8 errored of 40: between 80.0% [")
	require.Contains(t, out, "judge/cascade.expensive/rubric")
}
