package eval_test

import (
	"context"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/scorer"
)

type benchTask struct {
	Prompt   string `json:"prompt"`
	Expected string `json:"expected"`
}

func benchEval(n int, latency time.Duration) *eval.Eval[benchTask, string] {
	d := make(dataset.Slice[benchTask], n)
	for i := range d {
		d[i] = dataset.Sample[benchTask]{ID: "t" + strconv.Itoa(i), Input: benchTask{"what is " + strconv.Itoa(i) + "+1?", strconv.Itoa(i + 1)}}
	}
	h := harness.Func[benchTask, string](func(ctx context.Context, ep *harness.Episode[benchTask]) (string, error) {
		if latency > 0 {
			t := time.NewTimer(latency)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return "", ctx.Err()
			}
		}
		return ep.Sample.Input.Expected, nil
	})
	return &eval.Eval[benchTask, string]{Name: "bench", Dataset: d, Harness: h,
		Judge: scorer.Exact(func(t benchTask) string { return t.Expected })}
}

// BenchmarkNoOp is P1: a no-op harness, an exact-match judge and the JSONL
// log; it reports episodes/s.
func BenchmarkNoOp(b *testing.B) { benchNoOp(b, 64) }

// BenchmarkNoOpManyWorkers is BenchmarkNoOp with 10,000 workers: far more
// than the recorder's queue has slots, so that workers wait for room (a
// queue whose waiting workers held slots fell to a quarter of this rate).
func BenchmarkNoOpManyWorkers(b *testing.B) { benchNoOp(b, 10_000) }

func benchNoOp(b *testing.B, concurrency int) {
	const n = 100_000
	e := benchEval(n, 0)
	cpu := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		log := filepath.Join(b.TempDir(), "log.jsonl")
		if _, err := e.Run(context.Background(), eval.Config{Concurrency: concurrency, Log: log, Report: report.Options{Resamples: -1}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "episodes/s")
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(n*b.N), "cpu-ns/episode")
}

// cpuTime is the process's user+system CPU time: on a shared, noisy
// machine, CPU per episode is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLatency is P2: 100k episodes at concurrency 5,000 with 50 ms of
// simulated latency; the ideal is 1.0 s per run.
func BenchmarkLatency(b *testing.B) {
	const n = 100_000
	e := benchEval(n, 50*time.Millisecond)
	cpu := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		log := filepath.Join(b.TempDir(), "log.jsonl")
		if _, err := e.Run(context.Background(), eval.Config{Concurrency: 5000, Log: log, Report: report.Options{Resamples: -1}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/run")
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(n*b.N), "cpu-ns/episode")
}
