package cluster

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sink"
)

func TestResultRoundTrip(t *testing.T) {
	t.Parallel()
	f := eval.Finished{
		Record: sink.Record{Schema: 1, RunID: "r", Eval: "e", SampleID: "a.b c/\n", Epoch: 2, Status: sink.Pass, Score: 1,
			Output: json.RawMessage(`{"x":"line\nbreak"}`), StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Worker: "h:1"},
		Transcript: []harness.Event{{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Kind: "note", Output: json.RawMessage(`"hi"`)}},
	}
	b, err := encodeResult(nil, &f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeResult(b, f.Record.SampleID, f.Record.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(f, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if _, err := decodeResult(b, f.Record.SampleID, 3); err == nil || !strings.Contains(err.Error(), "published as") {
		t.Errorf("a result published on another episode's subject was accepted (err %v)", err)
	}
}

func TestNamesAreValidSubjectTokens(t *testing.T) {
	t.Parallel()
	n := namesFor("run 1.*>/x")
	if n.id != "run_1____x" {
		t.Errorf("sanitized run ID %q", n.id)
	}
	for _, id := range []string{"q1", "a.b", "*", ">", "spaces and\ttabs", "ünï/çødé", strings.Repeat("z", 300)} {
		subj := n.resultSubject(id, 4)
		rest := strings.TrimPrefix(subj, n.resSubj+".")
		if strings.ContainsAny(rest, " \t*>") || strings.Count(rest, ".") != 1 {
			t.Errorf("sample %q: subject %q is not two tokens", id, subj)
		}
		gotID, ep, err := n.parseResultSubject(subj)
		if err != nil || gotID != id || ep != 4 {
			t.Errorf("parse(%q) = %q, %d, %v", subj, gotID, ep, err)
		}
		if w, err := n.parseWorkSubject(n.workSubject(id)); err != nil || w != id {
			t.Errorf("work subject of %q parses as %q, %v", id, w, err)
		}
	}
}

// FuzzDecodeResult: a result message is outside input (any process with
// the run's credentials can publish one); decoding never panics, and what
// it accepts is the episode its subject names.
func FuzzDecodeResult(f *testing.F) {
	rec := sink.Record{Schema: 1, SampleID: "q1", Epoch: 0, Status: sink.Fail}
	line := rec.AppendJSON(nil)
	f.Add(line)
	f.Add(append(append(line, '\n'), `[{"time":"2026-01-01T00:00:00Z","kind":"note"}]`...))
	f.Add([]byte(`{"sample_id":"q1","epoch":0,"status":"pass"}`))
	f.Add([]byte("\n[]"))
	f.Add([]byte(`{"sample_id":"q1","epochs":[0,2],"tags":["a","b"]}`))
	f.Add([]byte(`{"schema":1,"eval":"e","sample_id":"q1","epoch":0,"status":"pass","score":7,"cost_usd":-1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := decodeResult(body, "q1", 0)
		if err == nil && (got.Record.SampleID != "q1" || got.Record.Epoch != 0) {
			t.Fatalf("accepted a result for %q epoch %d", got.Record.SampleID, got.Record.Epoch)
		}
		if err == nil && checkRecord(&got.Record, got.Record.Eval) == nil {
			r := got.Record
			if !(r.Score >= 0 && r.Score <= 1) || !(r.CostUSD >= 0) || r.InputTokens < 0 || r.OutputTokens < 0 {
				t.Fatalf("checkRecord accepted %+v", r)
			}
		}
		if a, err := decodeAssignment(body, "q1"); err == nil && (a.SampleID != "q1" || len(a.Tags) != len(a.Epochs)) {
			t.Fatalf("accepted work %+v for q1", a)
		}
	})
}
