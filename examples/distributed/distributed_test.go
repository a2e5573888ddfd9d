package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// The test binary is the eval binary too: started with
// PROCTOR_DISTRIBUTED_CHILD=1 it runs the example's main with its
// arguments, as a shard on another machine would. Nothing is built.
func TestMain(m *testing.M) {
	if os.Getenv("PROCTOR_DISTRIBUTED_CHILD") == "1" {
		main()
		os.Exit(0) // main exits; this is not reached
	}
	os.Exit(m.Run())
}

// child is a shard process.
type child struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
}

// start runs the example binary with args; env adds to a clean
// environment (no inherited JOB_COMPLETION_INDEX).
func start(t *testing.T, env []string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0], args...)}
	c.cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "JOB_COMPLETION") || strings.HasPrefix(kv, "PROCTOR_DISTRIBUTED_CHILD=")
	}), append(env, "PROCTOR_DISTRIBUTED_CHILD=1")...)
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	require.NoError(t, c.cmd.Start())
	t.Cleanup(func() { // a failed test leaves no process behind either
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	})
	return c
}

func (c *child) wait(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Wait(), "%v\nstdout:\n%s\nstderr:\n%s", c.cmd.Args[1:], c.stdout.String(), c.stderr.String())
}

// committed counts the records of a log that a reader sees now (a torn
// tail aside).
func committed(path string) int {
	n := 0
	for _, err := range jsonl.Records(path) {
		if err != nil {
			break
		}
		n++
	}
	return n
}

func TestShardsKilledRerunMergedReportAsOneMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four processes of the example for a few seconds")
	}
	t.Parallel()
	dir := t.TempDir()
	logs := make([]string, 3)
	for i := range logs {
		logs[i] = filepath.Join(dir, fmt.Sprintf("shard-%d.jsonl", i))
	}

	// Shards 0 and 1 are told their shard by flag; shard 2 finds it where a
	// Kubernetes Indexed Job puts it.
	shards := []*child{
		start(t, nil, "run", "-json", "-shard", "0/3", "-log", logs[0]),
		start(t, nil, "run", "-json", "-shard", "1/3", "-log", logs[1]),
		start(t, []string{"JOB_COMPLETION_INDEX=2", "JOB_COMPLETIONS=3"}, "run", "-json", "-log", logs[2]),
	}

	// Shard 1 is killed mid-run, once some of its records are committed.
	deadline := time.Now().Add(30 * time.Second)
	for committed(logs[1]) == 0 {
		require.True(t, time.Now().Before(deadline), "shard 1 committed nothing in 30 s: %s", shards[1].stderr.String())
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, shards[1].cmd.Process.Signal(syscall.SIGKILL))
	err := shards[1].cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "shard 1 was killed, not finished")
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())
	survived := committed(logs[1])

	shards[0].wait(t)
	shards[2].wait(t)

	// Rerun with the same command: it resumes its log.
	rerun := start(t, nil, "run", "-json", "-shard", "1/3", "-log", logs[1])
	rerun.wait(t)
	var rerunReport report.Report
	require.NoError(t, json.Unmarshal(rerun.stdout.Bytes(), &rerunReport))
	require.Equal(t, survived, rerunReport.Resumed, "the rerun resumed what the killed shard committed")
	shards[1] = rerun

	// Every shard's log is a part of one run: one manifest, bar the shard,
	// and the run ID derived from it.
	first, err := manifest.Read(logs[0])
	require.NoError(t, err)
	require.Equal(t, manifest.RunID(first), first.RunID, "a shard's run ID is derived from the run, not chosen")
	sizes := 0
	for i, log := range logs {
		m, err := manifest.Read(log)
		require.NoError(t, err)
		require.Empty(t, manifest.SameRun(first, m), "shard %d", i)
		require.Equal(t, first.RunID, shardReport(t, shards[i]).RunID)
		n := committed(log)
		require.Positive(t, n, "shard %d ran episodes", i)
		sizes += n
	}
	require.Less(t, survived, committed(logs[1]), "shard 1 was killed before its end")

	merged := filepath.Join(dir, "run.jsonl")
	res, err := jsonl.Merge(merged, logs, nil)
	require.NoError(t, err)
	require.Equal(t, first.RunID, res.RunID)
	require.Zero(t, res.Duplicates, "shards share no episode")
	require.Equal(t, sizes, res.Records)

	// One record per key, every key there.
	var records []sink.Record
	seen := map[sink.Key]bool{}
	for r, err := range jsonl.Records(merged) {
		require.NoError(t, err)
		require.False(t, seen[r.Key()], "key %v twice", r.Key())
		seen[r.Key()] = true
		records = append(records, r)
	}
	d := samples()
	epochs := config().Epochs
	require.Len(t, seen, len(d)*epochs)
	for _, s := range d {
		for ep := range epochs {
			require.True(t, seen[sink.Key{SampleID: s.ID, Epoch: ep}], "%s epoch %d", s.ID, ep)
		}
	}

	// The report of the merged log is the report of one machine.
	got, err := report.FromRecords(each(records), nil)
	require.NoError(t, err)
	cfg := config()
	cfg.Concurrency = 32 // concurrency changes nothing but the time taken
	want, err := newEval().Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Positive(t, want.Failed, "the eval fails some episodes, so that equal rates say something")
	require.Equal(t, comparable(t, want), comparable(t, got))
	t.Logf("merged %d records of run %s from 3 shards (one killed after %d records and rerun): pass rate %.3f [%.3f, %.3f]",
		res.Records, res.RunID, survived, got.PassRate, got.Interval.Lo, got.Interval.Hi)

	// No process is left: each was waited for, and is gone.
	for i, c := range shards {
		require.NotNil(t, c.cmd.ProcessState, "shard %d waited for", i)
		require.ErrorIs(t, syscall.Kill(c.cmd.Process.Pid, 0), syscall.ESRCH, "shard %d is gone", i)
	}
}

func shardReport(t *testing.T, c *child) *report.Report {
	t.Helper()
	var r report.Report
	require.NoError(t, json.Unmarshal(c.stdout.Bytes(), &r), c.stdout.String())
	return &r
}

// comparable is a report as JSON, without what differs between any two
// runs (run ID, start, wall time, latency) or between a run and its
// resumed parts (resumed counts, warnings), and with its failures sorted:
// the rest must be equal.
func comparable(t *testing.T, r *report.Report) map[string]any {
	t.Helper()
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"run_id", "started_at", "wall_ns", "latency", "resumed", "warnings"} {
		delete(m, k)
	}
	if f, ok := m["failures"].([]any); ok {
		for _, x := range f {
			delete(x.(map[string]any), "trace")
			delete(x.(map[string]any), "duration_ms")
		}
		slices.SortFunc(f, func(a, b any) int {
			return strings.Compare(fmt.Sprint(a.(map[string]any)["sample_id"], a.(map[string]any)["epoch"]),
				fmt.Sprint(b.(map[string]any)["sample_id"], b.(map[string]any)["epoch"]))
		})
	}
	return m
}

// each yields records as a log does.
func each(records []sink.Record) iter.Seq2[sink.Record, error] {
	return func(yield func(sink.Record, error) bool) {
		for _, r := range records {
			if !yield(r, nil) {
				return
			}
		}
	}
}
