package review_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/proctor-evals/proctor/internal/benchlog"
	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// BenchmarkLoad1M is Load of the 1M-record log (100k samples × 10
// epochs, inputs and outputs included) with a queue of 1,000 episodes,
// beside what Load did before: every record read whole and kept
// ("records"). MB-heap-after is what the result holds, measured after a
// collection. Run with
//
//	go test ./review -run X -bench Load1M -benchtime 3x
//
// The log is generated first (about 10 s).
func BenchmarkLoad1M(b *testing.B) {
	log := filepath.Join(b.TempDir(), "bench.jsonl")
	if err := benchlog.Write1M(log); err != nil {
		b.Fatal(err)
	}
	f, err := review.Load(log)
	if err != nil {
		b.Fatal(err)
	}
	q, err := review.Pick(f.Episodes, review.Design{Seed: 1, Count: 1000})
	if err != nil {
		b.Fatal(err)
	}
	if err := review.WriteQueue(review.QueuePath(log), q); err != nil {
		b.Fatal(err)
	}
	f = nil
	st, _ := os.Stat(log)
	b.Logf("log: %d MB", st.Size()>>20)
	bench := func(load func() any) func(b *testing.B) {
		return func(b *testing.B) {
			var retained uint64
			for range b.N {
				v := load()
				b.StopTimer()
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				retained = ms.HeapAlloc
				runtime.KeepAlive(v)
				b.StartTimer()
			}
			b.ReportMetric(float64(retained)/(1<<20), "MB-heap-after")
		}
	}
	b.Run("records", bench(func() any {
		var recs []sink.Record
		for r, err := range jsonl.Records(log) {
			if err != nil {
				b.Fatal(err)
			}
			recs = append(recs, r)
		}
		return recs
	}))
	b.Run("Load", bench(func() any {
		f, err := review.Load(log)
		if err != nil || len(f.Queued) != len(q.Entries) {
			b.Fatal(err)
		}
		return f
	}))
}
