package catalog_test

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/history"
	"github.com/proctor-evals/proctor/history/catalog"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// writeMatrix writes a finished log of two variants over n samples: a
// passes passA of them, b passB, each variant at its own harness version.
func writeMatrix(t testing.TB, path, runID string, start time.Time, n, passA, passB int, versionB string) {
	t.Helper()
	w, err := jsonl.Create(path, nil)
	require.NoError(t, err)
	for _, v := range []struct {
		name string
		pass int
	}{{"a", passA}, {"b", passB}} {
		for i := range n {
			r := sink.Record{Schema: sink.SchemaVersion, RunID: runID, Eval: "matrix", Variant: v.name, SampleID: "s" + strconv.Itoa(i),
				Status: sink.Fail, Tags: map[string]string{"parity": []string{"even", "odd"}[i%2]},
				StartedAt: start.Add(time.Duration(i) * time.Second), DurationMS: 1000}
			if i < v.pass {
				r.Status, r.Score = sink.Pass, 1
			}
			require.NoError(t, w.Write(t.Context(), r))
		}
	}
	require.NoError(t, w.Close(t.Context()))
	require.NoError(t, manifest.Write(path, &manifest.Manifest{Schema: manifest.Schema, RunID: runID, Eval: "matrix",
		CreatedAt: start, Epochs: 1, Seed: "1", Versions: manifest.Versions{Judge: "j1"},
		Variants: []manifest.Variant{{Name: "a", Harness: "a1"}, {Name: "b", Harness: versionB}},
		Dataset:  manifest.DatasetIdentity{Samples: n, Hash: "sum:abc"}}))
}

// TestEachVariantIsItsOwnTrend: a log of an eval's variants is a row per
// variant in the catalog (its records alone, its harness version), each
// variant a trend of its own, compared for drift with its own earlier
// run.
func TestEachVariantIsItsOwnTrend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeMatrix(t, filepath.Join(dir, "m1.jsonl"), "r1", day0, 40, 30, 10, "b1")
	writeMatrix(t, filepath.Join(dir, "m2.jsonl"), "r2", day0.Add(24*time.Hour), 40, 30, 2, "b2")

	res, err := catalog.Update(dir)
	require.NoError(t, err)
	require.Empty(t, res.Errors)
	got, err := catalog.Read(dir)
	require.NoError(t, err)
	require.Len(t, got, 4, "a row per run × variant")

	series := map[string][]*history.Run{}
	for name, runs := range history.Evals(history.Group(got)) {
		series[name] = runs
	}
	require.Len(t, series, 2)
	a, b := series["matrix a"], series["matrix b"]
	require.Len(t, a, 2)
	require.Len(t, b, 2)
	require.Equal(t, 30, a[0].Passed)
	require.Equal(t, 40, a[0].Episodes, "a's row holds a's records alone")
	require.Equal(t, 10, b[0].Passed)
	require.Equal(t, 2, b[1].Passed)
	require.Equal(t, "a1", a[1].HarnessVersion)
	require.Equal(t, []string{"harness"}, history.Changes(b[0], b[1]), "b's version changed, a's did not")
	require.Empty(t, history.Changes(a[0], a[1]))
	require.Len(t, b[0].Tags, 2)
	require.Equal(t, 20, b[0].Tags[0].Episodes)

	// Drift compares a variant with its own baseline: a held, b dropped.
	da, err := history.CompareLogs(a[0], a[1], 0.05)
	require.NoError(t, err)
	require.Empty(t, da.Significant())
	db, err := history.CompareLogs(b[0], b[1], 0.05)
	require.NoError(t, err)
	require.NotEmpty(t, db.Significant(), "b's drop from 10 to 2 of 40 passes")
	require.Greater(t, len(db.Tests), 1, "drift tests b's tags too: its own report, not the pooled one")
}
