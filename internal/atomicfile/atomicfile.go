// Package atomicfile writes a file whole or not at all: into a temporary
// file beside it, synced, then renamed over it, so that a reader or a
// crash sees the old file or the new one, never part of one.
package atomicfile

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
)

// Write creates or replaces path, with permissions perm, with what write
// writes to w. On an error from write or from the file system,
// the temporary file is removed and path is left as it was.
func Write(path string, perm fs.FileMode, write func(w *bufio.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close() // a second Close after a failed one is harmless
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 64<<10)
	if err = write(w); err != nil {
		return err
	}
	if err = w.Flush(); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil { // CreateTemp makes it 0600
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename is durable once the directory is synced; a failure here
	// leaves the file complete, so it is not reported.
	if d, derr := os.Open(filepath.Dir(path)); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
