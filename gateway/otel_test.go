package gateway_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
	"github.com/proctor-evals/proctor/usage"
)

// tracedMeter is an episode's meter whose episode is traced.
type tracedMeter struct {
	meter
	span trace.Span
}

func (m *tracedMeter) Span() trace.Span { return m.span }

// Each call is a GenAI client span, a child of the episode's; a refused
// call's span carries its error.
func TestEachCallIsAGenAISpanUnderTheEpisode(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	p.Usage = func(gatewaytest.Request) usage.Usage { return usage.Usage{InputTokens: 40, OutputTokens: 7} }
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	_, parent := tp.Tracer("test").Start(context.Background(), "episode")
	m := &tracedMeter{span: parent}
	token, end := g.Open(m)
	code, _ := post(t, s.URL, "/v1/messages", token, `{"model":"claude-sonnet-4-5","max_tokens":10,"stream":true,"messages":[]}`)
	require.Equal(t, 200, code)
	m.budget = gateway.Budget{Tokens: 0, CostUSD: math.Inf(1), Capped: true}
	code, _ = post(t, s.URL, "/v1/chat/completions", token, `{"model":"gpt-4o","messages":[]}`)
	require.Equal(t, 429, code)
	end()

	spans := rec.Ended()
	require.Len(t, spans, 2)
	refused := spans[1]
	require.Equal(t, "chat gpt-4o", refused.Name())
	require.Equal(t, codes.Error, refused.Status().Code)
	require.Contains(t, refused.Status().Description, "budget is spent")
	refusedAttrs := attribute.NewSet(refused.Attributes()...)
	errType, _ := refusedAttrs.Value("error.type")
	require.Equal(t, "429", errType.AsString())
	sp := spans[0]
	require.Equal(t, "chat claude-sonnet-4-5", sp.Name())
	require.Equal(t, trace.SpanKindClient, sp.SpanKind())
	require.Equal(t, parent.SpanContext().SpanID(), sp.Parent().SpanID())
	attrs := attribute.NewSet(sp.Attributes()...)
	for k, v := range map[attribute.Key]attribute.Value{
		"gen_ai.operation.name":      attribute.StringValue("chat"),
		"gen_ai.provider.name":       attribute.StringValue("anthropic"),
		"gen_ai.request.model":       attribute.StringValue("claude-sonnet-4-5"),
		"gen_ai.response.model":      attribute.StringValue("claude-sonnet-4-5"),
		"gen_ai.usage.input_tokens":  attribute.Int64Value(40),
		"gen_ai.usage.output_tokens": attribute.Int64Value(7),
		"http.response.status_code":  attribute.IntValue(200),
	} {
		got, ok := attrs.Value(k)
		require.True(t, ok, "%s missing", k)
		require.Equal(t, v, got, k)
	}
	require.Equal(t, codes.Unset, sp.Status().Code)
	require.False(t, strings.Contains(sp.Name(), token))
}
