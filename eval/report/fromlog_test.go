package report_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// sameReport compares two reports exactly: their JSON (every statistic,
// failures and warnings, in order) and their per-sample results.
func sameReport(t *testing.T, want, got *report.Report, wantErr, gotErr error) {
	t.Helper()
	if (wantErr == nil) != (gotErr == nil) || wantErr != nil && wantErr.Error() != gotErr.Error() {
		t.Fatalf("FromLog's error %v, FromRecords' %v", gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(w), string(g)); d != "" {
		t.Fatalf("FromLog's report differs from FromRecords' (-FromRecords +FromLog):\n%s", d)
	}
	if d := cmp.Diff(want.SampleResults(), got.SampleResults()); d != "" {
		t.Fatalf("FromLog's sample results differ (-FromRecords +FromLog):\n%s", d)
	}
}

// FuzzFromLog: FromLog (every core, a light decode) gives exactly the
// report FromRecords(jsonl.Records(path)) gives, on whole logs and on any
// bytes at all. Chunks of 256 bytes make its parallel part cross chunk
// boundaries.
func FuzzFromLog(f *testing.F) {
	old := recordjson.ChunkSize
	recordjson.ChunkSize = 256
	f.Cleanup(func() { recordjson.ChunkSize = old })
	rng := rand.New(rand.NewPCG(1, 2))
	var log []byte
	for _, r := range randomWeightedRecords(rng, 12, 3, true) {
		log = append(r.AppendJSON(log), '\n')
	}
	f.Add(log, uint16(0))
	f.Add(log, uint16(len(log)-5))     // a torn tail
	f.Add(log, uint16(len(log)/2))     // cut in the middle
	f.Add([]byte("junk\n"), uint16(0)) // not a log
	var variants []byte                // a log of variants: the leaderboard
	for i, r := range randomWeightedRecords(rng, 12, 3, false) {
		r.Variant = []string{"a", "b", "c"}[i%3]
		variants = append(r.AppendJSON(variants), '\n')
	}
	f.Add(variants, uint16(0))
	f.Add(variants, uint16(len(variants)/3))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		if int(cut) > 0 && int(cut) < len(data) {
			data = append(data[:cut:cut], []byte("\n{\"schema\":1,\"run_id\":\"x\"}\n")...)
		}
		path := filepath.Join(t.TempDir(), "log.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want, wantErr := report.FromRecords(jsonl.Records(path), nil)
		got, gotErr := report.FromLog(path, nil)
		sameReport(t, want, got, wantErr, gotErr)
	})
}

// TestFromLogLargeLog: a log of many chunks, samples spread over them.
func TestFromLogLargeLog(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	path := filepath.Join(t.TempDir(), "log.jsonl")
	var log []byte
	for _, r := range randomWeightedRecords(rng, 2000, 5, true) {
		log = append(r.AppendJSON(log), '\n')
	}
	if err := os.WriteFile(path, log, 0o644); err != nil {
		t.Fatal(err)
	}
	want, wantErr := report.FromRecords(jsonl.Records(path), nil)
	got, gotErr := report.FromLog(path, nil)
	sameReport(t, want, got, wantErr, gotErr)
}

// TestAggregatorKeepsNoStringOfARecord: FromLog's records share the
// memory of chunks that are reused, so Add and AddAt must copy the strings
// they keep (the run's name, failures, error sources, models, sample IDs).
// Each record here is decoded sharing one buffer, overwritten after Add.
func TestAggregatorKeepsNoStringOfARecord(t *testing.T) {
	for _, variants := range []bool{false, true} {
		t.Run(fmt.Sprintf("variants=%v", variants), func(t *testing.T) { keepsNoString(t, variants) })
	}
}

// keepsNoString is TestAggregatorKeepsNoStringOfARecord, of a log of two
// variants (the leaderboard and each variant's report) or of none.
func keepsNoString(t *testing.T, variants bool) {
	var recs []sink.Record
	for s := range 40 {
		for ep := range 3 {
			r := sink.Record{Schema: 1, RunID: "run-" + strconv.Itoa(s%2), Eval: "eval", SampleID: "sample-" + strconv.Itoa(s), Epoch: ep,
				Tags: map[string]string{"k": strconv.Itoa(s % 3)}, Model: "model-" + strconv.Itoa(s%3), JudgeModel: "judge-" + strconv.Itoa(s%2),
				CostUSD: 0.01, JudgeCostUSD: 0.001, TraceID: "trace" + strconv.Itoa(s), SpanID: "span" + strconv.Itoa(ep),
				Transcript: "t.jsonl#" + strconv.Itoa(s*10+ep)}
			if variants {
				r.Variant = "variant-" + strconv.Itoa((s+ep)%2)
			}
			switch (s + ep) % 5 {
			case 0, 1:
				r.Status, r.Score = sink.Pass, 1
			case 2:
				r.Status, r.Reason = sink.Fail, "wrong answer "+strconv.Itoa(s)
			case 3:
				r.Status, r.ErrorKind, r.ErrorSource, r.Error = sink.Error, sink.ErrorKind("kind-"+strconv.Itoa(s%2)), "source-"+strconv.Itoa(s%3), "boom "+strconv.Itoa(s)
			default:
				r.Status, r.Reason = sink.Status("other-"+strconv.Itoa(s%2)), "odd "+strconv.Itoa(s)
			}
			recs = append(recs, r)
		}
	}
	want, err := report.FromRecords(func(yield func(sink.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}, &report.Options{MaxFailures: 7, TraceURL: "http://traces/{trace_id}"})
	if err != nil {
		t.Fatal(err)
	}
	a := report.NewAggregator(&report.Options{MaxFailures: 7, TraceURL: "http://traces/{trace_id}"})
	var buf []byte
	var l recordjson.Light
	for _, r := range recs {
		buf = r.AppendJSON(buf[:0])
		if err := recordjson.DecodeLight(buf, &l); err != nil {
			t.Fatal(err)
		}
		l.Tags = r.Tags
		a.Add(&l.Record)
		for i := range buf {
			buf[i] = '#'
		}
	}
	got := a.Report()
	sameReport(t, want, got, nil, nil)
	for _, v := range want.VariantNames() {
		sameReport(t, want.VariantReport(v), got.VariantReport(v), nil, nil)
	}
	if variants && len(want.VariantNames()) != 2 {
		t.Fatalf("variants %v, want 2", want.VariantNames())
	}
}

// TestReportOfAFarEpoch: a record's epoch far beyond the others (a log
// is outside input) makes no loop up to it: pass@k stops at the largest k
// a sample is scored. FuzzFromLog stalled on such a log.
func TestReportOfAFarEpoch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	var log []byte
	for ep := range 2 {
		r := sink.Record{Schema: 1, RunID: "r", Eval: "e", SampleID: "s", Epoch: ep, Status: sink.Pass, Score: 1}
		log = append(r.AppendJSON(log), '\n')
	}
	far := sink.Record{Schema: 1, RunID: "r", Eval: "e", SampleID: "t", Epoch: 1 << 40, Status: sink.Fail}
	log = append(far.AppendJSON(log), '\n')
	if err := os.WriteFile(path, log, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := report.FromLog(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Epochs != 1<<40+1 || len(rep.PassAtK) != 2 || len(rep.PassHatK) != 2 {
		t.Fatalf("epochs %d, pass@k %v, pass^k %v; want 2^40+1 epochs, pass@k for k = 1, 2", rep.Epochs, rep.PassAtK, rep.PassHatK)
	}
}
