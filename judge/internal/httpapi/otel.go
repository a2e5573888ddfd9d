package httpapi

// Model-call spans, following the OpenTelemetry GenAI client conventions
// (names pinned in internal/semconv), through the API only.

import (
	"context"
	"errors"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/internal/semconv"
	"github.com/proctor-evals/proctor/judge"
)

const tracerName = "github.com/proctor-evals/proctor/judge"

// Chat is the span of one chat call. The zero Chat (an untraced call)
// does nothing.
type Chat struct{ span trace.Span }

// StartChat starts the span of one chat call to model through provider's
// API at base (its URL gives server.address and server.port), as a child
// of the recording span ctx carries, with that span's provider: a model
// call joins its caller's trace (an eval's judge span), and costs nothing
// untraced. maxTokens is the bound the request sends.
func StartChat(ctx context.Context, provider, model, base string, req *judge.Request, maxTokens int) (context.Context, Chat) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, Chat{}
	}
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs,
		semconv.GenAIOperationName.String(semconv.GenAIOperationChat),
		semconv.GenAIProviderName.String(provider),
		semconv.GenAIRequestModel.String(model),
		semconv.GenAIRequestMaxTokens.Int(maxTokens))
	if req.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperature.Float64(*req.Temperature))
	}
	if u, err := url.Parse(base); err == nil && u.Hostname() != "" {
		attrs = append(attrs, semconv.ServerAddress.String(u.Hostname()))
		if p := port(u); p > 0 {
			attrs = append(attrs, semconv.ServerPort.Int(p))
		}
	}
	t := parent.TracerProvider().Tracer(tracerName, trace.WithSchemaURL(semconv.SchemaURL))
	ctx, span := t.Start(ctx, semconv.GenAIOperationChat+" "+model,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, Chat{span}
}

func port(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	switch u.Scheme {
	case "https":
		return 443
	case "http":
		return 80
	}
	return 0
}

// End ends the span with the response (the answering model, the
// normalized stop reason and the tokens) or the error.
func (c Chat) End(resp *judge.Response, err error) {
	if c.span == nil {
		return
	}
	if err != nil {
		c.span.SetAttributes(semconv.ErrorType.String(errorType(err)))
		c.span.SetStatus(codes.Error, err.Error())
	} else if resp != nil {
		attrs := []attribute.KeyValue{
			semconv.GenAIUsageInputTokens.Int64(resp.Usage.InputTokens),
			semconv.GenAIUsageOutputTokens.Int64(resp.Usage.OutputTokens),
		}
		if resp.Model != "" {
			attrs = append(attrs, semconv.GenAIResponseModel.String(resp.Model))
		}
		if resp.StopReason != "" {
			attrs = append(attrs, semconv.GenAIResponseFinishReasons.StringSlice([]string{resp.StopReason}))
		}
		c.span.SetAttributes(attrs...)
	}
	c.span.End()
}

// errorType is error.type: the provider's error type, else the HTTP
// status, else a timeout or _OTHER.
func errorType(err error) string {
	var ae *judge.APIError
	switch {
	case errors.As(err, &ae) && ae.Type != "":
		return ae.Type
	case ae != nil:
		return strconv.Itoa(ae.StatusCode)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return semconv.ErrorTypeOther
}
