package anthropic_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/anthropic"
)

// Under a recording span each call is a GenAI client span; without one,
// none (the call joins its caller's trace or is untraced).
func TestCompleteSpans(t *testing.T) {
	t.Parallel()
	s, _ := server(t, reply(200, okBody),
		reply(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	ctx, parent := tp.Tracer("test").Start(context.Background(), "judge")
	c := anthropic.New(&anthropic.Options{BaseURL: s.URL, APIKey: "k", Model: "claude-sonnet-4"})
	temp := 0.0
	_, err := c.Complete(ctx, judge.Request{Messages: []judge.Message{{Role: "user", Content: "grade"}}, MaxTokens: 64, Temperature: &temp})
	require.NoError(t, err)
	_, err = c.Complete(ctx, judge.Request{Messages: []judge.Message{{Role: "user", Content: "grade"}}})
	require.Error(t, err)
	_, err = c.Complete(context.Background(), judge.Request{Messages: []judge.Message{{Role: "user", Content: "grade"}}})
	require.Error(t, err)

	spans := rec.Ended()
	require.Len(t, spans, 2, "the untraced call has no span")
	ok, failed := spans[0], spans[1]
	for _, sp := range spans {
		require.Equal(t, "chat claude-sonnet-4", sp.Name())
		require.Equal(t, trace.SpanKindClient, sp.SpanKind())
		require.Equal(t, parent.SpanContext().SpanID(), sp.Parent().SpanID())
	}
	attrs := attribute.NewSet(ok.Attributes()...)
	want := map[attribute.Key]attribute.Value{
		"gen_ai.operation.name":          attribute.StringValue("chat"),
		"gen_ai.provider.name":           attribute.StringValue("anthropic"),
		"gen_ai.request.model":           attribute.StringValue("claude-sonnet-4"),
		"gen_ai.request.max_tokens":      attribute.IntValue(64),
		"gen_ai.request.temperature":     attribute.Float64Value(0),
		"gen_ai.response.model":          attribute.StringValue("claude-sonnet-4-20250514"),
		"gen_ai.response.finish_reasons": attribute.StringSliceValue([]string{judge.StopEnd}),
		"gen_ai.usage.input_tokens":      attribute.Int64Value(1000), // cache reads are input
		"gen_ai.usage.output_tokens":     attribute.Int64Value(200),
		"server.address":                 attribute.StringValue("127.0.0.1"),
	}
	for k, v := range want {
		got, found := attrs.Value(k)
		require.True(t, found, "%s missing", k)
		require.Equal(t, v, got, "%s", k)
	}
	require.Equal(t, codes.Unset, ok.Status().Code)
	require.Equal(t, codes.Error, failed.Status().Code)
	failedAttrs := attribute.NewSet(failed.Attributes()...)
	et, _ := failedAttrs.Value("error.type")
	require.Equal(t, "rate_limit_error", et.AsString())
}
