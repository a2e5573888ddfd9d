// Package telemetry wires the OpenTelemetry SDK for proctor: OTLP/HTTP
// exporters for traces and logs (the verdict events), batched, under one
// resource. It is the half that links the SDK, the exporters and
// protobuf: package eval depends on the OpenTelemetry API only, and a
// program that never imports this package links none of that.
//
// [Setup] installs the providers as the globals, which eval uses when
// Config.TracerProvider and Config.LoggerProvider are nil:
//
//	shutdown, err := telemetry.Setup(ctx, nil) // OTEL_EXPORTER_OTLP_* or localhost:4318
//	if err != nil { … }
//	defer shutdown(context.WithoutCancel(ctx)) // flushes what is batched
//	rep, err := e.Run(ctx, eval.Config{})
//
// [New] returns the providers without touching the globals, for
// Config.TracerProvider and Config.LoggerProvider.
//
// What the exporters read from the environment, they still read:
// OTEL_EXPORTER_OTLP_ENDPOINT (and the _TRACES_ and _LOGS_ variants),
// OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, the TLS variables;
// the SDK reads OTEL_TRACES_SAMPLER and the batch processors' variables;
// the resource reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
// Options given here win over the environment.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/proctor-evals/proctor/internal/semconv"
)

// DefaultServiceName is the resource's service.name when neither
// Options.ServiceName nor OTEL_SERVICE_NAME gives one.
const DefaultServiceName = "proctor"

// Options configures the exporters. The zero value (and nil) is valid:
// every empty field defers to the environment, then to the defaults.
type Options struct {
	// Endpoint is the OTLP/HTTP base URL, e.g. "http://localhost:4318"
	// (a collector, Jaeger, Tempo…): traces go to its /v1/traces and logs
	// to its /v1/logs, as with OTEL_EXPORTER_OTLP_ENDPOINT. An http://
	// URL is sent without TLS. "": the OTEL_EXPORTER_OTLP_* variables,
	// else http://localhost:4318.
	Endpoint string
	// Headers are sent with every export (an API key, a tenant); nil:
	// OTEL_EXPORTER_OTLP_HEADERS.
	Headers map[string]string
	// ServiceName is the resource's service.name; "": OTEL_SERVICE_NAME,
	// else [DefaultServiceName].
	ServiceName string
}

// Providers are an SDK tracer provider and logger provider exporting
// over OTLP/HTTP: put them in eval.Config's TracerProvider and LoggerProvider.
type Providers struct {
	TracerProvider *sdktrace.TracerProvider
	LoggerProvider *sdklog.LoggerProvider
}

// Shutdown flushes what is batched and stops both providers; ctx bounds
// the flush.
func (p *Providers) Shutdown(ctx context.Context) error {
	return errors.Join(p.TracerProvider.Shutdown(ctx), p.LoggerProvider.Shutdown(ctx))
}

// New returns providers configured by opts and the environment. Nothing
// is sent until spans or events are made; an unreachable endpoint shows
// as export errors (the otel error handler), never as a failed run.
func New(ctx context.Context, opts *Options) (*Providers, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	var traceOpts []otlptracehttp.Option
	var logOpts []otlploghttp.Option
	if o.Endpoint != "" {
		tracesURL, err := signalURL(o.Endpoint, "v1/traces")
		if err != nil {
			return nil, err
		}
		logsURL, _ := signalURL(o.Endpoint, "v1/logs")
		traceOpts = append(traceOpts, otlptracehttp.WithEndpointURL(tracesURL))
		logOpts = append(logOpts, otlploghttp.WithEndpointURL(logsURL))
	}
	if o.Headers != nil {
		traceOpts = append(traceOpts, otlptracehttp.WithHeaders(o.Headers))
		logOpts = append(logOpts, otlploghttp.WithHeaders(o.Headers))
	}
	res, err := newResource(ctx, o.ServiceName)
	if err != nil {
		return nil, err
	}
	spans, err := otlptracehttp.New(ctx, traceOpts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: the trace exporter: %w", err)
	}
	logs, err := otlploghttp.New(ctx, logOpts...)
	if err != nil {
		spans.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: the log exporter: %w", err)
	}
	return &Providers{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(spans)),
		LoggerProvider: sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(sdklog.NewBatchProcessor(logs))),
	}, nil
}

// Setup makes providers as [New] does and installs them as the global
// tracer and logger providers, with the W3C trace-context and baggage
// propagators. Call shutdown before the program exits, with a context
// that is not canceled, or what is batched is lost.
func Setup(ctx context.Context, opts *Options) (shutdown func(context.Context) error, err error) {
	p, err := New(ctx, opts)
	if err != nil {
		return nil, err
	}
	otel.SetTracerProvider(p.TracerProvider)
	otel.SetLoggerProvider(p.LoggerProvider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return p.Shutdown, nil
}

// signalURL is base with the signal's path appended, as the OTLP
// exporter specification does for OTEL_EXPORTER_OTLP_ENDPOINT.
func signalURL(base, signal string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("telemetry: Options.Endpoint %q: want an http:// or https:// URL such as http://localhost:4318", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + signal
	return u.String(), nil
}

// newResource describes this process: service.name (the option, else
// OTEL_SERVICE_NAME, else proctor), OTEL_RESOURCE_ATTRIBUTES and the SDK.
func newResource(ctx context.Context, service string) (*resource.Resource, error) {
	if err := checkResourceAttributes(os.Getenv("OTEL_RESOURCE_ATTRIBUTES")); err != nil {
		return nil, err
	}
	opts := []resource.Option{
		resource.WithAttributes(semconv.ServiceName.String(DefaultServiceName)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	}
	if service != "" {
		opts = append(opts, resource.WithAttributes(semconv.ServiceName.String(service)))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: the resource: %w", err)
	}
	return res, nil
}

// checkResourceAttributes checks OTEL_RESOURCE_ATTRIBUTES as the SDK parses
// it (comma-separated key=value pairs, values percent-encoded), so that a
// malformed one is an error naming the variable; the SDK's own names
// neither the variable nor, for a bad escape, anything (it keeps the raw
// value).
func checkResourceAttributes(env string) error {
	if strings.TrimSpace(env) == "" {
		return nil
	}
	for p := range strings.SplitSeq(env, ",") {
		k, v, ok := strings.Cut(p, "=")
		_, err := url.PathUnescape(strings.TrimSpace(v))
		if !ok || strings.TrimSpace(k) == "" || err != nil {
			return fmt.Errorf("telemetry: OTEL_RESOURCE_ATTRIBUTES: pair %q is not key=value (want key1=value1,key2=value2, values percent-encoded)", p)
		}
	}
	return nil
}
