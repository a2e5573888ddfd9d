package jsonl_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// FuzzOpen: on any bytes Open never panics, and either fails leaving the
// file as it was, or recovers a log whose committed records are exactly
// those Records returned before, which Records then reads without error.
// Chunks of 64 bytes make the parallel scan cross chunk boundaries.
func FuzzOpen(f *testing.F) {
	old := jsonl.SetChunkSize(64)
	f.Cleanup(func() { jsonl.SetChunkSize(old) })
	a, b, e := line(rec(0, sink.Pass)), line(rec(1, sink.Fail)), line(rec(2, sink.Error))
	d := line(distributed(3, sink.Pass, true))
	for _, s := range []string{
		"", "\n", "x", "x\n", "{", `{"schema":`, a, a + b + e, a + b[:20], a + "\n\n" + b, a + "junk\n" + b,
		a + `{"schema":1}` + "\n", `{"schema":2}` + "\n", `{"a":1}`, a + b + "\x00\x00",
		a + `{"schema":1,"run_id":"other"}` + "\n", " " + a, a + "   ", "\xef\xbb\xbf" + a,
		a + d + e, a + d[:len(d)-30], a + d[:len(d)-1] + `,"worker":"w"}` + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "log.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var before []sink.Record
		var readErr error
		for r, err := range jsonl.Records(path) {
			if err != nil {
				readErr = err
				break
			}
			before = append(before, r)
		}
		w, recov, err := jsonl.Open(path, nil)
		if err != nil {
			after, rerr := os.ReadFile(path)
			if rerr != nil || !bytes.Equal(after, data) {
				t.Fatalf("Open failed (%v) and changed the file:\n%q\n%q", err, data, after)
			}
			return
		}
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		var torn *jsonl.TornTailError
		if readErr != nil && !errors.As(readErr, &torn) {
			t.Fatalf("Open accepted a log Records rejects with %v", readErr)
		}
		if (recov.Torn != nil) != (readErr != nil) {
			t.Fatalf("Open's torn tail %v, Records' %v", recov.Torn, readErr)
		}
		if recov.Records != len(before) {
			t.Fatalf("Open counted %d committed records, Records read %d", recov.Records, len(before))
		}
		var after []sink.Record
		for r, err := range jsonl.Records(path) {
			if err != nil {
				t.Fatalf("the recovered log does not read back: %v", err)
			}
			after = append(after, r)
		}
		if diff := cmp.Diff(before, after); diff != "" {
			t.Fatalf("records before and after Open (-before +after):\n%s", diff)
		}
		done := map[sink.Key]struct{}{}
		for _, r := range before {
			if r.Status != sink.Error {
				done[r.Key()] = struct{}{}
			}
		}
		if diff := cmp.Diff(done, recov.Done); diff != "" {
			t.Fatalf("Done (-from Records +Open):\n%s", diff)
		}
	})
}

// FuzzRecordsParallel: Entries (which decodes whole lines on every core,
// then reads on one line at a time from the first line that is not a
// committed record) yields exactly what the sequential reader, ReadEntries,
// yields from the same bytes: the same entries, offsets and error. Chunks
// of 64 bytes make the parallel part cross chunk boundaries.
func FuzzRecordsParallel(f *testing.F) {
	old := jsonl.SetChunkSize(64)
	f.Cleanup(func() { jsonl.SetChunkSize(old) })
	a, b, e := line(rec(0, sink.Pass)), line(rec(1, sink.Fail)), line(rec(2, sink.Error))
	for _, s := range []string{
		"", "\n", "x\n", a, a + b + e, a + b[:20], a + "\n\n" + b, a + "junk\n" + b, a + "junk\n",
		`{"schema":2}` + "\n" + a, a + `{"schema":2}` + "\n", a + b + "\x00\x00", " " + a + b + e + a + b,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "log.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		read := func(seq func(func(jsonl.Entry, error) bool)) (out []jsonl.Entry, errText string) {
			for e, err := range seq {
				if err != nil {
					return out, err.Error()
				}
				out = append(out, e)
			}
			return out, ""
		}
		got, gotErr := read(jsonl.Entries(path))
		want, wantErr := read(jsonl.ReadEntries(bytes.NewReader(data), path))
		if diff := cmp.Diff(want, got); diff != "" || gotErr != wantErr {
			t.Fatalf("Entries (-sequential +parallel):\n%s\nerror %q, sequential %q", diff, gotErr, wantErr)
		}
	})
}
