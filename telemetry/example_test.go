package telemetry_test

import (
	"context"
	"log"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/telemetry"
)

// Tracing a run: Setup installs the global providers, which a Config
// without TracerProvider and LoggerProvider uses; shutdown flushes what is batched.
func ExampleSetup() {
	ctx := context.Background()
	shutdown, err := telemetry.Setup(ctx, &telemetry.Options{Endpoint: "http://localhost:4318"})
	if err != nil {
		log.Fatal(err)
	}
	defer shutdown(context.WithoutCancel(ctx))
	var e *eval.Eval[string, string] // the evaluation
	rep, err := e.Run(ctx, eval.Config{})
	_, _ = rep, err
}

// Providers of one's own, without touching the globals; the text report
// links failures to Jaeger.
func ExampleNew() {
	ctx := context.Background()
	p, err := telemetry.New(ctx, nil) // OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4318
	if err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown(context.WithoutCancel(ctx))
	cfg := eval.Config{TracerProvider: p.TracerProvider, LoggerProvider: p.LoggerProvider}
	cfg.Report.TraceURL = "http://localhost:16686/trace/{trace_id}"
	_ = cfg
}
