package catalog_test

import (
	"fmt"
	"math"
	"os"
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

// writeRun writes a finished log of n samples, of which pass pass, tagged
// by parity, started at start, with its manifest.
func writeRun(t testing.TB, path, eval, runID string, start time.Time, n, pass int, harness string) {
	t.Helper()
	w, err := jsonl.Create(path, nil)
	require.NoError(t, err)
	for i := range n {
		r := sink.Record{Schema: sink.SchemaVersion, RunID: runID, Eval: eval, SampleID: "s" + strconv.Itoa(i),
			Status: sink.Fail, Tags: map[string]string{"parity": []string{"even", "odd"}[i%2]},
			StartedAt: start.Add(time.Duration(i) * time.Second), DurationMS: 1500,
			InputTokens: 100, OutputTokens: 10, CostUSD: 0.001}
		if i < pass {
			r.Status, r.Score = sink.Pass, 1
		}
		require.NoError(t, w.Write(t.Context(), r))
	}
	require.NoError(t, w.Close(t.Context()))
	require.NoError(t, manifest.Write(path, &manifest.Manifest{Schema: manifest.Schema, RunID: runID, Eval: eval,
		CreatedAt: start, Epochs: 1, Seed: "1", Versions: manifest.Versions{Harness: harness, Judge: "j1"},
		Dataset: manifest.DatasetIdentity{Samples: n, Hash: "sum:abc"}}))
}

var day0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func TestUpdateCatalogsEachRunAndTag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRun(t, filepath.Join(dir, "a1.jsonl"), "capitals", "r1", day0, 40, 30, "h1")
	writeRun(t, filepath.Join(dir, "a2.jsonl"), "capitals", "r2", day0.Add(24*time.Hour), 40, 20, "h2")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "nightly"), 0o755))
	writeRun(t, filepath.Join(dir, "nightly", "b.jsonl"), "math", "r3", day0, 10, 10, "h1")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data.jsonl"), []byte(`{"id":"x","input":1}`+"\n"), 0o644)) // a dataset, not a log

	res, err := catalog.Update(dir)
	require.NoError(t, err)
	require.Empty(t, res.Errors)
	require.Equal(t, 3, res.Read)
	require.Len(t, res.Runs, 3)

	got, err := catalog.Read(dir)
	require.NoError(t, err)
	require.Len(t, got, 3)
	// The row holds what the report of the log says.
	for _, r := range got {
		run, rep, err := history.Read(r.Log, nil)
		require.NoError(t, err)
		want := *run
		require.Equal(t, rep.Episodes, r.Episodes)
		requireSameRun(t, &want, r)
	}
	a1 := got[0]
	require.Equal(t, "capitals", a1.Eval)
	require.Equal(t, "r1", a1.RunID)
	require.Equal(t, filepath.Join(dir, "a1.jsonl"), a1.Log)
	require.Equal(t, 30, a1.Passed)
	require.Equal(t, 10, a1.Failed)
	require.InDelta(t, 0.75, a1.PassRate, 1e-12)
	require.Equal(t, day0, a1.Start)
	require.Equal(t, 39*time.Second+1500*time.Millisecond, a1.Wall)
	require.Equal(t, "h1", a1.HarnessVersion)
	require.Equal(t, "sum:abc", a1.DatasetHash)
	require.Equal(t, int64(4000), a1.InputTokens)
	require.InDelta(t, 0.04, a1.CostUSD, 1e-9)
	require.Len(t, a1.Tags, 2)
	require.Equal(t, "parity", a1.Tags[0].Tag)
	require.Equal(t, "even", a1.Tags[0].Value)
	require.Equal(t, 20, a1.Tags[0].Episodes)
	require.Equal(t, "h2", got[1].HarnessVersion)
	require.Equal(t, "math", got[2].Eval)
	require.Equal(t, filepath.Join(dir, "nightly", "b.jsonl"), got[2].Log)
}

func requireSameRun(t *testing.T, want, got *history.Run) {
	t.Helper()
	nan := func(f float64) float64 {
		if math.IsNaN(f) {
			return -1
		}
		return f
	}
	for _, f := range []struct {
		name string
		a, b float64
	}{{"pass rate", want.PassRate, got.PassRate}, {"lo", want.Lo, got.Lo}, {"hi", want.Hi, got.Hi},
		{"mean score", want.MeanScore, got.MeanScore}, {"p50", want.LatencyP50MS, got.LatencyP50MS}} {
		require.InDelta(t, nan(f.a), nan(f.b), 1e-12, f.name)
	}
	require.Equal(t, want.Method, got.Method)
	require.Equal(t, want.Samples, got.Samples)
	require.Equal(t, want.Start, got.Start)
	require.Equal(t, want.Wall, got.Wall)
	require.Equal(t, len(want.Tags), len(got.Tags))
}

// TestUpdateReadsOnlyNewAndChangedLogs: an unchanged log (same size and
// times) is not read again, even when its bytes are no longer a log; an
// appended one and a new one are.
func TestUpdateReadsOnlyNewAndChangedLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old, grown := filepath.Join(dir, "old.jsonl"), filepath.Join(dir, "grown.jsonl")
	writeRun(t, old, "e", "r1", day0, 10, 5, "h1")
	writeRun(t, grown, "e", "r2", day0.Add(time.Hour), 10, 5, "h1")
	res, err := catalog.Update(dir)
	require.NoError(t, err)
	require.Equal(t, 2, res.Read)

	// Garble the old log behind the catalog's back, same size, same time:
	// an update that read it would fail on it.
	fi, err := os.Stat(old)
	require.NoError(t, err)
	garbage := make([]byte, fi.Size())
	for i := range garbage {
		garbage[i] = 'x'
	}
	require.NoError(t, os.WriteFile(old, garbage, 0o644))
	require.NoError(t, os.Chtimes(old, fi.ModTime(), fi.ModTime()))

	w, err := jsonl.Append(grown, nil)
	require.NoError(t, err)
	require.NoError(t, w.Write(t.Context(), sink.Record{Schema: 1, RunID: "r2", Eval: "e", SampleID: "s10", Status: sink.Pass, Score: 1, StartedAt: day0.Add(2 * time.Hour)}))
	require.NoError(t, w.Close(t.Context()))
	writeRun(t, filepath.Join(dir, "new.jsonl"), "e", "r3", day0.Add(3*time.Hour), 10, 9, "h1")

	res, err = catalog.Update(dir)
	require.NoError(t, err)
	require.Empty(t, res.Errors)
	require.Equal(t, 2, res.Read, "the grown log and the new one")
	require.Equal(t, 1, res.Kept, "the old log, unread")
	require.Len(t, res.Runs, 3)
	require.Equal(t, 5, res.Runs[0].Passed, "the old log's row, from before it was garbled")
	require.Equal(t, 11, res.Runs[1].Episodes, "the grown log's row is replaced")

	res, err = catalog.Update(dir)
	require.NoError(t, err)
	require.Equal(t, 0, res.Read)
	require.Equal(t, 3, res.Kept)
}

// TestUpdateSkipsALogBeingWritten: a locked log gets no row until its
// writer closes it; a removed log keeps its row.
func TestUpdateSkipsALogBeingWrittenAndKeepsRemovedRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	done := filepath.Join(dir, "done.jsonl")
	writeRun(t, done, "e", "r1", day0, 10, 5, "h1")
	live := filepath.Join(dir, "live.jsonl")
	w, err := jsonl.Create(live, nil)
	require.NoError(t, err)
	require.NoError(t, w.Write(t.Context(), sink.Record{Schema: 1, RunID: "r2", Eval: "e", SampleID: "s0", Status: sink.Pass, Score: 1, StartedAt: day0.Add(time.Hour)}))
	require.NoError(t, w.Flush())

	res, err := catalog.Update(dir)
	require.NoError(t, err)
	require.Equal(t, []string{live}, res.Busy)
	require.Len(t, res.Runs, 1)

	require.NoError(t, w.Close(t.Context()))
	res, err = catalog.Update(dir)
	require.NoError(t, err)
	require.Empty(t, res.Busy)
	require.Len(t, res.Runs, 2)

	require.NoError(t, os.Remove(done))
	runs, err := catalog.Read(dir)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	res, err = catalog.Update(dir)
	require.NoError(t, err)
	require.Len(t, res.Runs, 2, "the catalog outlives the logs")
}

// TestUpdateNeverReplacesAFileThatIsNotACatalog.
func TestUpdateNeverReplacesAFileThatIsNotACatalog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRun(t, filepath.Join(dir, "a.jsonl"), "e", "r1", day0, 10, 5, "h1")
	require.NoError(t, os.Mkdir(filepath.Join(dir, catalog.Dir), 0o755))
	mine := filepath.Join(dir, catalog.Dir, catalog.RunsFile)
	require.NoError(t, os.WriteFile(mine, []byte("my own notes"), 0o644))
	_, err := catalog.Update(dir)
	require.Error(t, err)
	require.Contains(t, err.Error(), "runs.parquet")
	b, err := os.ReadFile(mine)
	require.NoError(t, err)
	require.Equal(t, "my own notes", string(b))
}

// TestCatalogOfNoScoredEpisodes: undefined rates are null in the file and
// NaN when read back.
func TestCatalogOfNoScoredEpisodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := jsonl.Create(filepath.Join(dir, "err.jsonl"), nil)
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, w.Write(t.Context(), sink.Record{Schema: 1, RunID: "r", Eval: "e", SampleID: fmt.Sprint(i), Status: sink.Error, ErrorKind: sink.KindTimeout, StartedAt: day0}))
	}
	require.NoError(t, w.Close(t.Context()))
	res, err := catalog.Update(dir)
	require.NoError(t, err)
	require.Len(t, res.Runs, 1)
	runs, err := catalog.Read(dir)
	require.NoError(t, err)
	require.True(t, math.IsNaN(runs[0].PassRate))
	require.True(t, math.IsNaN(runs[0].Lo))
	require.Equal(t, 3, runs[0].Errored)
}

// TestCatalogSplitsCostByRole: records carry the judge's usage, yet the
// catalog had only the totals. Now runs.parquet has judge_input_tokens,
// judge_output_tokens and judge_cost_usd beside them (the agent's part is
// the rest).
func TestCatalogSplitsCostByRole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := jsonl.Create(filepath.Join(dir, "run.jsonl"), nil)
	require.NoError(t, err)
	for i := range 4 {
		require.NoError(t, w.Write(t.Context(), sink.Record{Schema: sink.SchemaVersion, RunID: "r", Eval: "e", SampleID: strconv.Itoa(i),
			Status: sink.Pass, Score: 1, StartedAt: day0, InputTokens: 100, OutputTokens: 10, CostUSD: 0.25,
			JudgeInputTokens: 40, JudgeOutputTokens: 2, JudgeCostUSD: 0.05, JudgeModel: "grader",
			SimulatorInputTokens: 30, SimulatorOutputTokens: 3, SimulatorCostUSD: 0.025, SimulatorModel: "user"}))
	}
	require.NoError(t, w.Close(t.Context()))
	_, err = catalog.Update(dir)
	require.NoError(t, err)
	got, err := catalog.Read(dir)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.EqualValues(t, 400, got[0].InputTokens)
	require.EqualValues(t, 160, got[0].JudgeInputTokens)
	require.EqualValues(t, 8, got[0].JudgeOutputTokens)
	require.InDelta(t, 1.0, got[0].CostUSD, 1e-9)
	require.InDelta(t, 0.2, got[0].JudgeCostUSD, 1e-9)
	require.EqualValues(t, 120, got[0].SimulatorInputTokens, "a simulated user's part (schema 3)")
	require.EqualValues(t, 12, got[0].SimulatorOutputTokens)
	require.InDelta(t, 0.1, got[0].SimulatorCostUSD, 1e-9)
}

// TestCatalogKeepsTheEpisodesResources: a row has the distinct sandbox
// resources its log's records name (episode_resources), for a drift read
// from the catalog to name their change.
func TestCatalogKeepsTheEpisodesResources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "a.jsonl")
	w, err := jsonl.Create(path, nil)
	require.NoError(t, err)
	for i, res := range []string{"memory=1073741824", "memory=2147483648", "memory=1073741824"} {
		require.NoError(t, w.Write(t.Context(), sink.Record{Schema: sink.SchemaVersion, RunID: "r", Eval: "e", SampleID: strconv.Itoa(i),
			Status: sink.Pass, Score: 1, StartedAt: day0, Resources: res}))
	}
	require.NoError(t, w.Close(t.Context()))
	_, err = catalog.Update(dir)
	require.NoError(t, err)
	got, err := catalog.Read(dir)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "memory=1073741824; memory=2147483648", got[0].EpisodeResources)
}
