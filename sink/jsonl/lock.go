package jsonl

import (
	"fmt"
	"io"
	"os"
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
func lock(path string) (*os.File, error) {
	name := path + ".lock"
	for range 100 {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("jsonl: locking %s: %w", path, err)
		}
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("jsonl: locking %s: %w", path, err)
		}
		if !ok {
			b, _ := io.ReadAll(io.LimitReader(f, 512))
			f.Close()
			e := &LockedError{Path: path}
			fmt.Sscanf(string(b), "%d %s", &e.PID, &e.Host)
			return nil, e
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
		if err := f.Truncate(0); err == nil {
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

// unlock removes the lock file while it still holds the lock, then drops
// it: a writer waiting on the old file sees it gone and starts again.
func unlock(path string, f *os.File) error {
	if f == nil {
		return nil
	}
	os.Remove(path + ".lock") // best effort: a file left behind is not a lock
	return f.Close()
}
