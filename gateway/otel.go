package gateway

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/internal/semconv"
)

const tracerName = "github.com/proctor-evals/proctor/gateway"

// startSpan starts the call's span as a child of the episode's, when that
// one records.
func (cl *call) startSpan(parent trace.Span) {
	if parent == nil || !parent.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationName.String(semconv.GenAIOperationChat),
		semconv.GenAIProviderName.String(cl.provider),
		semconv.ServerAddress.String(cl.rt.up.base.Hostname()),
	}
	if cl.rec.Model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel.String(cl.rec.Model))
	}
	name := semconv.GenAIOperationChat + " " + cl.rec.Model
	if !cl.rt.metered {
		name = cl.rt.api
	}
	t := parent.TracerProvider().Tracer(tracerName, trace.WithSchemaURL(semconv.SchemaURL))
	_, cl.span = t.Start(trace.ContextWithSpan(context.Background(), parent), name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(cl.rec.Start), trace.WithAttributes(attrs...))
}

// endSpan ends a call's span with its outcome.
func endSpan(s trace.Span, rec *Call) {
	s.SetAttributes(
		semconv.GenAIResponseModel.String(rec.Model),
		semconv.GenAIUsageInputTokens.Int64(rec.Usage.InputTokens),
		semconv.GenAIUsageOutputTokens.Int64(rec.Usage.OutputTokens),
		attribute.Int("http.response.status_code", rec.Status),
	)
	if rec.Cut != "" {
		s.SetAttributes(attribute.String("proctor.gateway.cut", rec.Cut))
	}
	if rec.Status/100 != 2 || rec.Cut != "" {
		typ := semconv.ErrorTypeOther
		if rec.Status/100 != 2 {
			typ = strconv.Itoa(rec.Status)
		}
		s.SetAttributes(semconv.ErrorType.String(typ))
		s.SetStatus(codes.Error, rec.Err)
	}
	s.End(trace.WithTimestamp(rec.Start.Add(rec.Duration)))
}
