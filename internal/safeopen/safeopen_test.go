//go:build unix

package safeopen_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/internal/safeopen"
)

func TestOpenRefusesWhatIsNotARegularFileWithoutWaiting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	for _, path := range []string{fifo, dir} {
		done := make(chan error, 1)
		go func() { _, err := safeopen.ReadFile(path); done <- err }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, safeopen.ErrNotRegular)
			require.ErrorContains(t, err, path)
		case <-time.After(10 * time.Second):
			t.Fatalf("opening %s blocked", path)
		}
	}
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	b, err := safeopen.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "x", string(b))
}
