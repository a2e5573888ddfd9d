package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// writeVariantsLog writes a log of variants a and b over 40 samples, two
// epochs, and the same variants as two separate logs.
func writeVariantsLog(t *testing.T, dir string) (both, onlyA, onlyB string) {
	t.Helper()
	both, onlyA, onlyB = filepath.Join(dir, "run.jsonl"), filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	ws := map[string]*jsonl.Writer{}
	for _, p := range []string{both, onlyA, onlyB} {
		w, err := jsonl.Create(p, nil)
		require.NoError(t, err)
		ws[p] = w
	}
	ctx := context.Background()
	for i := range 40 {
		for ep := range 2 {
			for _, v := range []string{"a", "b"} {
				pass := i%4 != 0
				if v == "b" {
					pass = i%2 == 0 || ep == 1
				}
				r := sink.Record{Schema: 1, RunID: "r", Eval: "cli", Variant: v, SampleID: fmt.Sprintf("s%02d", i), Epoch: ep, Status: sink.Fail, CostUSD: 0.01}
				if pass {
					r.Status, r.Score = sink.Pass, 1
				}
				require.NoError(t, ws[both].Write(ctx, r))
				r.Variant = ""
				require.NoError(t, ws[map[string]string{"a": onlyA, "b": onlyB}[v]].Write(ctx, r))
			}
		}
	}
	for _, w := range ws {
		require.NoError(t, w.Close(ctx))
	}
	return both, onlyA, onlyB
}

// TestCompareVariants: compare -variants a,b of one log gives the paired
// comparison compare gives of two logs holding each variant's records.
func TestCompareVariants(t *testing.T) {
	t.Parallel()
	both, onlyA, onlyB := writeVariantsLog(t, t.TempDir())
	code, out, errs := cli("compare", "-json", onlyA, onlyB)
	require.Zero(t, code, errs)
	var want report.Comparison
	require.NoError(t, json.Unmarshal([]byte(out), &want))
	code, out, errs = cli("compare", "-json", "-variants", "a,b", both)
	require.Zero(t, code, errs)
	var got report.Comparison
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, "a", got.BaseVariant)
	require.Equal(t, "b", got.HeadVariant)
	got.BaseVariant, got.HeadVariant = "", ""
	require.Equal(t, want, got)

	code, out, _ = cli("compare", "-variants", "a,b", both)
	require.Zero(t, code)
	require.Contains(t, out, "base run r variant a → head run r variant b")

	code, _, errs = cli("compare", "-variants", "a,c", both)
	require.Equal(t, exitError, code)
	require.Contains(t, errs, `no variant "c" in the log; it has`)
	code, _, errs = cli("compare", "-variants", "a,b", onlyA)
	require.Equal(t, exitError, code)
	require.Contains(t, errs, "the log has no variants")
	code, _, _ = cli("compare", "-variants", "a", both)
	require.Equal(t, exitUsage, code)

	// One variant of a log against another log: LOG#VARIANT.
	code, out, errs = cli("compare", "-json", onlyA, both+"#b")
	require.Zero(t, code, errs)
	var side report.Comparison
	require.NoError(t, json.Unmarshal([]byte(out), &side))
	require.Equal(t, "b", side.HeadVariant)
	side.HeadVariant = ""
	require.Equal(t, want, side)
	// A log of variants named whole is refused: pooled, they describe no agent.
	code, _, errs = cli("compare", onlyA, both)
	require.Equal(t, exitError, code)
	require.Contains(t, errs, "is a log of variants (a, b)")
	require.Contains(t, errs, "#VARIANT")
	code, _, errs = cli("compare", onlyA, onlyB+"#b")
	require.Equal(t, exitError, code)
	require.Contains(t, errs, "the log has no variants")
}

// TestReportOfVariants: proctor report of a log of variants prints the
// leaderboard and no pooled pass rate.
func TestReportOfVariants(t *testing.T) {
	t.Parallel()
	both, _, _ := writeVariantsLog(t, t.TempDir())
	code, out, errs := cli("report", both)
	require.Zero(t, code, errs)
	require.Contains(t, out, "2 variants, not pooled")
	require.Contains(t, out, "leaderboard")
	code, out, errs = cli("report", "-json", both)
	require.Zero(t, code, errs)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	require.Nil(t, m["pass_rate"])
	require.NotNil(t, m["leaderboard"])
}
