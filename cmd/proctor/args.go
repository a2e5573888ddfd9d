package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/proctor-evals/proctor/internal/sidecar"
)

// logArgs drops from the paths a command was given the files that are
// another log's neighbours (its transcript store, manifest or lock) when
// that log exists, with a note on stderr for each, so that
// `proctor merge -o runs/run.jsonl runs/shard-*.jsonl` and
// `proctor report runs/*.jsonl` read the logs only.
func logArgs(paths []string, stderr io.Writer) ([]string, error) {
	var logs []string
	for _, p := range paths {
		if log := neighbourOf(p); log != "" {
			fmt.Fprintf(stderr, "note: skipping %s, a file of the log %s\n", p, log)
			continue
		}
		logs = append(logs, p)
	}
	if len(logs) == 0 {
		return nil, usageError("want a log: %s are files beside logs, not logs", strings.Join(paths, ", "))
	}
	return logs, nil
}

// neighbourOf returns the log whose file beside it (internal/sidecar)
// path is, when that log exists, or "".
func neighbourOf(path string) string {
	log, _, ok := sidecar.LogOf(path)
	if !ok {
		return ""
	}
	if st, err := os.Stat(log); err == nil && st.Mode().IsRegular() {
		return log
	}
	return ""
}
