package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness/replay"
)

// FuzzJSONL loads arbitrary files of recorded conversations: no panic, an
// error is a *dataset.RowError naming the file and a line, and every case
// has a valid ID, JSON input and output, and hex span IDs.
func FuzzJSONL(f *testing.F) {
	for _, s := range []string{
		conversations,
		`{"id":"a","input":1,"output":null}`,
		`{"input":1,"output":2,"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331","time":"2026-01-02T03:04:05Z"}`,
		"{\"id\":\"a\",\"input\":\"\\ud800\",\"output\":[],\"tags\":{\"\\u0000\":\"x\"}}\n\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "conversations.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for s, err := range replay.JSONL(path, nil).Samples(context.Background()) {
			if err != nil {
				var re *dataset.RowError
				if !errors.As(err, &re) || re.File != path || re.Line < 1 || !strings.Contains(err.Error(), path+":") {
					t.Fatalf("error does not name file and line: %v", err)
				}
				return
			}
			if err := dataset.CheckID(s.ID); err != nil {
				t.Fatal(err)
			}
			c := s.Input
			if !json.Valid(c.Input) || c.Output != nil && !json.Valid(c.Output) {
				t.Fatalf("input or output is not JSON: %q %q", c.Input, c.Output)
			}
			if len(c.TraceID) != 0 && len(c.TraceID) != 32 || len(c.SpanID) != 0 && len(c.SpanID) != 16 || c.TraceID != strings.ToLower(c.TraceID) {
				t.Fatalf("bad IDs %q %q", c.TraceID, c.SpanID)
			}
			if _, err := json.Marshal(c); err != nil {
				t.Fatal(err)
			}
		}
	})
}
