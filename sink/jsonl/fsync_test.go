package jsonl_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// TestCloseReportsAnFsyncThatFailedAsItBegan: the writer's group commit
// is in its fsync when Close begins, and that fsync fails. Close must
// report it: the kernel reports a write-back error to one fsync only, so
// Close's own fsync succeeds (here: as the kernel's would), and the log's
// last lines may be lost while Close said they were safe.
func TestCloseReportsAnFsyncThatFailedAsItBegan(t *testing.T) {
	t.Parallel()
	w, err := jsonl.Create(filepath.Join(t.TempDir(), "run.jsonl"), &jsonl.Options{SyncEvery: 1})
	require.NoError(t, err)
	var calls atomic.Int32
	inFsync := make(chan struct{})
	jsonl.SetSync(w, func() error {
		if calls.Add(1) > 1 {
			return nil // the error was reported once already
		}
		close(inFsync)
		deadline := time.Now().Add(10 * time.Second)
		for !jsonl.Closing(w) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		return errors.New("input/output error")
	})
	require.NoError(t, w.Write(context.Background(), sink.Record{SampleID: "s", Status: sink.Pass}))
	<-inFsync // the group commit of that line is under way
	err = w.Close(context.Background())
	require.Error(t, err, "the failed fsync of the log's lines is reported")
	require.Contains(t, err.Error(), "input/output error")
	require.GreaterOrEqual(t, calls.Load(), int32(1))
}
