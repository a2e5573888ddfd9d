// Package safeopen opens files for reading without ever blocking on what
// is not a regular file: a FIFO planted where a log, a manifest or a
// transcript store should be would otherwise hang the reader in open(2)
// until a writer comes, deaf to signals the Go runtime handles.
package safeopen

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is the error (in a *fs.PathError) for a path that is a
// directory, a FIFO, a device or a socket.
var ErrNotRegular = errors.New("not a regular file")

// Open opens the regular file at path for reading. The open does not wait
// (O_NONBLOCK, which a regular file ignores), and what it opened is
// checked: anything but a regular file is refused with ErrNotRegular.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode()))}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile is os.ReadFile through Open.
func ReadFile(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}
