package eval_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/distrib"
	"github.com/proctor-evals/proctor/sink"
)

// seeded is an eval whose outcomes depend only on episode seeds: the same
// run seed gives the same records wherever and however episodes run.
func seeded(n int) *eval.Eval[string, string] {
	var d dataset.Slice[string]
	for i := range n {
		d = append(d, dataset.Sample[string]{ID: fmt.Sprintf("task-%03d", i), Input: "x",
			Tags: map[string]string{"level": []string{"easy", "hard"}[i%2]}})
	}
	return &eval.Eval[string, string]{
		Name: "seeded", Dataset: d,
		Harness: harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
			if ep.Seed%3 == 0 {
				return "no", nil
			}
			return "ok", nil
		}),
		Judge: wantOK,
	}
}

// sameReport compares what a report says of its episodes, not when or
// where they ran.
func sameReport(t *testing.T, want, got *report.Report) {
	t.Helper()
	ignore := cmpopts.IgnoreFields(report.Report{}, "RunID", "StartedAt", "Wall", "Latency", "Resumed", "Warnings", "Failures")
	require.Empty(t, cmp.Diff(want, got, ignore, cmpopts.EquateNaNs(), cmpopts.EquateApprox(0, 1e-12), cmpopts.IgnoreUnexported(report.Report{})))
}

func TestShardsPartitionTheRunAndTheirUnionReportsAsOneMachine(t *testing.T) {
	t.Parallel()
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) {
			t.Parallel()
			testShardsPartitionTheRun(t, streamed)
		})
	}
}

func testShardsPartitionTheRun(t *testing.T, streamed bool) {
	e := seeded(60)
	cfg := eval.Config{Epochs: 3, Seed: 7, Concurrency: 4}
	whole, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	if streamed {
		e.Dataset = &readCounter{d: e.Dataset.(dataset.Slice[string])}
	}

	dir := t.TempDir()
	var all []sink.Record
	runIDs := map[string]bool{}
	for i := range 3 {
		c := cfg
		c.Shard = eval.Shard{Index: i, Count: 3}
		c.Log = filepath.Join(dir, fmt.Sprintf("shard-%d.jsonl", i))
		rep, err := e.Run(context.Background(), c)
		require.NoError(t, err)
		require.Positive(t, rep.Episodes, "shard %d ran nothing: the hash does not spread 60 samples", i)
		runIDs[rep.RunID] = true
		for _, r := range logRecords(t, c.Log) {
			require.True(t, eval.InShard(r.SampleID, c.Shard), "shard %d ran %s", i, r.SampleID)
			all = append(all, r)
		}
	}
	require.Len(t, runIDs, 1, "shards derive one run ID without talking to each other")
	require.Len(t, all, 180, "every key once across shards")
	merged, err := report.FromRecords(func(yield func(sink.Record, error) bool) {
		for _, r := range all {
			if !yield(r, nil) {
				return
			}
		}
	}, nil)
	require.NoError(t, err)
	merged.Eval = whole.Eval
	sameReport(t, whole, merged)
}

func TestParseShard(t *testing.T) {
	t.Parallel()
	s, err := eval.ParseShard("2/5")
	require.NoError(t, err)
	require.Equal(t, eval.Shard{Index: 2, Count: 5}, s)
	for _, bad := range []string{"5/5", "-1/3", "1", "a/b", "0/0", ""} {
		_, err := eval.ParseShard(bad)
		require.Error(t, err, bad)
	}
	_, err = seeded(2).Run(context.Background(), eval.Config{Shard: eval.Shard{Index: 3, Count: 2}})
	var ce *eval.ConfigError
	require.ErrorAs(t, err, &ce)
}

// A coordinator (Recording) fed by workers (Work) through channels records
// what Run records on one machine, each key once even when a result comes
// twice.
func TestWorkFeedingARecordingReportsAsRun(t *testing.T) {
	t.Parallel()
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) {
			t.Parallel()
			testWorkFeedingARecording(t, streamed)
		})
	}
}

// testWorkFeedingARecording: streamed, the coordinator keeps the dataset's
// IDs only, and so does the worker, which reads each sample as its work
// arrives.
func testWorkFeedingARecording(t *testing.T, streamed bool) {
	e := seeded(40)
	cfg := eval.Config{Epochs: 2, Seed: 11, Concurrency: 8}
	whole, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	if streamed {
		e.Dataset = &readCounter{d: e.Dataset.(dataset.Slice[string])}
	}

	c := cfg
	c.Log = filepath.Join(t.TempDir(), "coord.jsonl")
	rec, err := distrib.Open(e, context.Background(), c)
	require.NoError(t, err)
	m, err := e.Manifest(context.Background(), c)
	require.NoError(t, err)
	require.Equal(t, rec.Manifest().Dataset, m.Dataset, "a worker's manifest matches its coordinator's")

	pending := rec.Pending()
	require.Len(t, pending, 40)
	work := make(chan distrib.Assignment, len(pending))
	for _, a := range pending {
		work <- a
	}
	close(work)
	var mu sync.Mutex
	var first *distrib.Finished
	w := c
	w.Log, w.Worker = "", "host-a:1"
	err = distrib.Work(e, context.Background(), w, nil, work, func(f distrib.Finished) {
		require.Equal(t, "host-a:1", f.Record.Worker)
		require.NoError(t, rec.Commit(f))
		mu.Lock()
		if first == nil {
			first = &f
		}
		mu.Unlock()
	})
	require.NoError(t, err)
	require.NoError(t, rec.Commit(*first), "a late duplicate is dropped, not an error")
	require.Error(t, rec.Commit(distrib.Finished{Record: sink.Record{SampleID: "nope"}}))
	<-rec.Complete()
	st := rec.Stats()
	require.Equal(t, int64(80), st.Done)
	require.Equal(t, int64(80), st.Total)
	got, err := rec.Close(context.Background())
	require.NoError(t, err)
	sameReport(t, whole, got)
	require.Contains(t, strings.Join(got.Warnings, "\n"), "1 duplicate")
	require.Len(t, logRecords(t, c.Log), 80)
	for _, r := range logRecords(t, c.Log) {
		require.Equal(t, got.RunID, r.RunID, "records carry the coordinator's run ID")
	}

	// Reopened, the log is complete: nothing is pending.
	again, err := distrib.Open(e, context.Background(), c)
	require.NoError(t, err)
	require.Empty(t, again.Pending())
	<-again.Complete()
	_, err = again.Close(context.Background())
	require.NoError(t, err)
}

// A worker streams a streamed dataset: it reads it once to index it and
// once as its work arrives (a sample when its work does, skipping the
// samples other workers take), again from its start only for work behind
// its reading (queued again), and runs each episode as Run does.
func TestWorkStreamsAStreamedDataset(t *testing.T) {
	t.Parallel()
	e := seeded(40)
	cfg := eval.Config{Epochs: 2, Seed: 11, Concurrency: 4}
	run := cfg
	run.Log = filepath.Join(t.TempDir(), "run.jsonl")
	_, err := e.Run(context.Background(), run)
	require.NoError(t, err)
	want := map[string]sink.Status{}
	for _, r := range logRecords(t, run.Log) {
		want[fmt.Sprint(r.SampleID, r.Epoch)] = r.Status
	}
	c := &readCounter{d: e.Dataset.(dataset.Slice[string])}
	e.Dataset = c

	// This worker's share: every other sample, in dataset order, then one
	// behind (queued again), then the last.
	var work []distrib.Assignment
	for i := 0; i < 38; i += 2 {
		work = append(work, distrib.Assignment{SampleID: fmt.Sprintf("task-%03d", i), Epochs: []int{0, 1}})
	}
	work = append(work, distrib.Assignment{SampleID: "task-005", Epochs: []int{1}}, distrib.Assignment{SampleID: "task-039", Epochs: []int{0, 1}})
	in := make(chan distrib.Assignment)
	go func() {
		defer close(in)
		for _, a := range work {
			in <- a
		}
	}()
	var mu sync.Mutex
	got := map[string]sink.Status{}
	err = distrib.Work(e, context.Background(), cfg, nil, in, func(f distrib.Finished) {
		mu.Lock()
		defer mu.Unlock()
		got[fmt.Sprint(f.Record.SampleID, f.Record.Epoch)] = f.Record.Status
	})
	require.NoError(t, err)
	require.Len(t, got, 19*2+1+2)
	for k, st := range got {
		require.Equal(t, want[k], st, k)
	}
	require.Equal(t, int64(3), c.reads.Load(), "one reading to index, one as work arrives, one for the work behind it")
}

func TestWorkRefusesAnAssignmentItsDatasetLacks(t *testing.T) {
	t.Parallel()
	work := make(chan distrib.Assignment, 1)
	work <- distrib.Assignment{SampleID: "elsewhere", Epochs: []int{0}}
	err := distrib.Work(seeded(3), context.Background(), eval.Config{}, nil, work, func(distrib.Finished) { t.Error("nothing runs") })
	require.ErrorContains(t, err, `"elsewhere" is not in this worker's dataset`)
}
