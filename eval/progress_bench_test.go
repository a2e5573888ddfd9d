package eval_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
)

// BenchmarkNoOpProgress is P1 (BenchmarkNoOp) with progress off (Quiet,
// no callback: the workers publish nothing, the recorder only folds its
// tally) and on (OnProgress every 100 ms: the workers publish what they
// run, the recorder copies its tally when asked), side by side.
func BenchmarkNoOpProgress(b *testing.B) {
	const n = 100_000
	e := benchEval(n, 0)
	for _, bc := range []struct {
		name string
		cfg  eval.Config
	}{
		{"off", eval.Config{Quiet: true}},
		{"on", eval.Config{Quiet: true, ProgressEvery: 100 * time.Millisecond, OnProgress: func(p eval.Progress) {
			if p.Done > p.Total {
				panic("done past the total")
			}
		}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := bc.cfg
			cfg.Concurrency, cfg.Report = 64, report.Options{Resamples: -1}
			cpu := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cfg.Log = filepath.Join(b.TempDir(), "log.jsonl")
				if _, err := e.Run(context.Background(), cfg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "episodes/s")
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(n*b.N), "cpu-ns/episode")
		})
	}
}
