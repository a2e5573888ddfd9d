package driver_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sandbox/driver"
)

// AddTree keeps a template's tree, its symlinks as links, under the
// prefix, owned by root, and leaves out what is not part of a template.
func TestAddTree(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src", "pkg"), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "pkg", "a.go"), []byte("package a"), 0o640))
	require.NoError(t, os.Symlink("../../etc/passwd", filepath.Join(dir, "src", "out")))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil && !errors.Is(err, syscall.ENOSYS) {
		require.NoError(t, err)
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs, err := driver.AddTree(tw, dir, "workspace")
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.Equal(t, []string{"workspace/src", "workspace/src/pkg"}, dirs)

	type entry struct {
		Name, Link, Body string
		Type             byte
		Mode             int64
		Uid, Gid         int
	}
	var got []entry
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		got = append(got, entry{h.Name, h.Linkname, string(body), h.Typeflag, h.Mode & 0o777, h.Uid, h.Gid})
	}
	want := []entry{
		{Name: "workspace/src/", Type: tar.TypeDir, Mode: 0o750},
		{Name: "workspace/src/out", Link: "../../etc/passwd", Type: tar.TypeSymlink, Mode: 0o777},
		{Name: "workspace/src/pkg/", Type: tar.TypeDir, Mode: 0o750},
		{Name: "workspace/src/pkg/a.go", Body: "package a", Type: tar.TypeReg, Mode: 0o640},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
}
