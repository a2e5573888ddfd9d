package jsonl

import (
	"fmt"
	"os"

	"github.com/proctor-evals/proctor/internal/filelock"
)

// LockedError reports a log that another writer holds: one writer per
// log, whether the other is a process on this machine or a Writer in this
// one. Its fields: Path (the log), PID (the holder's process ID; 0 if it
// had not written it yet) and Host (the holder's host name).
type LockedError = filelock.LockedError

// lock takes the writer's lock of the log at path (internal/filelock: a
// sidecar path+".lock" the kernel unlocks when its holder dies, never
// followed through a symbolic link nor truncated unless it is one). The
// log itself is not locked: Open may replace it by a rename.
func lock(path string) (*os.File, error) {
	f, err := filelock.Lock(path)
	if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	return f, nil
}

func unlock(path string, f *os.File) error { return filelock.Unlock(path, f) }
