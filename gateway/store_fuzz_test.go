package gateway

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proctor-evals/proctor/sink/jsonl"
)

// FuzzStore: on any bytes, opening a call store never panics; it fails
// with a corrupt line and leaves the file as it was, or it recovers: the
// file is then its committed lines only (a torn tail cut off), which a
// second open reads without a torn tail, and every line it indexed
// decodes and encodes back to the same call.
func FuzzStore(f *testing.F) {
	a, _ := json.Marshal(stored("x", 0, "a"))
	b, _ := json.Marshal(stored("x", 1, "b"))
	ev := stored("y", 0, "c")
	ev.Body, ev.Events = "", []string{"data: {}\n\n", "data: [DONE]\n\n"}
	e, _ := json.Marshal(ev)
	for _, s := range []string{"", "\n", "x", "{", string(a), string(a) + "\n", string(a) + "\n" + string(b) + "\n",
		string(a) + "\n" + string(b[:30]), string(a) + "\njunk\n" + string(b) + "\n", string(e) + "\n" + string(a) + "\n",
		`{"sample":"x","epoch":0,"seq":5,"req":"` + string(a[40:104]) + `","api":"messages","status":200,"usage":{}}` + "\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "run.calls.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, torn, err := openStore(path)
		if err != nil {
			if _, ok := errors.AsType[*jsonl.CorruptError](err); !ok {
				t.Fatalf("not a corrupt line: %v", err)
			}
			after, _ := os.ReadFile(path)
			if string(after) != string(data) {
				t.Fatal("a failed open changed the file")
			}
			return
		}
		for _, chain := range s.chains {
			for _, ref := range chain {
				c, err := s.read(ref.off)
				if err != nil {
					t.Fatal(err)
				}
				line, _ := json.Marshal(c)
				back, err := decodeStoredCall(line)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				if d := cmp.Diff(c, back); d != "" {
					t.Fatal(d)
				}
			}
		}
		s.close()
		after, _ := os.ReadFile(path)
		if torn == nil && string(after) != string(data) || torn != nil && string(after) != string(data[:torn.Offset]) {
			t.Fatalf("the file is %q, from %q (torn %v)", after, data, torn)
		}
		s, torn, err = openStore(path)
		if err != nil || torn != nil {
			t.Fatalf("reopened: %v, torn %v", err, torn)
		}
		s.close()
	})
}
