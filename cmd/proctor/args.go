package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// neighbours are the files proctor keeps beside a log NAME.jsonl, by their
// suffix after NAME: a glob over a runs directory (runs/*.jsonl) matches
// some of them.
var neighbours = []string{".traces.jsonl", ".manifest.json", ".jsonl.lock"}

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

// neighbourOf returns the log whose neighbour path is, or "".
func neighbourOf(path string) string {
	for _, suffix := range neighbours {
		name, ok := strings.CutSuffix(path, suffix)
		if !ok || name == "" || strings.HasSuffix(name, "/") {
			continue
		}
		log := name + ".jsonl"
		if st, err := os.Stat(log); err == nil && st.Mode().IsRegular() {
			return log
		}
	}
	return ""
}
