package report_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
)

// records yields n records of samples s0..s(n-1), passing when pass says.
func records(n int, pass func(i int) bool) func(yield func(sink.Record, error) bool) {
	return func(yield func(sink.Record, error) bool) {
		for i := range n {
			st := sink.Fail
			if pass(i) {
				st = sink.Pass
			}
			if !yield(sink.Record{SampleID: fmt.Sprintf("s%d", i), Status: st}, nil) {
				return
			}
		}
	}
}

// TestSequentialOfAManifest: the gate a manifest names decides over a log's
// records, with its seed and epochs; a baseline that cannot be read is the
// report's problem, not an error.
func TestSequentialOfAManifest(t *testing.T) {
	t.Parallel()
	id := func(i int) string { return fmt.Sprintf("s%d", i) }
	var order []string
	for _, i := range report.ClaimOrder(7, 1000, id) {
		order = append(order, id(int(i)))
	}
	gate, _ := json.Marshal(map[string]any{"bar": 0.7, "alpha": 0.05, "order": order})
	m := &manifest.Manifest{Seed: "7", Epochs: 1, Dataset: manifest.DatasetIdentity{Samples: 1000}, Sequential: gate}
	seq, err := report.SequentialOf(m)
	if err != nil || seq == nil || seq.Seed != 7 || seq.Samples != 1000 {
		t.Fatalf("SequentialOf: %+v, %v", seq, err)
	}
	// The first 300 samples in claim order have records.
	inOrder := func(yield func(sink.Record, error) bool) {
		for k, id := range order[:300] {
			st := sink.Pass
			if k%10 == 0 {
				st = sink.Fail
			}
			if !yield(sink.Record{SampleID: id, Status: st}, nil) {
				return
			}
		}
	}
	rep, err := report.FromRecords(inOrder, &report.Options{Sequential: seq, Resamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Sequential
	if got.Decision != report.DecidedPass || got.Samples >= 300 || got.NotRun != 700 || got.Bounds.Lo < 0.7 {
		t.Errorf("%+v", got)
	}

	// Without the claim order on record, records of 300 of 1000 samples
	// cannot tell a claimed sample that left no record: nothing is decided.
	m.Sequential = json.RawMessage(`{"bar":0.7,"alpha":0.05}`)
	if seq, err = report.SequentialOf(m); err != nil {
		t.Fatal(err)
	}
	rep, err = report.FromRecords(inOrder, &report.Options{Sequential: seq, Resamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Sequential; got.Decision != report.Undecided || !strings.Contains(got.Problem, "does not record its claim order") {
		t.Errorf("without the claim order: %+v", got)
	}

	m.Sequential = json.RawMessage(`{"baseline":"/nonexistent/base.jsonl"}`)
	seq, err = report.SequentialOf(m)
	if err != nil {
		t.Fatal(err)
	}
	rep, err = report.FromRecords(records(10, func(int) bool { return true }), &report.Options{Sequential: seq, Resamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sequential.Decision != report.Undecided || rep.Sequential.Problem == "" {
		t.Errorf("an unreadable baseline decides nothing, and says why: %+v", rep.Sequential)
	}

	m.Sequential = nil
	if seq, err := report.SequentialOf(m); seq != nil || err != nil {
		t.Errorf("a manifest without a gate: %+v, %v", seq, err)
	}
}

// FuzzSequentialOf: whatever a manifest's gate and seed hold, reading it
// and deciding it over records never panics.
func FuzzSequentialOf(f *testing.F) {
	f.Add([]byte(`{"bar":0.7,"alpha":0.05}`), "7", 1)
	f.Add([]byte(`{"bar":0.7,"method":"empirical-bernstein"}`), "18446744073709551615", 3)
	f.Add([]byte(`{"bar":1e308,"alpha":-1}`), "x", -2)
	f.Add([]byte(`{"baseline":"","margin":0.5}`), "0", 0)
	f.Add([]byte(`{"bar":0.7,"order":["s1","s0","s1","nope"]}`), "7", 1)
	f.Add([]byte(`{"baseline":"b.jsonl","margin":0.1,"base":{"s0":[0,1],"s1":[0.5,0.25]},"order":["s0","s1"]}`), "7", 2)
	f.Fuzz(func(t *testing.T, raw []byte, seed string, epochs int) {
		m := &manifest.Manifest{Seed: seed, Epochs: epochs, Sequential: raw}
		seq, err := report.SequentialOf(m)
		if err != nil || seq == nil {
			return
		}
		rep, err := report.FromRecords(records(40, func(i int) bool { return i%3 != 0 }), &report.Options{Sequential: seq, Resamples: -1})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Sequential == nil {
			t.Fatal("a gate read from a manifest reports a decision")
		}
	})
}
