package sandbox

// Tracing: spans for provisioning, forking and commands, and the W3C
// trace context handed to commands, through the OpenTelemetry API only
// (a no-op until a caller's context carries a span).

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/internal/semconv"
)

const tracerName = "github.com/proctor-evals/proctor/sandbox"

// tracerFrom returns the tracer of the recording span ctx carries, nil
// when it carries none. Spans join the caller's trace, with the caller's
// provider: the sandbox reads no global, and costs nothing untraced.
func tracerFrom(ctx context.Context) trace.Tracer {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return nil
	}
	return parent.TracerProvider().Tracer(tracerName, trace.WithSchemaURL(semconv.SchemaURL))
}

// endSpan ends span (nil when untraced) with err's status.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetAttributes(semconv.ErrorType.String(errorType(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func errorType(err error) string {
	switch {
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return semconv.ErrorTypeOther
}

// withTraceContext returns env with TRACEPARENT (and TRACESTATE) set to
// ctx's span context, the carrier OpenTelemetry specifies for environment
// variables, so that an instrumented agent joins the caller's trace. env
// is returned as is when ctx carries no span context or env sets
// TRACEPARENT itself; it is copied, never modified.
func withTraceContext(ctx context.Context, env map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return env
	}
	if _, set := env["TRACEPARENT"]; set {
		return env
	}
	out := make(map[string]string, len(env)+2)
	maps.Copy(out, env)
	propagation.TraceContext{}.Inject(ctx, envCarrier(out))
	return out
}

// envCarrier is a TextMapCarrier over environment variables: keys upper
// case (traceparent is TRACEPARENT).
type envCarrier map[string]string

func (c envCarrier) Get(key string) string { return c[strings.ToUpper(key)] }

func (c envCarrier) Set(key, value string) { c[strings.ToUpper(key)] = value }

func (c envCarrier) Keys() []string { return slices.Collect(maps.Keys(c)) }
