package report_test

import (
	"strconv"
	"testing"

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
