package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
)

// runEval writes a log of 40 samples × 2 epochs where the agent is right
// unless the sample index is a multiple of wrongEvery.
func runEval(t *testing.T, path string, wrongEvery int) *report.Report {
	t.Helper()
	var d dataset.Slice[int]
	for i := range 40 {
		level := []string{"easy", "hard"}[i%2]
		d = append(d, dataset.Sample[int]{ID: fmt.Sprintf("s%02d", i), Input: i, Tags: map[string]string{"level": level}})
	}
	h := harness.Func[int, int](func(_ context.Context, ep *harness.Episode[int]) (int, error) {
		ep.Record(harness.Event{Kind: "model", Name: "stand-in", Usage: harness.Usage{InputTokens: 7, OutputTokens: 1}})
		if ep.Sample.Input%wrongEvery == 0 {
			return -1, nil
		}
		return ep.Sample.Input, nil
	})
	j := judge.Func[int, int](func(_ context.Context, ep *harness.Episode[int], out int) (judge.Verdict, error) {
		if out == ep.Sample.Input {
			return judge.Pass("right"), nil
		}
		return judge.Fail(fmt.Sprintf("got %d", out)), nil
	})
	e := &eval.Eval[int, int]{Name: "cli", Dataset: d, Harness: h, Judge: j}
	rep, err := e.Run(context.Background(), eval.Config{Epochs: 2, Log: path})
	require.NoError(t, err)
	return rep
}

func cli(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestReportMatchesTheRun(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	want := runEval(t, log, 4)

	code, out, errs := cli("report", "-json", log)
	require.Zero(t, code, errs)
	var got report.Report
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, want.RunID, got.RunID)
	require.Equal(t, want.Passed, got.Passed)
	require.Equal(t, want.Failed, got.Failed)
	require.InDelta(t, want.PassRate, got.PassRate, 1e-12)
	require.InDelta(t, want.Interval.Lo, got.Interval.Lo, 1e-12)
	require.Equal(t, want.PassAtK, got.PassAtK)

	code, out, _ = cli("report", log)
	require.Zero(t, code)
	require.Contains(t, out, "pass rate")
	require.Contains(t, out, "by level")
	code, out, _ = cli("report", "-markdown", log)
	require.Zero(t, code)
	require.Contains(t, out, "| metric | value |")
}

func TestExportThenReportFromParquet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	runEval(t, log, 4)
	pq := filepath.Join(dir, "parquet")
	code, out, errs := cli("export", "-parquet", pq, log)
	require.Zero(t, code, errs)
	require.Contains(t, out, "exported 80 records")

	_, fromLog, _ := cli("report", "-json", log)
	code, fromParquet, errs := cli("report", "-json", pq)
	require.Zero(t, code, errs)
	var a, b report.Report
	require.NoError(t, json.Unmarshal([]byte(fromLog), &a))
	require.NoError(t, json.Unmarshal([]byte(fromParquet), &b))
	a.Latency, b.Latency = report.Latency{}, report.Latency{} // Parquet keeps µs
	require.Equal(t, a, b, "the same numbers from the log and from Parquet")
}

func TestCompareFailsOnRegression(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, same, worse := filepath.Join(dir, "base.jsonl"), filepath.Join(dir, "same.jsonl"), filepath.Join(dir, "worse.jsonl")
	runEval(t, base, 10)
	runEval(t, same, 10)
	runEval(t, worse, 2) // half the samples now fail

	code, out, errs := cli("compare", "-fail-on-regression", base, same)
	require.Zero(t, code, errs+out)
	code, out, _ = cli("compare", "-fail-on-regression", base, worse)
	require.Equal(t, exitRegression, code, out)
	require.Contains(t, out, "s02     100.0%  0.0%", "the flipped samples are listed")
	code, _, _ = cli("compare", base, worse)
	require.Zero(t, code, "without the flag, a regression is only reported")
	code, out, _ = cli("compare", "-json", base, worse)
	require.Zero(t, code)
	var c map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &c))
	require.Equal(t, true, c["regressed"])
}

func TestTracePrintsTheTranscript(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	runEval(t, log, 4)
	code, out, errs := cli("trace", log, "s04", "1")
	require.Zero(t, code, errs)
	require.Contains(t, out, "== s04 epoch 1")
	require.Contains(t, out, "fail")
	require.Contains(t, out, "reason: got -1")
	require.Contains(t, out, "model    stand-in")
	require.Equal(t, 1, strings.Count(out, "=="), "one epoch asked for")
	_, out, _ = cli("trace", log, "s04")
	require.Equal(t, 2, strings.Count(out, "== s04"), "every epoch without EPOCH")

	code, _, errs = cli("trace", log, "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errs, `no episode of sample "nope"`)
}

func TestClearErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	runEval(t, log, 4)

	code, _, errs := cli("report", filepath.Join(dir, "missing.jsonl"))
	require.Equal(t, 1, code)
	require.Contains(t, errs, "no such file")

	v2 := filepath.Join(dir, "v2.jsonl")
	r := sink.Record{Schema: 2, RunID: "r", SampleID: "s", Status: sink.Pass}
	require.NoError(t, os.WriteFile(v2, append(r.AppendJSON(nil), '\n'), 0o644))
	code, _, errs = cli("report", v2)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "record schema 2, this version of proctor reads schema 1")

	torn := filepath.Join(dir, "torn.jsonl")
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(torn, append(b, `{"schema":1,"run_id":"x","sam`...), 0o644))
	code, out, errs := cli("report", "-json", torn)
	require.Zero(t, code)
	require.Contains(t, errs, "torn tail")
	var rep report.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, 80, rep.Episodes, "the committed records are used")

	for _, args := range [][]string{{}, {"frobnicate"}, {"report"}, {"compare", log}, {"export", log}, {"trace", log, "s1", "x"}} {
		code, _, errs := cli(args...)
		require.Equal(t, 2, code, "%v: %s", args, errs)
		require.Contains(t, errs, "usage:")
	}
}
