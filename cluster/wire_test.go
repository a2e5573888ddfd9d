package cluster

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/distrib"
	"github.com/proctor-evals/proctor/sink"
)

func TestResultRoundTrip(t *testing.T) {
	t.Parallel()
	f := distrib.Finished{
		Record: sink.Record{Schema: 1, RunID: "r", Eval: "e", SampleID: "a.b c/\n", Epoch: 2, Status: sink.Pass, Score: 1,
			Output: json.RawMessage(`{"x":"line\nbreak"}`), StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Worker: "h:1"},
		Transcript: []harness.Event{{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Kind: "note", Output: json.RawMessage(`"hi"`)}},
		Slot:       2,
	}
	b, err := encodeResult(nil, &f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeResult(b, f.Record.SampleID, f.Record.Epoch, epochSlot)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(f, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if _, err := decodeResult(b, f.Record.SampleID, 3, epochSlot); err == nil || !strings.Contains(err.Error(), "sent as") {
		t.Errorf("a result sent as another episode's was accepted (err %v)", err)
	}
}

// epochSlot is the slot of a record of an eval without variants.
func epochSlot(r *sink.Record) (int, bool) { return r.Epoch, r.Variant == "" }

// TestResultOfAVariantIsCheckedBySlot: with variants, a result's entry
// names its slot (variant × epochs + epoch), and a record of another
// variant sent under it is refused.
func TestResultOfAVariantIsCheckedBySlot(t *testing.T) {
	t.Parallel()
	const epochs = 2
	slot := func(r *sink.Record) (int, bool) {
		v := map[string]int{"a": 0, "b": 1}[r.Variant]
		return v*epochs + r.Epoch, r.Variant == "a" || r.Variant == "b"
	}
	f := distrib.Finished{Record: sink.Record{Schema: 1, Eval: "e", Variant: "b", SampleID: "s", Epoch: 1, Status: sink.Pass}, Slot: 3}
	b, err := encodeResult(nil, &f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeResult(b, "s", 3, slot)
	if err != nil || got.Slot != 3 || got.Record.Variant != "b" {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if _, err := decodeResult(b, "s", 1, slot); err == nil || !strings.Contains(err.Error(), `variant "b"`) {
		t.Errorf("variant b's record sent as variant a's slot was accepted (err %v)", err)
	}
}

// A batch carries any sample ID a dataset allows, inline bodies of any
// bytes and objects' names, in order.
func TestBatchRoundTrip(t *testing.T) {
	t.Parallel()
	want := []entry{
		{SampleID: "q1", Epoch: 0, Tag: "t0", Body: []byte("{}\n[]")},
		{SampleID: "a b\nc -", Epoch: 12, Tag: "t1", Body: []byte("x y\n\n1 2 3 4 5 6\n")},
		{SampleID: "ünï/çødé", Epoch: 3, Tag: "t2", Blob: "b.3.h-1.99", Digest: "abcd"},
		{SampleID: "*", Epoch: 1, Body: []byte{}},
	}
	var b []byte
	for i := range want {
		b = appendEntry(b, &want[i])
	}
	got, err := decodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	for _, bad := range []string{"", "cTE 0 t - - 5\nabc", "cTE 0 t - - 0", "cTE -1 t - - 0\n", "cTE 0 t b - 0\n", "cTE 0 t b d 2\nxx", "c!E 0 t - - 0\n", "cTE 0 t - -\n"} {
		if _, err := decodeBatch([]byte(bad)); err == nil {
			t.Errorf("decodeBatch(%q) accepted it", bad)
		}
	}
}

func TestNamesAreValidSubjectTokens(t *testing.T) {
	t.Parallel()
	n := namesFor("run 1.*>/x")
	if n.id != "run_1____x" {
		t.Errorf("sanitized run ID %q", n.id)
	}
	for _, id := range []string{"q1", "a.b", "*", ">", "spaces and\ttabs", "ünï/çødé", strings.Repeat("z", 300)} {
		subj := n.workSubject(id)
		rest := strings.TrimPrefix(subj, n.workSubj+".")
		if strings.ContainsAny(rest, " \t*>.") {
			t.Errorf("sample %q: subject %q is not one token", id, subj)
		}
		if w, err := n.parseWorkSubject(subj); err != nil || w != id {
			t.Errorf("work subject of %q parses as %q, %v", id, w, err)
		}
	}
	if subj := n.resultsSubject("host.a b:12"); subj != n.resSubj+".host-a-b-12" {
		t.Errorf("results subject %q", subj)
	}
}

// FuzzDecodeBatch: a results message is outside input (any process with
// the run's credentials can publish one); decoding never panics, what it
// accepts encodes to a batch that decodes again, and each body is inline
// or an object with its digest.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(appendEntry(nil, &entry{SampleID: "q1", Epoch: 2, Tag: "t", Body: []byte("{}")}))
	f.Add(appendEntry(appendEntry(nil, &entry{SampleID: "q1", Tag: "t", Blob: "o", Digest: "d"}), &entry{SampleID: "x", Epoch: 1}))
	f.Add([]byte("cTE 0 t - - 3\nabc"))
	f.Add([]byte("cTE 0 t - - 99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := decodeBatch(data)
		if err != nil {
			return
		}
		var b []byte
		for i := range entries {
			e := &entries[i]
			if e.Epoch < 0 || (e.Blob == "") != (e.Digest == "") || e.Blob != "" && len(e.Body) > 0 {
				t.Fatalf("accepted entry %+v", e)
			}
			b = appendEntry(b, e)
		}
		if again, err := decodeBatch(b); err != nil || len(again) != len(entries) {
			t.Fatalf("re-encoded batch: %d entries, %v; was %d", len(again), err, len(entries))
		}
	})
}

// FuzzDecodeResult: a result message is outside input (any process with
// the run's credentials can publish one); decoding never panics, and what
// it accepts is the episode its entry names.
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
		got, err := decodeResult(body, "q1", 0, epochSlot)
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
