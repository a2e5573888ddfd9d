package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// FuzzImportShared: whatever lines a fleet's copy of the store returns
// for an episode (another process's, over the network), importing them
// never panics and never corrupts the local store: they are all added or
// none is, the store then reopens whole (no corrupt line, no torn tail),
// and the episode's chain holds no more calls than lines given.
func FuzzImportShared(f *testing.F) {
	a, _ := json.Marshal(stored("x", 0, "a"))
	b, _ := json.Marshal(stored("x", 1, "b"))
	other, _ := json.Marshal(stored("y", 0, "c"))
	for _, s := range []string{string(a) + "\x00" + string(b), string(a) + "\x00" + string(other), "{\n\"sample\":\"x\"}", string(b),
		strings.Replace(string(a), `,"epoch"`, "\n,\"epoch\"", 1) + "\x00" + string(b), "junk"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "run.calls.jsonl")
		s, _, err := openStore(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(data, []byte{0})
		s.shared = &StoreShare{Load: func(CallKey) ([][]byte, error) { return lines, nil }}
		key := CallKey{Sample: "x"}
		err = s.importShared(key)
		n := len(s.chain(key))
		s.close()
		if err == nil && n > len(lines) || err != nil && n != 0 {
			t.Fatalf("%d lines, error %v: a chain of %d", len(lines), err, n)
		}
		s, torn, err := openStore(path)
		if err != nil || torn != nil {
			t.Fatalf("reopened: %v, torn %v", err, torn)
		}
		if got := len(s.chain(key)); got != n {
			t.Fatalf("reopened: a chain of %d, imported %d", got, n)
		}
		s.close()
	})
}
