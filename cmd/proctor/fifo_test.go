//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadersRefuseAFIFO: a FIFO where a log, its manifest or its
// transcript store should be is refused at once by every command that
// reads logs; opening it for reading used to wait for a writer forever.
func TestReadersRefuseAFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	runEval(t, good, 4)
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	// A log whose manifest is a FIFO.
	withFIFOManifest := filepath.Join(dir, "m.jsonl")
	runEval(t, withFIFOManifest, 4)
	mani := strings.TrimSuffix(withFIFOManifest, ".jsonl") + ".manifest.json"
	require.NoError(t, syscall.Unlink(mani))
	require.NoError(t, syscall.Mkfifo(mani, 0o644))

	for _, args := range [][]string{
		{"report", fifo},
		{"report", good, fifo},
		{"report", "-html", filepath.Join(dir, "r.html"), fifo},
		{"report", "-html", fifo, good},
		{"compare", good, fifo},
		{"export", "-parquet", filepath.Join(dir, "pq"), fifo},
		{"trace", fifo, "s01", "0"},
		{"merge", "-o", filepath.Join(dir, "merged.jsonl"), good, fifo},
		{"merge", "-o", filepath.Join(dir, "merged2.jsonl"), withFIFOManifest},
	} {
		done := make(chan [3]any, 1)
		go func() {
			code, out, errs := cli(args...)
			done <- [3]any{code, out, errs}
		}()
		select {
		case r := <-done:
			require.NotZero(t, r[0], "%v: %s", args, r[1])
			require.Contains(t, r[2], "not a regular file", "%v", args)
		case <-time.After(20 * time.Second):
			t.Fatalf("proctor %s hangs on a FIFO", strings.Join(args, " "))
		}
	}
}
