package report_test

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
)

// BenchmarkAddAtSequential is the sequential gate's bookkeeping on the
// recorder's goroutine: AddAt with and without a gate, one epoch, records
// arriving in claim order at a true rate on the bar, so that every record
// completes the head of the prefix and feeds the test (the worst case: an
// undecided gate; once decided it feeds nothing). The gate's cost per
// episode is the difference of the two (target: at most 50 ns).
//
//	go test ./eval/report -run XXX -bench AddAtSequential -count 6
func BenchmarkAddAtSequential(b *testing.B) {
	const n = 1 << 12 // samples: their state stays in cache, as a run's hot part does
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "s" + strconv.Itoa(i)
	}
	meta := func(i int) (string, map[string]string) { return ids[i], nil }
	r := rand.New(rand.NewPCG(1, 2))
	pass, fail := sink.Record{Status: sink.Pass, Score: 1, DurationMS: 1}, sink.Record{Status: sink.Fail, DurationMS: 1}
	recs := make([]*sink.Record, n)
	for i := range recs {
		recs[i] = &fail
		if r.Float64() < 0.7 {
			recs[i] = &pass
		}
	}
	// Both aggregators get the records in the gate's claim order, as the
	// engine's recorder does.
	order := report.ClaimOrder(3, n, func(i int) string { return ids[i] })
	for _, gated := range []bool{false, true} {
		name := "plain"
		if gated {
			name = "gated"
		}
		b.Run(name, func(b *testing.B) {
			var agg *report.Aggregator
			fresh := func() {
				opts := &report.Options{Resamples: -1}
				if gated {
					opts.Sequential = &report.Sequential{Bar: 0.7, Epochs: 1, Seed: 3}
				}
				agg = report.NewIndexed(opts, n, meta)
			}
			fresh()
			runtime.GC()
			b.ResetTimer()
			for k := range b.N {
				if k%n == 0 && k > 0 {
					b.StopTimer()
					fresh()
					b.StartTimer()
				}
				i := int(order[k%n])
				agg.AddAt(i, recs[i])
			}
			if d, at := agg.Decided(); gated && d != report.Undecided && at < min(b.N, n)/2 {
				b.Logf("decided %s after %d of %d: the benchmark measured less than the worst case", d, at, min(b.N, n))
			}
		})
	}
}
