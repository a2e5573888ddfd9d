package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/review"
)

// TestGlobsOverARunsDirectory: docs/distributed.md's `proctor merge -o
// runs/run.jsonl runs/shard-*.jsonl` and `proctor report runs/*.jsonl`
// failed on the logs' transcript stores ("not a proctor log"): they are
// skipped, with a note.
func TestGlobsOverARunsDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runEval(t, filepath.Join(dir, "a.jsonl"), 4)
	runEval(t, filepath.Join(dir, "b.jsonl"), 2)
	glob, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	require.NoError(t, err)
	require.Len(t, glob, 4, "two logs and their transcript stores")

	code, out, errs := cli(append([]string{"report"}, glob...)...)
	require.Zero(t, code, errs)
	require.Equal(t, 2, strings.Count(out, "samples × epochs"), out)
	require.Contains(t, errs, "note: skipping "+filepath.Join(dir, "a.traces.jsonl")+", a file of the log "+filepath.Join(dir, "a.jsonl"))

	code, _, errs = cli("report", filepath.Join(dir, "a.traces.jsonl"))
	require.Equal(t, 2, code, "a transcript store alone is no log: %s", errs)
}

// TestMergeWarnsOnEveryConflict: two final results of one episode that
// differ in status or score: the first is kept, as documented, and each
// conflict is now said.
func TestMergeWarnsOnEveryConflict(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "shard-a.jsonl"), filepath.Join(dir, "shard-b.jsonl")
	runEval(t, a, 4) // s00, s04, … fail
	text, err := os.ReadFile(a)
	require.NoError(t, err)
	// The same run, with s00 epoch 0 passing and s01 epoch 0 failing.
	flip := regexp.MustCompile(`("sample_id":"s0[01]","epoch":0,"attempt":0,"status":)"(pass|fail)","score":[01]`)
	text = flip.ReplaceAllFunc(text, func(m []byte) []byte {
		if bytes.Contains(m, []byte(`"fail"`)) {
			return bytes.Replace(bytes.Replace(m, []byte(`"fail"`), []byte(`"pass"`), 1), []byte(`"score":0`), []byte(`"score":1`), 1)
		}
		return bytes.Replace(bytes.Replace(m, []byte(`"pass"`), []byte(`"fail"`), 1), []byte(`"score":1`), []byte(`"score":0`), 1)
	})
	require.NoError(t, os.WriteFile(b, text, 0o644))
	require.NoError(t, os.Remove(filepath.Join(dir, "shard-a.manifest.json")))

	glob, err := filepath.Glob(filepath.Join(dir, "shard-*.jsonl"))
	require.NoError(t, err)
	code, out, errs := cli(append([]string{"merge", "-o", filepath.Join(dir, "run.jsonl")}, glob...)...)
	require.Zero(t, code, errs)
	require.Contains(t, out, "80 records, 80 duplicates dropped")
	require.Equal(t, 2, strings.Count(errs, "warning: conflict: "), errs)
	require.Contains(t, errs, "warning: conflict: s00 epoch 0 is fail (score 0) in "+a+" and pass (score 1) in "+b+": the first is kept")
	require.Contains(t, errs, "warning: conflict: s01 epoch 0 is pass (score 1) in "+a+" and fail (score 0) in "+b)
}

// TestGlobSkipsEveryFileBesideALog: the files review adds beside a log
// (run.jsonl.reviews.jsonl) match runs/*.jsonl too, and are skipped as the
// transcript stores are: every sidecar is named by one table
// (internal/sidecar), where the skip list named three.
func TestGlobSkipsEveryFileBesideALog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "a.jsonl")
	runEval(t, log, 2)
	w, _, err := review.Open(review.FilePath(log))
	require.NoError(t, err)
	require.NoError(t, w.Append(review.Review{SampleID: "s00", Reviewer: "ana", Pass: true, Time: time.Unix(0, 0).UTC()}))
	require.NoError(t, w.Close())
	glob, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	require.NoError(t, err)
	require.Len(t, glob, 3, "a log, its transcript store and its reviews")
	code, out, errs := cli(append([]string{"report"}, glob...)...)
	require.Zero(t, code, errs)
	require.Equal(t, 1, strings.Count(out, "samples × epochs"), out)
	require.Contains(t, errs, "note: skipping "+review.FilePath(log)+", a file of the log "+log)
}
