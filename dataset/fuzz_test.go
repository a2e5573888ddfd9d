package dataset_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/proctor-evals/proctor/dataset"
)

// checkLoaded asserts what every loader promises, whatever its input: it
// returns (a panic fails the fuzz target), an error is a *RowError naming
// the file and a line, and every sample it yields has a valid ID and tags.
func checkLoaded[T any](t *testing.T, path string, d dataset.Dataset[T]) []dataset.Sample[T] {
	t.Helper()
	var got []dataset.Sample[T]
	for s, err := range d.Samples(context.Background()) {
		if err != nil {
			var re *dataset.RowError
			if !errors.As(err, &re) {
				t.Fatalf("error is not a *RowError: %v", err)
			}
			if re.File != path || re.Line < 1 || !strings.Contains(err.Error(), path+":") {
				t.Fatalf("error does not name file and line: %+v: %v", re, err)
			}
			return got
		}
		if err := dataset.CheckID(s.ID); err != nil {
			t.Fatalf("yielded a sample with a bad ID: %v", err)
		}
		for k, v := range s.Tags {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				t.Fatalf("tag %q=%q is not valid UTF-8", k, v)
			}
		}
		got = append(got, s)
	}
	return got
}

// fuzzFile writes data to dir/name. A fuzz function's calls are sequential
// within a process, so one directory per target serves them all.
func fuzzFile(t *testing.T, dir, name string, data []byte) string {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func FuzzJSONL(f *testing.F) {
	for _, seed := range []string{
		`{"id":"a","input":{"q":"1+1","a":2},"tags":{"level":"easy"}}` + "\n\n" + `{"id":"b","input":{"q":"2+2","a":4}}`,
		"\uFEFF" + `{"id":"a"}`,
		`{"id":"a\u0000"}`,
		`{"id":"a","input":{"q":"x","a":"two"}}`,
		`{"id":"a"} {"id":"b"}`,
		"{\"id\":\"\xff\"}",
		`{"instance_id":7,"repo":"r","q":"x","a":1,"meta":{"k":[1]}}`,
		`{"instance_id":"x","repo":null,"q":"\ud800"}`,
		"null\n[]\n\"s\"",
		`{"id":"` + strings.Repeat("é", 600) + `"}`,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, flat bool) {
		path := fuzzFile(t, dir, "d.jsonl", data)
		d := dataset.JSONL[task]{Path: path, MaxLineBytes: 4096}
		if flat {
			d.Mapping = &dataset.Mapping{ID: "instance_id", Tags: []string{"repo"}}
			d.AllowUnknownFields = true
		}
		got := checkLoaded(t, path, d)
		if flat {
			return
		}
		// What loads in proctor's shape reloads the same from its own
		// encoding: IDs and tags are carried byte for byte.
		var b strings.Builder
		for _, s := range got {
			line, err := json.Marshal(map[string]any{"id": s.ID, "input": s.Input, "tags": s.Tags})
			if err != nil {
				t.Fatal(err)
			}
			b.Write(append(line, '\n'))
		}
		again, err := dataset.Collect(context.Background(), dataset.JSONL[task]{Path: fuzzFile(t, dir, "again.jsonl", []byte(b.String()))})
		if err != nil {
			t.Fatalf("re-encoded samples do not load: %v", err)
		}
		if len(again) != len(got) {
			t.Fatalf("reloaded %d samples, want %d", len(again), len(got))
		}
		for i := range got {
			if again[i].ID != got[i].ID || len(again[i].Tags) != len(got[i].Tags) {
				t.Fatalf("sample %d: reloaded %+v, want %+v", i, again[i], got[i])
			}
			for k, v := range got[i].Tags {
				if again[i].Tags[k] != v {
					t.Fatalf("sample %d tag %q: reloaded %q, want %q", i, k, again[i].Tags[k], v)
				}
			}
		}
	})
}

func FuzzCSV(f *testing.F) {
	for _, seed := range []string{
		"id,question,answer,level\na,\"1+1, quoted\",2,easy\nb,2+2,4,hard\n",
		"id,question,answer,level\n\"a\"x,q,2,easy\n",
		"id,question,answer,level\na,\"q,2,easy\n",
		"id,question,answer,level\nb,q\n",
		"\uFEFFid,question,answer,level\na,q,2,easy\r\n",
		"id,question,answer,level\na,q\xff,2,easy\n",
		"id,id\na,b\n",
		"id,question,answer,level\n\"a\nb\",q,2,easy\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := fuzzFile(t, dir, "d.csv", data)
		checkLoaded(t, path, dataset.CSV[task]{Path: path, Parse: parseRow})
	})
}
