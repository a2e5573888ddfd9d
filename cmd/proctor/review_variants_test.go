package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// TestReviewOfVariants is the command line's path on a log of two
// variants with the same samples and epochs (a's episodes pass, b's
// fail, for the judge and for people): pick splits the count between the
// variants, export and import carry each row's variant, report gives each
// variant its own rates and pools none, and a row that names no variant
// is refused, naming the log's variants.
func TestReviewOfVariants(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	for i := range 50 {
		for _, v := range []string{"a", "b"} {
			st := map[string]sink.Status{"a": sink.Pass, "b": sink.Fail}[v]
			require.NoError(t, w.Write(context.Background(), sink.Record{Schema: sink.SchemaVersion, RunID: "run1", Eval: "ev", Variant: v, SampleID: fmt.Sprintf("s%02d", i),
				Status: st, Input: json.RawMessage(`{}`), Output: json.RawMessage(`"out"`), StartedAt: time.Unix(0, 0).UTC()}))
		}
	}
	require.NoError(t, w.Close(context.Background()))

	code, out, errOut := cli("review", "pick", "-count", "20", log)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "picked 20 of 100 episodes")
	assert.Contains(t, out, "variant a: 10 of 50")
	assert.Contains(t, out, "variant b: 10 of 50")

	csvPath := filepath.Join(dir, "queue.csv")
	code, _, errOut = cli("review", "export", "-o", csvPath, log)
	require.Equal(t, 0, code, errOut)
	f, err := os.Open(csvPath)
	require.NoError(t, err)
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	require.NoError(t, err)
	require.Len(t, rows, 21)
	pass, variant := slices.Index(rows[0], "pass"), slices.Index(rows[0], "variant")
	require.GreaterOrEqual(t, variant, 0)
	for _, r := range rows[1:] {
		r[pass] = fmt.Sprint(r[variant] == "a")
	}
	write := func(name string, rows [][]string) string {
		p := filepath.Join(dir, name)
		gf, err := os.Create(p)
		require.NoError(t, err)
		require.NoError(t, csv.NewWriter(gf).WriteAll(rows))
		require.NoError(t, gf.Close())
		return p
	}
	// Without its variant, a row is of no episode of this log.
	noVariant := slices.Clone(rows[:2])
	noVariant[1] = slices.Clone(noVariant[1])
	noVariant[1][variant] = ""
	code, _, errOut = cli("review", "import", "-reviewer", "ana", log, write("novariant.csv", noVariant))
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "names no variant")
	assert.Contains(t, errOut, "(a, b)")

	code, out, errOut = cli("review", "import", "-reviewer", "ana", log, write("graded.csv", rows))
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "imported 20 reviews")

	code, out, errOut = cli("review", "report", "-json", log)
	require.Equal(t, 0, code, errOut)
	var s review.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	assert.Equal(t, 20, s.Reviewed)
	assert.Contains(t, out, `"mean": null`, "no pooled rate")
	require.Len(t, s.Variants, 2)
	for i, want := range []float64{1, 0} {
		assert.Equal(t, 10, s.Variants[i].Reviewed)
		assert.Equal(t, want, s.Variants[i].PPI.Mean)
	}

	code, out, errOut = cli("review", "report", log)
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{"2 variants, not pooled", "variant a: 10 of 50 episodes picked, 10 reviewed", "variant b: 10 of 50 episodes picked, 10 reviewed"} {
		assert.Contains(t, out, want)
	}
	assert.Equal(t, 2, strings.Count(out, "prediction-powered   "), "one rate per variant:\n%s", out)

	_, out, errOut = cli("report", log)
	assert.Contains(t, out, "human review: prediction-powered pass rates, per variant: a 1.000 [1.000, 1.000] from 10 reviewed; b 0.000 [0.000, 0.000] from 10 reviewed", errOut)
}
