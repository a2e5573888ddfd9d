package report_test

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
)

// BenchmarkReport1M is P7: the report over 1M records (100k samples × 10
// epochs, two tags) with the cluster-robust interval and a 1,000-resample
// cluster bootstrap.
func BenchmarkReport1M(b *testing.B) {
	recs := make([]sink.Record, 0, 1_000_000)
	for s := range 100_000 {
		id := "s" + strconv.Itoa(s)
		tags := map[string]string{"difficulty": strconv.Itoa(s % 5), "repo": "r" + strconv.Itoa(s%17)}
		for ep := range 10 {
			st := sink.Fail
			if (s*7+ep*3)%10 < 6 {
				st = sink.Pass
			}
			recs = append(recs, sink.Record{Schema: 1, RunID: "r", Eval: "e", SampleID: id, Epoch: ep,
				Status: st, Score: map[bool]float64{true: 1}[st == sink.Pass], Tags: tags, DurationMS: float64(s%97) + 0.5})
		}
	}
	seq := func(yield func(sink.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := report.FromRecords(seq, &report.Options{Resamples: 1000})
		if err != nil || rep.Episodes != 1_000_000 || rep.Bootstrap == nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFromLog1MDistinct is the report of a production-traces log:
// 1M distinct samples × 1 epoch, as `examples/loadtest -n 1000000 -c 64
// -latency 0` writes it, read from its JSONL file (decoding included).
// Where BenchmarkReport1M's cost is the interval's, this one's is the
// per-sample fold: a million samples of one episode each.
func BenchmarkFromLog1MDistinct(b *testing.B) {
	log := filepath.Join(b.TempDir(), "run.jsonl")
	f, err := os.Create(log)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	start := time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC)
	var line []byte
	for s := range 1_000_000 {
		r := sink.Record{Schema: sink.SchemaVersion, RunID: "20261128T130013Z-b005c89b", Eval: "loadtest",
			SampleID: "s" + strconv.Itoa(s), Status: sink.Pass, Score: 1,
			StartedAt: start.Add(time.Duration(s) * time.Microsecond), DurationMS: 0.004, Seed: uint64(s)*0x9E3779B97F4A7C15 + 1}
		line = append(r.AppendJSON(line[:0]), '\n')
		if _, err := w.Write(line); err != nil {
			b.Fatal(err)
		}
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := report.FromLog(log, nil)
		if err != nil || rep.Episodes != 1_000_000 || rep.Samples != 1_000_000 {
			b.Fatal(rep, err)
		}
	}
}
