package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// biasedLog writes a log of n episodes whose true pass rate is 0.6 and
// whose judge passes 95% of true passes and 30% of true failures; it
// returns the truth by sample ID.
func biasedLog(t *testing.T, path string, n int, seed uint64) map[string]bool {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	w, err := jsonl.Create(path, nil)
	require.NoError(t, err)
	truth := map[string]bool{}
	for i := range n {
		y := rng.Float64() < 0.6
		f := rng.Float64() < 0.30
		if y {
			f = rng.Float64() < 0.95
		}
		st := sink.Fail
		if f {
			st = sink.Pass
		}
		id := fmt.Sprintf("s%04d", i)
		truth[id] = y
		level := []string{"easy", "hard"}[i%2]
		require.NoError(t, w.Write(context.Background(), sink.Record{Schema: sink.SchemaVersion, RunID: "run1", Eval: "biased", SampleID: id, Status: st,
			Score: b2f(f), Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Output: json.RawMessage(`"out"`), Tags: map[string]string{"level": level}, StartedAt: time.Unix(0, 0).UTC()}))
	}
	require.NoError(t, w.Close(context.Background()))
	return truth
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestReviewPickExportImportReport is the whole path on the command line:
// pick a queue, export it for an annotation tool, grade it there (here:
// with the truth), import, report.
func TestReviewPickExportImportReport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	truth := biasedLog(t, log, 3000, 5)

	code, out, errOut := cli("review", "pick", "-count", "300", "-stratify", "level", log)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "picked 300 of 3000 episodes")
	assert.Contains(t, out, "level=easy: 150 of 1500")
	code, _, errOut = cli("review", "pick", "-count", "300", log)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "-replace")

	csvPath := filepath.Join(dir, "queue.csv")
	code, _, errOut = cli("review", "export", "-o", csvPath, log)
	require.Equal(t, 0, code, errOut)
	f, err := os.Open(csvPath)
	require.NoError(t, err)
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	require.NoError(t, err)
	require.Len(t, rows, 301)
	assert.Empty(t, rows[1][5], "blind: no judge column")
	for _, r := range rows[1:] {
		r[7] = fmt.Sprint(truth[r[0]])
	}
	graded := filepath.Join(dir, "graded.csv")
	gf, err := os.Create(graded)
	require.NoError(t, err)
	require.NoError(t, csv.NewWriter(gf).WriteAll(rows))
	require.NoError(t, gf.Close())
	code, out, errOut = cli("review", "import", "-reviewer", "ana", log, graded)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "imported 300 reviews")

	code, out, errOut = cli("review", "report", "-json", log)
	require.Equal(t, 0, code, errOut)
	var s review.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	assert.Equal(t, 300, s.Reviewed)
	assert.Equal(t, 300, s.PPI.Labelled)
	assert.False(t, s.JudgeCI.Contains(0.6), "the judge alone is biased: %v", s.JudgeCI)
	assert.Less(t, s.PPI.Interval.Width(), s.ReviewsOnly.Interval.Width())
	assert.InDelta(t, 0.6, s.PPI.Mean, 0.07)
	assert.Len(t, s.ByTag, 2)

	code, out, errOut = cli("report", log)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "human review: prediction-powered pass rate ")
	assert.Contains(t, out, "from 300 reviewed episodes")

	code, out, errOut = cli("review", "report", log)
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{"300 of 3000 episodes picked, 300 reviewed", "prediction-powered", "reviews only", "level=hard", "planning:"} {
		assert.Contains(t, out, want)
	}
}

func TestReviewImportRefusesBadRows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	biasedLog(t, log, 20, 1)
	bad := filepath.Join(dir, "bad.csv")
	require.NoError(t, os.WriteFile(bad, []byte("sample_id,pass,reviewer\ns0001,true,ana\ns0002,perhaps,ana\n"), 0o644))
	code, _, errOut := cli("review", "import", log, bad)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, bad+":3: pass \"perhaps\"")
	unknown := filepath.Join(dir, "unknown.jsonl")
	require.NoError(t, os.WriteFile(unknown, []byte(`{"sample_id":"s0001","pass":true,"reviewer":"a"}`+"\n"+`{"sample_id":"nope","pass":true,"reviewer":"a"}`+"\n"), 0o644))
	code, _, errOut = cli("review", "import", log, unknown)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "has no episode nope/0: nothing imported")
	_, err := os.Stat(review.FilePath(log))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing was written")

	code, _, errOut = cli("review", "pick", "-json", log)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "-json does not apply to review pick")
	code, _, _ = cli("review", "grade", log)
	assert.Equal(t, exitUsage, code)
	code, _, errOut = cli("review", "export", "-o", filepath.Join(dir, "x.csv"), log)
	assert.Equal(t, exitError, code)
	assert.True(t, strings.Contains(errOut, "no review queue"), errOut)
}

func TestViewReviewUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	biasedLog(t, log, 10, 1)
	code, _, errOut := cli("view", "-review", log, log)
	assert.Equal(t, exitUsage, code, errOut)
	code, _, errOut = cli("view", "-show-verdict", log)
	assert.Equal(t, exitUsage, code, errOut)
	code, _, errOut = cli("view", "-review", log)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "no review queue")
}

// TestReviewImportRefusesAnotherRunsExport: an export of another run or
// eval does not import into this log, and a queue of another run left at
// the log's path is named and not used.
func TestReviewImportRefusesAnotherRunsExport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	biasedLog(t, log, 20, 1)
	for row, want := range map[string]string{"s0001,true,ana,run0,biased": `run_id "run0"`, "s0001,true,ana,run1,other": `eval "other"`} {
		in := filepath.Join(dir, "other.csv")
		require.NoError(t, os.WriteFile(in, []byte("sample_id,pass,reviewer,run_id,eval\n"+row+"\n"), 0o644))
		code, _, errOut := cli("review", "import", log, in)
		require.Equal(t, exitError, code)
		require.Contains(t, errOut, want)
	}
	_, err := os.Stat(review.FilePath(log))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing was written")

	require.NoError(t, review.WriteQueue(review.QueuePath(log), &review.Queue{RunID: "run0", Entries: []review.Entry{{SampleID: "s0001", Prob: 1}}}))
	code, out, errOut := cli("review", "report", log)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "picked from run run0")
	require.Contains(t, out, "no queue")
}

// TestReviewReportWithoutData: a log with no pass or fail episode has no
// estimate, and the report says so rather than a certain 0.000 [0.000,
// 0.000].
func TestReviewReportWithoutData(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	require.NoError(t, w.Write(context.Background(), sink.Record{Schema: sink.SchemaVersion, RunID: "r", Eval: "e", SampleID: "a", Status: sink.Error, StartedAt: time.Unix(0, 0).UTC()}))
	require.NoError(t, w.Close(context.Background()))
	code, out, errOut := cli("review", "report", log)
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "0.000")
	require.NotContains(t, out, "NaN")
	require.Contains(t, out, "judge                —")
	code, out, errOut = cli("review", "report", "-json", log)
	require.Equal(t, 0, code, errOut)
	var s struct {
		PPI struct {
			Mean any `json:"mean"`
		} `json:"ppi"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Nil(t, s.PPI.Mean, "no estimate (null), not 0")
}

// TestReviewPickRefusesBadLowAgreement: a -low-agreement factor that is
// not a number > 0 is a usage error, not silently no oversampling.
func TestReviewPickRefusesBadLowAgreement(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	biasedLog(t, log, 20, 1)
	for _, k := range []string{"NaN", "-1", "+Inf"} {
		code, _, errOut := cli("review", "pick", "-count", "5", "-low-agreement", k, log)
		require.Equal(t, exitUsage, code, "-low-agreement %s: %s", k, errOut)
		require.Contains(t, errOut, "-low-agreement")
	}
	_, err := os.Stat(review.QueuePath(log))
	require.ErrorIs(t, err, os.ErrNotExist)
}
