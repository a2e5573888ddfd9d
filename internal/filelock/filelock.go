// Package filelock keeps one writer per file: an exclusive advisory lock
// on a sidecar PATH.lock that the kernel drops when its holder dies,
// however it dies, so that no lock is ever stale. The JSONL log and the
// review file beside it use it.
package filelock

import (
	"fmt"
	"io"
	"os"
)

// LockedError reports a file that another writer holds: one writer per
// file, whether the other is a process on this machine or a writer in
// this one.
type LockedError struct {
	Path string // the locked file
	PID  int    // the holder's process ID; 0 if it had not written it yet
	Host string // the holder's host name
}

func (e *LockedError) Error() string {
	who := "another writer"
	if e.PID != 0 {
		who = fmt.Sprintf("process %d on %s", e.PID, e.Host)
	}
	return fmt.Sprintf("%s is in use by %s (lock %s): one writer at a time", e.Path, who, e.Path+".lock")
}

// Lock takes the writer's lock of the file at path: an exclusive flock on
// the sidecar path+".lock", which holds "pid host"; a file in use fails at
// once with a *LockedError. The file itself is not locked: its writer may
// replace it by a rename.
func Lock(path string) (*os.File, error) {
	name := path + ".lock"
	for range 100 {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		ok, err := TryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !ok {
			err := holder(path, f)
			f.Close()
			return nil, err
		}
		// A holder that closed removes the file (see unlock): if it did
		// so after we opened it, we hold a lock no one else will see.
		fi, err := f.Stat()
		pi, perr := os.Stat(name)
		if err != nil || perr != nil || !os.SameFile(fi, pi) {
			f.Close()
			continue
		}
		host, _ := os.Hostname()
		if err = f.Truncate(0); err == nil {
			_, err = f.WriteAt(fmt.Appendf(nil, "%d %s\n", os.Getpid(), host), 0)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("locking %s: %s keeps being replaced", path, name)
}

// Unlock removes the lock file while it still holds the lock, then drops
// it: a writer waiting on the old file sees it gone and starts again.
func Unlock(path string, f *os.File) error {
	if f == nil {
		return nil
	}
	os.Remove(path + ".lock") // best effort: a file left behind is not a lock
	return f.Close()
}

// Held returns a *LockedError when a writer holds the file at path, and
// nil otherwise. It takes no lock that it could keep and creates no file.
func Held(path string) error {
	f, err := os.OpenFile(path+".lock", os.O_RDWR, 0)
	if err != nil {
		return nil // no lock file, or none we may open: no writer we can see
	}
	defer f.Close() // drops the lock if we got it
	if ok, err := TryLock(f); err == nil && !ok {
		return holder(path, f)
	}
	return nil
}

// holder reads the "pid host" of the lock file f into a *LockedError.
func holder(path string, f *os.File) error {
	b, _ := io.ReadAll(io.LimitReader(f, 512))
	e := &LockedError{Path: path}
	fmt.Sscanf(string(b), "%d %s", &e.PID, &e.Host)
	return e
}
