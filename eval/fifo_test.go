//go:build unix

package eval_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
)

// TestRunRefusesAFIFOForAnEarlierLog: -from, -reuse-from and rejudging
// name a log; a FIFO there, or as the log's manifest, is refused at once
// (opening it for reading waited for a writer forever).
func TestRunRefusesAFIFOForAnEarlierLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	good := filepath.Join(dir, "good.jsonl")
	e := &eval.Eval[string, string]{Name: "fifo", Dataset: samples("ok", "ok"), Harness: echo, Judge: wantOK}
	_, err := e.Run(context.Background(), eval.Config{Log: good})
	require.NoError(t, err)
	manifestFIFO := filepath.Join(dir, "m.jsonl")
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "m.manifest.json"), 0o644))

	for name, run := range map[string]func() error{
		"from": func() error {
			_, err := e.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "a.jsonl"), Select: &eval.Selection{From: fifo}})
			return err
		},
		"reuse-from": func() error {
			_, err := e.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "b.jsonl"), ReuseFrom: []string{fifo}})
			return err
		},
		"rejudge": func() error {
			_, err := e.Rejudge(context.Background(), fifo, eval.Config{Log: filepath.Join(dir, "c.jsonl")})
			return err
		},
		"manifest": func() error {
			_, err := e.Run(context.Background(), eval.Config{Log: manifestFIFO})
			return err
		},
	} {
		done := make(chan error, 1)
		go func() { done <- run() }()
		select {
		case err := <-done:
			require.ErrorContains(t, err, "not a regular file", name)
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: a FIFO hangs the run", name)
		}
	}
	_, err = os.Stat(good)
	require.NoError(t, err)
}
