package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// shardEval is 30 tagged samples whose outcome depends only on the
// episode's seed: the same in a shard as on one machine.
func shardEval() *eval.Eval[int, uint64] {
	var d dataset.Slice[int]
	for i := range 30 {
		d = append(d, dataset.Sample[int]{ID: fmt.Sprintf("task-%d", i), Input: i,
			Tags: map[string]string{"level": []string{"easy", "medium", "hard"}[i%3]}})
	}
	h := harness.Func[int, uint64](func(_ context.Context, ep *harness.Episode[int]) (uint64, error) {
		ep.AddEvent(harness.Event{Kind: "model", Name: "stand-in", Usage: harness.Usage{InputTokens: 3, OutputTokens: 1}})
		return ep.Seed, nil
	})
	j := judge.Func[int, uint64](func(_ context.Context, ep *harness.Episode[int], out uint64) (judge.Verdict, error) {
		if out%3 == 0 {
			return judge.Fail("seed divisible by 3"), nil
		}
		return judge.Pass("ok"), nil
	})
	return &eval.Eval[int, uint64]{Name: "sharded", Dataset: d, Harness: h, Judge: j}
}

// runShards runs the eval as n shards, one log each.
func runShards(t *testing.T, dir string, n int, seed uint64) []string {
	t.Helper()
	var logs []string
	for i := range n {
		log := filepath.Join(dir, fmt.Sprintf("shard-%d.jsonl", i))
		_, err := shardEval().Run(context.Background(), eval.Config{Epochs: 3, Seed: seed, Log: log, Shard: eval.Shard{Index: i, Count: n}})
		require.NoError(t, err)
		logs = append(logs, log)
	}
	return logs
}

// comparable is what must be equal between the report of merged shards
// and the report of one machine: everything but the run ID and timings.
func comparable(r *report.Report) *report.Report {
	c := *r
	c.RunID, c.StartedAt, c.Wall, c.Latency, c.Resumed, c.Warnings = "", time.Time{}, 0, report.Latency{}, 0, nil
	c.Failures = slices.Clone(c.Failures)
	for i := range c.Failures {
		c.Failures[i].Transcript = "" // a link into the store of its own log
	}
	slices.SortFunc(c.Failures, func(a, b report.Failure) int {
		return strings.Compare(fmt.Sprint(a.SampleID, a.Epoch), fmt.Sprint(b.SampleID, b.Epoch))
	})
	return &c
}

func reportJSON(t *testing.T, log string) *report.Report {
	t.Helper()
	code, out, errs := cli("report", "-json", log)
	require.Zero(t, code, errs)
	var r report.Report
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	return &r
}

func TestMergeShardsReportsAsOneMachine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := runShards(t, dir, 3, 11)
	whole := filepath.Join(dir, "whole.jsonl")
	_, err := shardEval().Run(context.Background(), eval.Config{Epochs: 3, Seed: 11, Log: whole})
	require.NoError(t, err)

	out := filepath.Join(dir, "merged.jsonl")
	code, stdout, stderr := cli("merge", "-o", out, logs[2], logs[0], logs[1])
	require.Zero(t, code, stderr)
	require.Empty(t, stderr)
	m, err := manifest.Read(logs[0])
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("merged 3 logs of run %s into %s: 90 records, 0 duplicates dropped\n", m.RunID, out), stdout)

	got, want := reportJSON(t, out), reportJSON(t, whole)
	require.Equal(t, 90, got.Episodes)
	require.Equal(t, 30, got.Samples)
	require.Greater(t, got.Failed, 0, "the eval fails some episodes, so that the rates say something")
	require.Equal(t, comparable(want), comparable(got))

	merged, err := manifest.Read(out)
	require.NoError(t, err)
	require.Empty(t, merged.Shard)
	require.Equal(t, m.RunID, merged.RunID)
	require.NotEmpty(t, merged.Dataset.Hash)
	require.Empty(t, manifest.SameRun(m, merged))

	// Every transcript link of the merged log resolves.
	for r, err := range jsonl.Records(out) {
		require.NoError(t, err)
		tr, err := eval.ReadTranscript(r.Transcript, dir)
		require.NoError(t, err)
		require.Equal(t, r.SampleID, tr.SampleID)
	}

	// Again without -force: refused, the output kept; with it: replaced.
	before, err := os.ReadFile(out)
	require.NoError(t, err)
	code, _, stderr = cli(append([]string{"merge", "-o", out}, logs...)...)
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "already exists")
	code, _, stderr = cli(append([]string{"merge", "-force", "-o", out}, logs...)...)
	require.Zero(t, code, stderr)
	after, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, before, after, "the same shards merge to the same bytes in any order")
}

func TestMergeRefusesLogsOfDifferentRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := runShards(t, filepath.Join(dir, "a"), 2, 1)
	b := runShards(t, filepath.Join(dir, "b"), 2, 2)
	out := filepath.Join(dir, "merged.jsonl")
	code, _, stderr := cli("merge", "-o", out, a[0], b[1])
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, a[0]+" and "+b[1]+" are not logs of one run")
	require.Contains(t, stderr, `seed "1" in `+a[0]+`, "2" in `+b[1])
	_, err := os.Stat(out)
	require.True(t, os.IsNotExist(err), "nothing written")

	// A log whose records are of another run than its manifest says.
	m, err := manifest.Read(a[1])
	require.NoError(t, err)
	m.RunID = "someone-else"
	require.NoError(t, manifest.Write(a[1], m))
	code, _, stderr = cli("merge", "-o", out, a[1])
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, `but its manifest (`+manifest.Path(a[1])+`) names run "someone-else"`)
}

func TestMergeWarnsOfMissingShards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := runShards(t, dir, 3, 5)
	for i, log := range logs { // as the engine records them
		m, err := manifest.Read(log)
		require.NoError(t, err)
		m.Shard = fmt.Sprintf("%d/3", i)
		require.NoError(t, manifest.Write(log, m))
	}
	code, _, stderr := cli("merge", "-o", filepath.Join(dir, "merged.jsonl"), logs[0], logs[2])
	require.Zero(t, code, stderr)
	require.Contains(t, stderr, "warning: shards 1/3 are missing: the merged log is not the whole run")
	code, stdout, stderr := cli("merge", "-o", filepath.Join(dir, "twice.jsonl"), logs[0], logs[1], logs[2], logs[1])
	require.Zero(t, code, stderr)
	require.Contains(t, stderr, "warning: shard 1/3 is given twice")
	n := 0
	for range jsonl.Records(logs[1]) {
		n++
	}
	require.Contains(t, stdout, fmt.Sprintf(": 90 records, %d duplicates dropped", n))
}

func TestMergeUsage(t *testing.T) {
	t.Parallel()
	code, _, stderr := cli("merge", "a.jsonl")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "-o OUT is required")
	code, _, stderr = cli("merge", "-o", "x.jsonl")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "at least one LOG")
	code, stdout, _ := cli("help", "merge")
	require.Zero(t, code)
	require.Contains(t, stdout, "usage: proctor merge [-force] [-o OUT] LOG...")
}
