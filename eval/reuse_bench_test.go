package eval_test

import (
	"context"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/scorer"
)

// reuseBenchEval is a 100k-sample eval whose agent takes latency per
// episode and leaves a one-event transcript (copied by a reuse).
func reuseBenchEval(n int, latency time.Duration) *eval.Eval[benchTask, string] {
	d := make(dataset.Slice[benchTask], n)
	for i := range d {
		d[i] = dataset.Sample[benchTask]{ID: "t" + strconv.Itoa(i), Input: benchTask{"what is " + strconv.Itoa(i) + "+1?", strconv.Itoa(i + 1)},
			Tags: map[string]string{"bucket": strconv.Itoa(i % 10)}}
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
		ep.AddEvent(harness.Event{Kind: "model", Name: "agent", Usage: harness.Usage{InputTokens: 900, OutputTokens: 120, CostUSD: 0.002}})
		return ep.Sample.Input.Expected, nil
	})
	return &eval.Eval[benchTask, string]{Name: "reuse-bench", Dataset: d, Harness: h,
		Judge:    scorer.Exact(func(t benchTask) string { return t.Expected }),
		Versions: eval.Versions{Harness: "v1", Judge: "v1"}}
}

// BenchmarkReuse100k is P10: a run of 100k episodes, fresh (the agent
// takes reuseLatency per episode, at concurrency reuseConcurrency: a
// short model call under a generous rate limit; real agent episodes take
// far longer) against the same run fully reused from an earlier log.
// The fresh run takes about a minute: run it with -benchtime 1x.
//
//	go test ./eval -run X -bench Reuse100k -benchtime 1x
func BenchmarkReuse100k(b *testing.B) {
	const (
		n                = 100_000
		reuseLatency     = 500 * time.Millisecond
		reuseConcurrency = 1000
	)
	cfg := eval.Config{Concurrency: reuseConcurrency, Report: report.Options{Resamples: -1}}
	b.Run("fresh", func(b *testing.B) {
		e := reuseBenchEval(n, reuseLatency)
		measure(b, n, func() {
			c := cfg
			c.Log = filepath.Join(b.TempDir(), "fresh.jsonl")
			if _, err := e.Run(context.Background(), c); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("reused", func(b *testing.B) {
		earlier := filepath.Join(b.TempDir(), "earlier.jsonl")
		e := reuseBenchEval(n, 0)
		c := cfg
		c.Concurrency, c.Log = 64, earlier
		if _, err := e.Run(context.Background(), c); err != nil {
			b.Fatal(err)
		}
		e = reuseBenchEval(n, reuseLatency) // the agent is never called
		measure(b, n, func() {
			c := cfg
			c.Log, c.ReuseFrom = filepath.Join(b.TempDir(), "reused.jsonl"), []string{earlier}
			rep, err := e.Run(context.Background(), c)
			if err != nil {
				b.Fatal(err)
			}
			if rep.Reused != n {
				b.Fatalf("reused %d of %d", rep.Reused, n)
			}
		})
	})
}

// measure runs run b.N times and reports wall time per run and the peak
// of live heap objects during the runs (sampled every millisecond,
// without stopping the world).
func measure(b *testing.B, episodes int, run func()) {
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	b.ReportAllocs()
	cpu := cpuTime()
	b.ResetTimer()
	for range b.N {
		run()
	}
	b.StopTimer()
	close(stop)
	<-sampled
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/run")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*episodes), "cpu-ns/episode")
}
