package report_test

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/recordjson"
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
