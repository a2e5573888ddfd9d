package eval_test

import (
	"context"
	"path/filepath"
	"testing"

	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
)

// BenchmarkNoOpTracing is P1 (BenchmarkNoOp) with OpenTelemetry off
// (nothing configured: the default) and on (SDK providers batching into
// exporters that discard, the verdict events included), side by side;
// "unsampled" is on with a sampler that records nothing. Compare off with
// BenchmarkNoOp to see what the instrumentation costs when unused, and on
// with off for the cost of a trace per episode.
func BenchmarkNoOpTracing(b *testing.B) {
	const n = 100_000
	e := benchEval(n, 0)
	for _, mode := range []string{"off", "on", "unsampled"} {
		b.Run(mode, func(b *testing.B) {
			cfg := eval.Config{Concurrency: 64, Report: report.Options{Resamples: -1}}
			if mode != "off" {
				sampler := sdktrace.ParentBased(sdktrace.AlwaysSample())
				if mode == "unsampled" {
					sampler = sdktrace.NeverSample()
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(discardSpans{}))
				lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(discardLogs{})))
				defer tp.Shutdown(context.Background())
				defer lp.Shutdown(context.Background())
				cfg.TracerProvider, cfg.LoggerProvider = tp, lp
			}
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

type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

type discardLogs struct{}

func (discardLogs) Export(context.Context, []sdklog.Record) error { return nil }
func (discardLogs) Shutdown(context.Context) error                { return nil }
func (discardLogs) ForceFlush(context.Context) error              { return nil }
