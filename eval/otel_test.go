package eval_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/openai"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
	"github.com/proctor-evals/proctor/sink"
)

// otelCapture is an SDK tracer and logger provider that keep what they
// are given in memory.
type otelCapture struct {
	spans *tracetest.SpanRecorder
	tp    *sdktrace.TracerProvider
	logs  *logRecorder
	lp    *sdklog.LoggerProvider
}

func newOtelCapture(t *testing.T) *otelCapture {
	c := &otelCapture{spans: tracetest.NewSpanRecorder(), logs: &logRecorder{}}
	c.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(c.spans))
	c.lp = sdklog.NewLoggerProvider(sdklog.WithProcessor(c.logs))
	t.Cleanup(func() {
		c.tp.Shutdown(context.Background())
		c.lp.Shutdown(context.Background())
	})
	return c
}

// logRecorder is an sdklog.Processor that keeps every record.
type logRecorder struct {
	mu   sync.Mutex
	recs []sdklog.Record
}

func (l *logRecorder) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

func (l *logRecorder) OnEmit(_ context.Context, r *sdklog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

func (l *logRecorder) Shutdown(context.Context) error   { return nil }
func (l *logRecorder) ForceFlush(context.Context) error { return nil }

func (l *logRecorder) records() []sdklog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

func logAttrs(r *sdklog.Record) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		m[string(kv.Key)] = kv.Value
		return true
	})
	return m
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// spanTree prints the spans of one trace as an indented tree, children in
// the order they started, each with its status when it is an error.
func spanTree(spans []sdktrace.ReadOnlySpan, traceID trace.TraceID) string {
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.SpanContext().TraceID() == traceID {
			children[s.Parent().SpanID()] = append(children[s.Parent().SpanID()], s)
		}
	}
	var b strings.Builder
	var walk func(parent trace.SpanID, depth int)
	walk = func(parent trace.SpanID, depth int) {
		kids := children[parent]
		slices.SortStableFunc(kids, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
		for _, s := range kids {
			fmt.Fprintf(&b, "%s%s", strings.Repeat("  ", depth), s.Name())
			if a, ok := spanAttrs(s)["proctor.attempt"]; ok && s.Name() == "attempt" {
				fmt.Fprintf(&b, " %d", a.AsInt64())
			}
			if s.Status().Code == codes.Error {
				b.WriteString(" (error)")
			}
			b.WriteString("\n")
			walk(s.SpanContext().SpanID(), depth+1)
		}
	}
	walk(trace.SpanID{}, 0)
	return b.String()
}

// gradingServer speaks the Chat Completions API: it grades "task b"
// incorrect and anything else correct.
func gradingServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		grade := "C"
		if strings.Contains(string(body), "task b") {
			grade = "I"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Looks fine.\nGRADE: %s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":7}}`, grade)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// traceparent returns the TRACEPARENT line of `env` output.
func traceparent(out string) string {
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "TRACEPARENT="); ok {
			return v
		}
	}
	return ""
}

// tracedEval runs `env` in the episode's sandbox and returns the
// TRACEPARENT the command saw; the first attempt of sample "a" fails, so
// that it is retried. A Rubric over the grading server judges.
func tracedEval(t *testing.T) *eval.Eval[string, string] {
	srv := gradingServer(t)
	h := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		if ep.Sample.ID == "a" && ep.Attempt == 0 {
			return "", errors.New("flaky")
		}
		res, err := ep.Sandbox.Exec(ctx, sandbox.Cmd{Args: []string{"env"}})
		if err != nil {
			return "", err
		}
		return traceparent(string(res.Stdout)), nil
	})
	grader := openai.New(&openai.Options{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "gpt-4o-mini"})
	return &eval.Eval[string, string]{Name: "traced",
		Dataset: dataset.Slice[string]{{ID: "a", Input: "task a"}, {ID: "b", Input: "task b"}},
		Harness: h, Judge: judge.Rubric[string, string](grader, nil)}
}

func TestTracingOneTracePerEpisode(t *testing.T) {
	t.Parallel()
	oc := newOtelCapture(t)
	mem := &memSink{}
	rep, err := tracedEval(t).Run(context.Background(), eval.Config{TracerProvider: oc.tp, LoggerProvider: oc.lp,
		Sandbox: (&sandboxtest.Fake{}).Provider(), Retries: 1, Backoff: time.Millisecond, Sinks: []sink.Sink{mem},
		Report: report.Options{TraceURL: "http://jaeger:16686/trace/{trace_id}?uiFind={span_id}"}})
	require.NoError(t, err)
	require.Len(t, mem.recs, 2)
	spans := oc.spans.Ended()
	recs := map[string]sink.Record{}
	for _, r := range mem.recs {
		recs[r.SampleID] = r
	}
	a, b := recs["a"], recs["b"]
	require.Equal(t, sink.Pass, a.Status)
	require.Equal(t, sink.Fail, b.Status)
	require.NotEqual(t, a.TraceID, b.TraceID, "one trace per episode")

	for _, r := range []sink.Record{a, b} {
		tid, err := trace.TraceIDFromHex(r.TraceID)
		require.NoError(t, err, "record %s", r.SampleID)
		sid, err := trace.SpanIDFromHex(r.SpanID)
		require.NoError(t, err, "record %s", r.SampleID)
		var root sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.SpanContext().SpanID() == sid {
				root = s
			}
		}
		require.NotNil(t, root, "the record's span %s was not exported", r.SpanID)
		require.Equal(t, tid, root.SpanContext().TraceID())
		require.False(t, root.Parent().IsValid(), "the episode span is the trace's root")
		require.Equal(t, "episode", root.Name())
		attrs := spanAttrs(root)
		got := map[string]string{}
		for _, k := range []string{"proctor.run_id", "proctor.eval", "proctor.sample_id", "proctor.epoch", "proctor.attempt", "proctor.seed", "proctor.status"} {
			got[k] = attrs[k].String()
		}
		want := map[string]string{"proctor.run_id": r.RunID, "proctor.eval": "traced", "proctor.sample_id": r.SampleID,
			"proctor.epoch": "0", "proctor.attempt": strconv.Itoa(r.Attempt), "proctor.seed": strconv.FormatUint(r.Seed, 10),
			"proctor.status": string(r.Status)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("episode span of %s (-want +got):\n%s", r.SampleID, diff)
		}
	}

	// The retried episode: two attempts under one root; the sample's
	// environment is provisioned once, by the first fork.
	wantA := `episode
  attempt 0 (error)
    sandbox.provision
    sandbox.fork
    harness (error)
  attempt 1
    sandbox.fork
    harness
      sandbox.exec
    judge
      chat gpt-4o-mini
`
	if diff := cmp.Diff(wantA, spanTree(spans, mustTraceID(t, a.TraceID))); diff != "" {
		t.Errorf("span tree of episode a (-want +got):\n%s", diff)
	}
	wantB := `episode
  attempt 0
    sandbox.provision
    sandbox.fork
    harness
      sandbox.exec
    judge
      chat gpt-4o-mini
`
	if diff := cmp.Diff(wantB, spanTree(spans, mustTraceID(t, b.TraceID))); diff != "" {
		t.Errorf("span tree of episode b (-want +got):\n%s", diff)
	}

	// The command saw the trace context of its own span.
	for _, r := range []sink.Record{a, b} {
		var exec sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.Name() == "sandbox.exec" && s.SpanContext().TraceID().String() == r.TraceID {
				exec = s
			}
		}
		require.NotNil(t, exec)
		want := fmt.Sprintf("00-%s-%s-01", exec.SpanContext().TraceID(), exec.SpanContext().SpanID())
		require.Equal(t, strconv.Quote(want), string(r.Output), "TRACEPARENT inside the sandbox of %s", r.SampleID)
		require.Equal(t, "env", spanAttrs(exec)["process.command"].AsString())
	}

	// The grader's call follows the GenAI conventions.
	for _, s := range spans {
		if s.Name() != "chat gpt-4o-mini" {
			continue
		}
		require.Equal(t, trace.SpanKindClient, s.SpanKind())
		attrs := spanAttrs(s)
		require.Equal(t, "chat", attrs["gen_ai.operation.name"].AsString())
		require.Equal(t, "openai", attrs["gen_ai.provider.name"].AsString())
		require.Equal(t, "gpt-4o-mini", attrs["gen_ai.request.model"].AsString())
		require.Equal(t, "gpt-4o-mini-2024-07-18", attrs["gen_ai.response.model"].AsString())
		require.Equal(t, int64(31), attrs["gen_ai.usage.input_tokens"].AsInt64())
		require.Equal(t, int64(7), attrs["gen_ai.usage.output_tokens"].AsInt64())
		require.Equal(t, "127.0.0.1", attrs["server.address"].AsString())
		require.NotZero(t, attrs["server.port"].AsInt64())
	}

	// One verdict event per episode, on its episode span.
	events := oc.logs.records()
	require.Len(t, events, 2)
	for _, e := range events {
		require.Equal(t, "gen_ai.evaluation.result", e.EventName())
		attrs := logAttrs(&e)
		r := recs[attrs["proctor.sample_id"].AsString()]
		require.Equal(t, r.TraceID, e.TraceID().String())
		require.Equal(t, r.SpanID, e.SpanID().String())
		require.Equal(t, "traced", attrs["gen_ai.evaluation.name"].AsString())
		require.Equal(t, string(r.Status), attrs["gen_ai.evaluation.score.label"].AsString())
		require.Equal(t, r.Score, attrs["gen_ai.evaluation.score.value"].AsFloat64())
		require.Equal(t, r.Reason, attrs["gen_ai.evaluation.explanation"].AsString())
	}

	// The report links the failure to its trace.
	require.Len(t, rep.Failures, 1)
	f := rep.Failures[0]
	require.Equal(t, "http://jaeger:16686/trace/"+b.TraceID+"?uiFind="+b.SpanID, f.TraceURL)
	require.Contains(t, rep.String(), f.TraceURL)
}

func mustTraceID(t *testing.T, h string) trace.TraceID {
	t.Helper()
	id, err := trace.TraceIDFromHex(h)
	require.NoError(t, err)
	return id
}

// replayed is a sample input replaying a production trace.
type replayed struct {
	Prompt          string
	TraceID, SpanID string
}

func (r replayed) OriginSpan() (traceID, spanID string) { return r.TraceID, r.SpanID }

func TestVerdictEventJoinsTheReplayedTrace(t *testing.T) {
	t.Parallel()
	const origTrace, origSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, traced := range []bool{false, true} {
		t.Run(fmt.Sprintf("tracing=%v", traced), func(t *testing.T) {
			t.Parallel()
			oc := newOtelCapture(t)
			cfg := eval.Config{LoggerProvider: oc.lp, Sinks: []sink.Sink{&memSink{}}}
			if traced {
				cfg.TracerProvider = oc.tp
			}
			mem := cfg.Sinks[0].(*memSink)
			e := &eval.Eval[replayed, string]{Name: "replay",
				Dataset: dataset.Slice[replayed]{
					{ID: "prod", Input: replayed{"hi", origTrace, origSpan}},
					{ID: "bad-ids", Input: replayed{"hi", "not hex", "nor this"}},
				},
				Harness: harness.Func[replayed, string](func(_ context.Context, ep *harness.Episode[replayed]) (string, error) { return "ok", nil }),
				Judge: judge.Func[replayed, string](func(context.Context, *harness.Episode[replayed], string) (judge.Verdict, error) {
					return judge.Pass("matches production"), nil
				}),
			}
			_, err := e.Run(context.Background(), cfg)
			require.NoError(t, err)
			recs := map[string]sink.Record{}
			for _, r := range mem.recs {
				recs[r.SampleID] = r
			}
			events := oc.logs.records()
			require.Len(t, events, 2)
			for _, ev := range events {
				id := logAttrs(&ev)["proctor.sample_id"].AsString()
				wantTrace, wantSpan := origTrace, origSpan
				if id == "bad-ids" { // unreadable IDs: the episode's span, if any
					wantTrace, wantSpan = recs[id].TraceID, recs[id].SpanID
				}
				gotTrace, gotSpan := "", ""
				if ev.TraceID().IsValid() {
					gotTrace, gotSpan = ev.TraceID().String(), ev.SpanID().String()
				}
				require.Equal(t, wantTrace, gotTrace, id)
				require.Equal(t, wantSpan, gotSpan, id)
				require.Equal(t, "pass", logAttrs(&ev)["gen_ai.evaluation.score.label"].AsString())
			}
			// The records still name the episode's own trace.
			if traced {
				require.NotEmpty(t, recs["prod"].TraceID)
				require.NotEqual(t, origTrace, recs["prod"].TraceID)
			} else {
				require.Empty(t, recs["prod"].TraceID)
			}
		})
	}
}

// With nothing configured there is no trace: no IDs in records, no trace
// context in sandbox commands.
func TestTracingOffByDefault(t *testing.T) {
	t.Parallel()
	mem := &memSink{}
	_, err := tracedEval(t).Run(context.Background(), eval.Config{
		Sandbox: (&sandboxtest.Fake{}).Provider(), Retries: 1, Backoff: time.Millisecond, Sinks: []sink.Sink{mem}})
	require.NoError(t, err)
	require.Len(t, mem.recs, 2)
	for _, r := range mem.recs {
		require.Empty(t, r.TraceID)
		require.Empty(t, r.SpanID)
		require.Equal(t, `""`, string(r.Output), "no TRACEPARENT for %s", r.SampleID)
	}
}

// An episode abandoned by the watchdog (a harness that ignores its
// context) still ends its attempt and episode spans, as a timeout.
func TestTracingTimeoutEndsSpans(t *testing.T) {
	t.Parallel()
	oc := newOtelCapture(t)
	release := make(chan struct{})
	defer close(release)
	e := &eval.Eval[string, string]{Name: "hang", Dataset: dataset.Slice[string]{{ID: "x", Input: "x"}},
		Harness: harness.Func[string, string](func(context.Context, *harness.Episode[string]) (string, error) {
			<-release
			return "", nil
		}),
		Judge: judge.Func[string, string](func(context.Context, *harness.Episode[string], string) (judge.Verdict, error) {
			return judge.Pass(""), nil
		})}
	mem := &memSink{}
	_, err := e.Run(context.Background(), eval.Config{TracerProvider: oc.tp, Timeout: 20 * time.Millisecond, Retries: -1, Sinks: []sink.Sink{mem}})
	require.NoError(t, err)
	require.Len(t, mem.recs, 1)
	require.Equal(t, sink.KindTimeout, mem.recs[0].ErrorKind)
	got := spanTree(oc.spans.Ended(), mustTraceID(t, mem.recs[0].TraceID))
	// The harness span is still open: its call has not returned.
	require.Equal(t, "episode (error)\n  attempt 0 (error)\n", got)
}
