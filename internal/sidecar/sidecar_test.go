package sidecar_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proctor-evals/proctor/internal/sidecar"
)

// TestDocsListEverySidecar: docs/files.md's table is the table of Files,
// row for row: a sidecar added in one place and not the other fails.
func TestDocsListEverySidecar(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "files.md"))
	if err != nil {
		t.Fatal(err)
	}
	var got [][3]string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			t.Fatalf("docs/files.md: a row of %d cells, want 3: %s", len(cells), line)
		}
		got = append(got, [3]string{strings.Trim(cells[0], "`"), cells[1], cells[2]})
	}
	var want [][3]string
	for _, f := range sidecar.Files {
		name := "run" + f.Suffix
		if f.Rule == sidecar.Whole {
			name = "run.jsonl" + f.Suffix
		}
		want = append(want, [3]string{name, f.What, f.Writer})
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("docs/files.md's table (-sidecar.Files +docs):\n%s", d)
	}
}

// TestPathsFollowTheTable: each function names its file as the table
// does, and LogOf finds the log again from every sidecar's path.
func TestPathsFollowTheTable(t *testing.T) {
	log := filepath.Join("runs", "agent.v2.jsonl")
	byFunc := []string{sidecar.Manifest(log), sidecar.Transcripts(log), filepath.Join("runs", sidecar.CompactedTranscripts(log, 12)),
		sidecar.Token(log), sidecar.NATSStore(log), sidecar.Lock(log), sidecar.Reviews(log), sidecar.Queue(log), sidecar.Calls(log), sidecar.Oracle(log)}
	if len(byFunc) != len(sidecar.Files) {
		t.Fatalf("%d functions for %d files: a file without a function, or one without a row", len(byFunc), len(sidecar.Files))
	}
	for i, f := range sidecar.Files {
		if p := f.Path(log, 12); p != byFunc[i] {
			t.Errorf("%s: the table says %s, its function %s", f.Suffix, p, byFunc[i])
		}
		back, which, ok := sidecar.LogOf(byFunc[i])
		if !ok || back != log || which.Suffix != f.Suffix {
			t.Errorf("LogOf(%s) = %q, %q, %v; want %s, %s", byFunc[i], back, which.Suffix, ok, log, f.Suffix)
		}
	}
	for _, p := range []string{log, "runs/x.traces.c.jsonl", "runs/x.tracesc1.jsonl", ".lock", "runs/.manifest.json"} {
		if l, _, ok := sidecar.LogOf(p); ok {
			t.Errorf("LogOf(%s) = %s: not a sidecar", p, l)
		}
	}
}
