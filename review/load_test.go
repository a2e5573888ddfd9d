package review_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// TestLoadKeepsEpisodesAndQueued: Load keeps each record's episode (tags,
// verdict, agreement) and the whole records of the queued episodes only,
// the same whether the log is read on every core (whole, across several
// chunks) or record by record (a torn tail).
func TestLoadKeepsEpisodesAndQueued(t *testing.T) {
	defer func(n int) { recordjson.ChunkSize = n }(recordjson.ChunkSize)
	recordjson.ChunkSize = 4 << 10 // several chunks
	log := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	var recs []sink.Record
	for i := range 200 {
		r := sink.Record{Schema: sink.SchemaVersion, RunID: "run-1", Eval: "ev", SampleID: "s" + strconv.Itoa(i), Epoch: i % 3,
			Status: []sink.Status{sink.Pass, sink.Fail, sink.Error}[i%3], Tags: map[string]string{"k": strconv.Itoa(i % 4)},
			Input: []byte(`{"q":` + strconv.Itoa(i) + `}`), Output: []byte(`"a"`), StartedAt: t0}
		if i%5 == 0 {
			r.Scores = map[string]float64{"agreement": 0.5}
		}
		if i%7 == 0 {
			r.Tags = nil
		}
		require.NoError(t, w.Write(context.Background(), r))
		recs = append(recs, r)
	}
	require.NoError(t, w.Close(context.Background()))
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 1, Count: 20})
	require.NoError(t, err)
	require.NoError(t, review.WriteQueue(review.QueuePath(log), q))
	in := map[review.Key]bool{}
	for _, e := range q.Entries {
		in[e.Key()] = true
	}
	var wantQueued []sink.Record
	for r, err := range jsonl.Records(log) { // as read back: times in UTC
		require.NoError(t, err)
		if in[review.Key{SampleID: r.SampleID, Epoch: r.Epoch}] {
			wantQueued = append(wantQueued, r)
		}
	}
	require.Len(t, wantQueued, 20)
	want := review.Episodes(recs)

	f, err := review.Load(log)
	require.NoError(t, err)
	if d := cmp.Diff(want, f.Episodes, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("episodes (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantQueued, f.Queued); d != "" {
		t.Errorf("queued records (-want +got):\n%s", d)
	}

	// A torn tail: read record by record, the same but for the torn line.
	lf, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = lf.WriteString(`{"schema":1,"run_id":"run-1","sample_id":"torn"`)
	require.NoError(t, err)
	require.NoError(t, lf.Close())
	f, err = review.Load(log)
	require.NoError(t, err)
	require.Len(t, f.Torn, 1)
	if d := cmp.Diff(want, f.Episodes, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("episodes of the torn log (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantQueued, f.Queued); d != "" {
		t.Errorf("queued records of the torn log (-want +got):\n%s", d)
	}
}

// TestFIFOAtReviewPathsIsRefused: a FIFO where the reviews or the queue
// should be is refused at once, as one at a log's path is, by every
// reader and by the review writer; none waits for a writer to the pipe.
func TestFIFOAtReviewPathsIsRefused(t *testing.T) {
	t.Parallel()
	for _, path := range []func(string) string{review.FilePath, review.QueuePath} {
		dir := t.TempDir()
		log := filepath.Join(dir, "run.jsonl")
		w, err := jsonl.Create(log, nil)
		require.NoError(t, err)
		require.NoError(t, w.Close(context.Background()))
		fifo := path(log)
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Skipf("no FIFOs here: %v", err)
		}
		calls := map[string]func() error{
			"Load": func() error { _, err := review.Load(log); return err },
		}
		if fifo == review.FilePath(log) {
			calls["Open"] = func() error {
				w, _, err := review.Open(fifo)
				if err == nil {
					w.Close()
				}
				return err
			}
		}
		for name, call := range calls {
			done := make(chan error, 1)
			go func() { done <- call() }()
			select {
			case err := <-done:
				require.ErrorIs(t, err, safeopen.ErrNotRegular, "%s of %s", name, fifo)
			case <-time.After(5 * time.Second):
				t.Fatalf("%s of %s waits on the FIFO", name, fifo)
			}
		}
	}
}

// TestLoadLeavesOutOtherRuns: a queue picked from another run, or reviews
// of another run, left at the same log path do not count for this run's
// log, and Load says so; reviews that name no run (written before runs
// were recorded) count.
func TestLoadLeavesOutOtherRuns(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	for _, id := range []string{"a", "b"} {
		require.NoError(t, w.Write(context.Background(), sink.Record{Schema: sink.SchemaVersion, RunID: "new", Eval: "ev", SampleID: id, Status: sink.Pass, StartedAt: t0}))
	}
	require.NoError(t, w.Close(context.Background()))
	old := &review.Queue{RunID: "old", Eval: "ev", Entries: []review.Entry{{SampleID: "a", Prob: 1}}}
	require.NoError(t, review.WriteQueue(review.QueuePath(log), old))
	rw, _, err := review.Open(review.FilePath(log))
	require.NoError(t, err)
	stale, mine, unnamed := rv("a", 0, "ana", false, 0), rv("a", 0, "bo", true, 1), rv("b", 0, "cy", true, 2)
	stale.RunID, mine.RunID = "old", "new"
	require.NoError(t, rw.Append(stale, mine, unnamed))
	require.NoError(t, rw.Close())

	f, err := review.Load(log)
	require.NoError(t, err)
	require.Nil(t, f.Queue, "the queue of another run")
	require.Empty(t, f.Queued)
	if d := cmp.Diff([]review.Review{mine, unnamed}, f.Reviews); d != "" {
		t.Errorf("reviews (-want +got):\n%s", d)
	}
	require.Len(t, f.Ignored, 2)
	require.Contains(t, f.Ignored[0], "picked from run old")
	require.Contains(t, f.Ignored[1], "1 reviews of run old")

	// The same run of another eval: not this log's queue either.
	require.NoError(t, review.WriteQueue(review.QueuePath(log), &review.Queue{RunID: "new", Eval: "other", Entries: old.Entries}))
	f, err = review.Load(log)
	require.NoError(t, err)
	require.Nil(t, f.Queue)
	require.NoError(t, review.WriteQueue(review.QueuePath(log), &review.Queue{RunID: "new", Eval: "ev", Entries: old.Entries}))
	f, err = review.Load(log)
	require.NoError(t, err)
	require.NotNil(t, f.Queue)
	require.Len(t, f.Queued, 1)
}
