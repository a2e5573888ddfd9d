package jsonl

import "github.com/proctor-evals/proctor/internal/filelock"

// InUse returns a *LockedError when a writer holds the log at path (a run
// still writing it), and nil otherwise. It takes no lock that it could
// keep and creates no file: tools that read finished logs only (the
// history catalog) skip the logs it names.
func InUse(path string) error { return filelock.Held(path) }
