package catalog_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/history/catalog"
)

// FuzzRead: a catalog file of any bytes reads as rows or as an error,
// never a panic; Update never replaces it unless it is a catalog.
func FuzzRead(f *testing.F) {
	dir := f.TempDir()
	writeRun(f, filepath.Join(dir, "a.jsonl"), "e", "r1", time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 10, 5, "h1")
	if _, err := catalog.Update(dir); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, catalog.Dir, catalog.RunsFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("PAR1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, catalog.Dir), 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, catalog.Dir, catalog.RunsFile)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		runs, err := catalog.Read(dir)
		if err != nil && runs != nil {
			t.Fatalf("rows and an error: %v", err)
		}
	})
}
