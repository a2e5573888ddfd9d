package jsonl

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// LockedError reports a log that another writer holds: one writer per
// log, whether the other is a process on this machine or a Writer in this
// one.
type LockedError struct {
	Path string // the log
	PID  int    // the holder's process ID; 0 if it had not written it yet
	Host string // the holder's host name
}

func (e *LockedError) Error() string {
	who := "another writer"
	if e.PID != 0 {
		who = fmt.Sprintf("process %d on %s", e.PID, e.Host)
	}
	return fmt.Sprintf("jsonl: %s is in use by %s (lock %s): a log has one writer at a time", e.Path, who, e.Path+".lock")
}

// lock takes the writer's lock of the log at path: an exclusive flock on
// the sidecar path+".lock", which holds "pid host". The kernel drops it
// when the holder dies, however it dies, so that no lock is ever stale.
// The log itself is not locked: Open may replace it by a rename.
//
// The lock file is rewritten only when it is one: a symbolic link is not
// followed, and a file that is not a regular file of one link holding a
// holder's line (or nothing) is refused, never truncated.
func lock(path string) (*os.File, error) {
	name := path + ".lock"
	for range 100 {
		if isSymlink(name) { // noFollow is the check without a race, where there is one
			return nil, fmt.Errorf("jsonl: locking %s: %s is a symbolic link, not a lock file: not following it", path, name)
		}
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|noFollow|syscall.O_NONBLOCK, 0o644)
		if err != nil {
			return nil, fmt.Errorf("jsonl: locking %s: %w", path, err)
		}
		if err := checkLockFile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("jsonl: locking %s: %s %v: not touching it", path, name, err)
		}
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("jsonl: locking %s: %w", path, err)
		}
		if !ok {
			e := readHolder(f)
			f.Close()
			e.Path = path
			return nil, e
		}
		// A holder that closed removes the file (see unlock): if it did
		// so after we opened it, we hold a lock no one else will see.
		fi, err := f.Stat()
		pi, perr := os.Lstat(name)
		if err != nil || perr != nil || !os.SameFile(fi, pi) {
			f.Close()
			continue
		}
		host, _ := os.Hostname()
		err = f.Truncate(0)
		if err == nil {
			_, err = f.WriteAt(fmt.Appendf(nil, "%d %s\n", os.Getpid(), host), 0)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("jsonl: locking %s: %w", path, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("jsonl: locking %s: %s keeps being replaced", path, name)
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

// readHolder reads the holder a locked lock file names.
func readHolder(f *os.File) *LockedError {
	b, _ := io.ReadAll(io.LimitReader(f, maxLockFile))
	e := &LockedError{}
	fmt.Sscanf(string(b), "%d %s", &e.PID, &e.Host)
	return e
}

func isSymlink(name string) bool {
	st, err := os.Lstat(name)
	return err == nil && st.Mode()&os.ModeSymlink != 0
}

// unlock removes the lock file while it still holds the lock, then drops
// it: a writer waiting on the old file sees it gone and starts again.
func unlock(path string, f *os.File) error {
	if f == nil {
		return nil
	}
	os.Remove(path + ".lock") // best effort: a file left behind is not a lock
	return f.Close()
}
