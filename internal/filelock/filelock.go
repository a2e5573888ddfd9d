// Package filelock keeps one writer per file: an exclusive advisory lock
// on a sidecar PATH.lock that the kernel drops when its holder dies,
// however it dies, so that no lock is ever stale. The JSONL log and the
// review file beside it use it; sink/jsonl re-exports LockedError.
package filelock

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/proctor-evals/proctor/internal/sidecar"
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
	return fmt.Sprintf("%s is in use by %s (lock %s): one writer at a time", e.Path, who, sidecar.Lock(e.Path))
}

// Lock takes the writer's lock of the file at path: an exclusive flock on
// the sidecar path+".lock", which holds "pid host"; a file in use fails at
// once with a *LockedError. The file itself is not locked: its writer may
// replace it by a rename.
//
// The lock file is rewritten only when it is one: a symbolic link is not
// followed, and a file that is not a regular file of one link holding a
// holder's line (or nothing) is refused, never truncated.
func Lock(path string) (*os.File, error) {
	name := sidecar.Lock(path)
	for range 100 {
		if isSymlink(name) { // noFollow is the check without a race, where there is one
			return nil, fmt.Errorf("locking %s: %s is a symbolic link, not a lock file: not following it", path, name)
		}
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|noFollow|syscall.O_NONBLOCK, 0o644)
		if err != nil {
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if err := checkLockFile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %s %v: not touching it", path, name, err)
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
		// A holder that closed removes the file (see Unlock): if it did
		// so after we opened it, we hold a lock no one else will see.
		fi, err := f.Stat()
		pi, perr := os.Lstat(name)
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

// maxLockFile bounds what a lock file holds: "pid host\n".
const maxLockFile = 512

// checkLockFile reports why f is not a lock file this package wrote (or
// just created): a regular file of one link, empty or holding one
// "pid host" line.
func checkLockFile(f *os.File) error {
	st, err := f.Stat()
	switch {
	case err != nil:
		return err
	case !st.Mode().IsRegular():
		return fmt.Errorf("is not a regular file (%v)", st.Mode().Type())
	case links(st) > 1:
		return fmt.Errorf("has %d hard links", links(st))
	case st.Size() == 0:
		return nil
	case st.Size() > maxLockFile:
		return fmt.Errorf("holds %d bytes, not a lock holder's line", st.Size())
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return err
	}
	var pid int
	var host string
	if n, _ := fmt.Sscanf(string(b), "%d %s\n", &pid, &host); n != 2 || pid <= 0 || fmt.Sprintf("%d %s\n", pid, host) != string(b) {
		return fmt.Errorf("does not hold a lock holder's line (%q)", b[:min(len(b), 40)])
	}
	return nil
}

func isSymlink(name string) bool {
	st, err := os.Lstat(name)
	return err == nil && st.Mode()&os.ModeSymlink != 0
}

// Unlock removes the lock file while it still holds the lock, then drops
// it: a writer waiting on the old file sees it gone and starts again.
func Unlock(path string, f *os.File) error {
	if f == nil {
		return nil
	}
	os.Remove(sidecar.Lock(path)) // best effort: a file left behind is not a lock
	return f.Close()
}

// Held returns a *LockedError when a writer holds the file at path, and
// nil otherwise. It takes no lock that it could keep and creates no file.
func Held(path string) error {
	f, err := os.OpenFile(sidecar.Lock(path), os.O_RDWR|noFollow|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil // no lock file, or none we may open: no writer we can see
	}
	defer f.Close() // drops the lock if we got it
	if checkLockFile(f) != nil {
		return nil // not a lock file: no writer
	}
	if ok, err := TryLock(f); err == nil && !ok {
		return holder(path, f)
	}
	return nil
}

// holder reads the "pid host" of the lock file f into a *LockedError.
func holder(path string, f *os.File) error {
	b, _ := io.ReadAll(io.LimitReader(f, maxLockFile))
	e := &LockedError{Path: path}
	fmt.Sscanf(string(b), "%d %s", &e.PID, &e.Host)
	return e
}
