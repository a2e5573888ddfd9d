package atomicfile_test

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/internal/atomicfile"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
	require.NoError(t, atomicfile.Write(path, 0o644, func(w *bufio.Writer) error {
		_, err := io.WriteString(w, "new")
		return err
	}))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "new", string(b))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")
}

// A write that fails halfway leaves the old file as it was and no
// temporary file behind.
func TestWriteFailureLeavesTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	boom := errors.New("boom")
	err := atomicfile.Write(path, 0o644, func(w *bufio.Writer) error {
		io.WriteString(w, "half of the new")
		return boom
	})
	require.ErrorIs(t, err, boom)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "old", string(b))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the temporary file is removed")
}

func TestWriteInAMissingDirectory(t *testing.T) {
	err := atomicfile.Write(filepath.Join(t.TempDir(), "no", "out"), 0o644, func(*bufio.Writer) error { return nil })
	require.ErrorIs(t, err, os.ErrNotExist)
}
