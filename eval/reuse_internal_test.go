package eval

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/proctor-evals/proctor/sink/jsonl"
)

// FuzzWindowReader: reading lines through the window gives what one read
// per line gives, for any file and offsets in any order.
func FuzzWindowReader(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":2}\n"), []byte{0, 8, 0})
	f.Add(bytes.Repeat([]byte("x"), 5000), []byte{0, 1, 2})
	f.Add(append(bytes.Repeat([]byte("y"), windowSize+10), '\n', 'z', '\n'), []byte{0, 255})
	f.Fuzz(func(t *testing.T, data []byte, offsets []byte) {
		path := filepath.Join(t.TempDir(), "store")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		w := &windowReader{f: file}
		for _, o := range offsets {
			off := int64(o) * int64(len(data)) / 256
			want, werr := jsonl.ReadLineFrom(file, off, nil)
			got, gerr := w.lineAt(off)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("offset %d: errors differ: %v and %v", off, werr, gerr)
			}
			if werr == nil && !bytes.Equal(want, got) {
				t.Fatalf("offset %d: %q, want %q", off, got, want)
			}
		}
	})
}
