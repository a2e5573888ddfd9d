package view_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/view"
)

// TestRunPageShowsBudgetAndProjectedCost: a run whose manifest says it
// has 150 episodes and a budget shows the budget and the total cost
// projected from the 90 recorded, as a range around the mean's
// projection; a log without a manifest shows neither.
func TestRunPageShowsBudgetAndProjectedCost(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	writeRun(t, log, 0.8, 1)
	var b strings.Builder
	require.NoError(t, view.WriteHTML(&b, log, nil))
	require.NotContains(t, b.String(), "projected cost", "no manifest: the run's size is unknown")

	require.NoError(t, manifest.Write(log, &manifest.Manifest{Schema: 1, RunID: "run-1", Eval: "arith", CreatedAt: time.Now().UTC(),
		Epochs: 5, Seed: "1", Dataset: manifest.DatasetIdentity{Samples: 30}, Budget: &manifest.Budget{CostUSD: 2.5, Tokens: 100000}}))
	var sum float64
	n := 0
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		sum += r.CostUSD
		n++
	}
	require.Equal(t, 90, n)
	b.Reset()
	require.NoError(t, view.WriteHTML(&b, log, nil))
	rows := pageRows(b.String())
	require.Contains(t, rows["budget"], "$2.50 or 100000 tokens a run")
	require.Contains(t, rows["budget"], fmt.Sprintf("the log holds $%.4f and 3870 tokens spent", sum))
	got := rows["projected cost"]
	require.Contains(t, got, "for the run's 150 episodes, 60 left")
	var lo, hi float64
	_, err := fmt.Sscanf(got, "$%f–$%f", &lo, &hi)
	require.NoError(t, err, got)
	mid := sum * 150 / 90
	require.Less(t, lo, mid)
	require.Greater(t, hi, mid)
	require.GreaterOrEqual(t, lo, sum)
}
