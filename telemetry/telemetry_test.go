package telemetry_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/telemetry"
)

// collector is an OTLP/HTTP receiver: it decodes the protobuf payloads
// of /v1/traces and /v1/logs as a collector does.
type collector struct {
	mu      sync.Mutex
	spans   []*tracepb.ResourceSpans
	logs    []*logspb.ResourceLogs
	headers []http.Header
}

func newCollector(t *testing.T) (*collector, *httptest.Server) {
	c := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil && r.Header.Get("Content-Encoding") == "gzip" {
			var zr *gzip.Reader
			if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
				body, err = io.ReadAll(zr)
			}
		}
		if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf payload", http.StatusBadRequest)
			return
		}
		var resp proto.Message
		c.mu.Lock()
		c.headers = append(c.headers, r.Header.Clone())
		switch r.URL.Path {
		case "/otlp/v1/traces":
			var req coltrace.ExportTraceServiceRequest
			err = proto.Unmarshal(body, &req)
			c.spans = append(c.spans, req.ResourceSpans...)
			resp = &coltrace.ExportTraceServiceResponse{}
		case "/otlp/v1/logs":
			var req collogs.ExportLogsServiceRequest
			err = proto.Unmarshal(body, &req)
			c.logs = append(c.logs, req.ResourceLogs...)
			resp = &collogs.ExportLogsServiceResponse{}
		default:
			c.mu.Unlock()
			http.NotFound(w, r)
			return
		}
		c.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return c, srv
}

func attrMap(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// tracedEval runs `env` in a Fake sandbox and returns what TRACEPARENT
// the command saw; "a" passes, "b" fails.
func tracedEval() *eval.Eval[string, string] {
	return &eval.Eval[string, string]{Name: "wire",
		Dataset: dataset.Slice[string]{{ID: "a", Input: "a"}, {ID: "b", Input: "b"}},
		Harness: harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
			res, err := ep.Sandbox.Exec(ctx, sandbox.Cmd{Args: []string{"env"}})
			if err != nil {
				return "", err
			}
			for line := range strings.Lines(string(res.Stdout)) {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "TRACEPARENT="); ok {
					return v, nil
				}
			}
			return "", nil
		}),
		Judge: judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
			if ep.Sample.ID == "a" {
				return judge.Pass("right"), nil
			}
			return judge.Fail("wrong"), nil
		}),
	}
}

type memSink struct {
	mu   sync.Mutex
	recs []sink.Record
}

func (m *memSink) Write(_ context.Context, r sink.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, r)
	return nil
}

func (m *memSink) Close(context.Context) error { return nil }

// checkWire checks what the collector received against the records: one
// trace per episode rooted at the record's span, the sandbox command's
// TRACEPARENT naming a span of that trace, and one verdict event on the
// record's span.
func checkWire(t *testing.T, c *collector, recs []sink.Record, service string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, recs, 2)
	type wireSpan struct {
		name     string
		traceID  string
		spanID   string
		parentID string
		attrs    map[string]*commonpb.AnyValue
	}
	var spans []wireSpan
	for _, rs := range c.spans {
		require.Equal(t, service, attrMap(rs.Resource.Attributes)["service.name"].GetStringValue())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				spans = append(spans, wireSpan{s.Name, hex.EncodeToString(s.TraceId), hex.EncodeToString(s.SpanId),
					hex.EncodeToString(s.ParentSpanId), attrMap(s.Attributes)})
			}
		}
	}
	for _, r := range recs {
		var names []string
		var root *wireSpan
		for i, s := range spans {
			if s.traceID != r.TraceID {
				continue
			}
			names = append(names, s.name)
			if s.spanID == r.SpanID {
				root = &spans[i]
			}
		}
		require.NotNil(t, root, "no span %s of record %s on the wire", r.SpanID, r.SampleID)
		require.Equal(t, "episode", root.name)
		require.Empty(t, root.parentID, "the episode span is the root")
		require.Equal(t, r.SampleID, root.attrs["proctor.sample_id"].GetStringValue())
		require.Equal(t, r.RunID, root.attrs["proctor.run_id"].GetStringValue())
		require.ElementsMatch(t, []string{"episode", "attempt", "sandbox.provision", "sandbox.fork", "harness", "sandbox.exec", "judge"}, names)
		// The record's output is the TRACEPARENT the command saw.
		var tp string
		require.NoError(t, json.Unmarshal(r.Output, &tp))
		parts := strings.Split(tp, "-")
		require.Len(t, parts, 4, "TRACEPARENT %q", tp)
		require.Equal(t, r.TraceID, parts[1])
		for _, s := range spans {
			if s.spanID == parts[2] {
				require.Equal(t, "sandbox.exec", s.name)
			}
		}
	}

	var events []*logspb.LogRecord
	for _, rl := range c.logs {
		require.Equal(t, service, attrMap(rl.Resource.Attributes)["service.name"].GetStringValue())
		for _, sl := range rl.ScopeLogs {
			events = append(events, sl.LogRecords...)
		}
	}
	require.Len(t, events, 2)
	for _, e := range events {
		require.Equal(t, "gen_ai.evaluation.result", e.EventName)
		a := attrMap(e.Attributes)
		var r sink.Record
		for _, x := range recs {
			if x.SampleID == a["proctor.sample_id"].GetStringValue() {
				r = x
			}
		}
		require.Equal(t, r.TraceID, hex.EncodeToString(e.TraceId))
		require.Equal(t, r.SpanID, hex.EncodeToString(e.SpanId))
		require.Equal(t, "wire", a["gen_ai.evaluation.name"].GetStringValue())
		require.Equal(t, string(r.Status), a["gen_ai.evaluation.score.label"].GetStringValue())
		require.Equal(t, r.Score, a["gen_ai.evaluation.score.value"].GetDoubleValue())
		require.Equal(t, r.Reason, a["gen_ai.evaluation.explanation"].GetStringValue())
	}
}

// The providers of New, in Config, over the real OTLP/HTTP wire format.
func TestNewExportsOverOTLP(t *testing.T) {
	t.Parallel()
	c, srv := newCollector(t)
	ctx := context.Background()
	p, err := telemetry.New(ctx, &telemetry.Options{Endpoint: srv.URL + "/otlp/", ServiceName: "proctor-test",
		Headers: map[string]string{"X-Tenant": "evals"}})
	require.NoError(t, err)
	mem := &memSink{}
	_, err = tracedEval().Run(ctx, eval.Config{TracerProvider: p.TracerProvider, LoggerProvider: p.LoggerProvider,
		Sandbox: (&sandboxtest.Fake{}).Provider(), Sinks: []sink.Sink{mem}})
	require.NoError(t, err)
	require.NoError(t, p.Shutdown(ctx))
	checkWire(t, c, mem.recs, "proctor-test")
	for _, h := range c.headers {
		require.Equal(t, "evals", h.Get("X-Tenant"))
	}
}

// Setup installs the globals, which a Config without providers uses; the
// endpoint comes from the standard environment variable.
func TestSetupInstallsGlobals(t *testing.T) {
	c, srv := newCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL+"/otlp")
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	ctx := context.Background()
	prevT, prevL, prevP := otel.GetTracerProvider(), otel.GetLoggerProvider(), otel.GetTextMapPropagator()
	shutdown, err := telemetry.Setup(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		otel.SetTracerProvider(prevT)
		otel.SetLoggerProvider(prevL)
		otel.SetTextMapPropagator(prevP)
	})
	require.ElementsMatch(t, []string{"traceparent", "tracestate", "baggage"}, otel.GetTextMapPropagator().Fields())
	mem := &memSink{}
	_, err = tracedEval().Run(ctx, eval.Config{Sandbox: (&sandboxtest.Fake{}).Provider(), Sinks: []sink.Sink{mem}})
	require.NoError(t, err)
	require.NoError(t, shutdown(ctx))
	checkWire(t, c, mem.recs, "from-env")
}

func TestBadEndpoint(t *testing.T) {
	t.Parallel()
	for _, e := range []string{"localhost:4318", "ftp://x", "http://"} {
		_, err := telemetry.New(context.Background(), &telemetry.Options{Endpoint: e})
		require.ErrorContains(t, err, "Options.Endpoint", e)
	}
}

// A malformed OTEL_RESOURCE_ATTRIBUTES stops Setup with an error naming the
// variable and the bad pair (the SDK's own says "partial resource: missing
// value: [b]", or nothing for a bad escape, which it drops).
func TestMalformedResourceAttributesNameTheVariable(t *testing.T) {
	for _, tc := range []struct{ env, bad string }{
		{"a=1,b", `"b"`},
		{"a=1,=2", `"=2"`},
		{"a=%zz", `"a=%zz"`},
	} {
		t.Setenv("OTEL_RESOURCE_ATTRIBUTES", tc.env)
		_, err := telemetry.Setup(context.Background(), &telemetry.Options{Endpoint: "http://127.0.0.1:1"})
		require.ErrorContains(t, err, "OTEL_RESOURCE_ATTRIBUTES", tc.env)
		require.ErrorContains(t, err, tc.bad, tc.env)
	}
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", " a = 1 , b=x%20y ")
	p, err := telemetry.New(context.Background(), &telemetry.Options{Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
	require.NoError(t, p.Shutdown(context.Background()))
}
