package eval

// OpenTelemetry, through the API only: one trace per episode, and each
// verdict as a gen_ai.evaluation.result event. Nothing here runs until a
// provider is configured (Config.TracerProvider, Config.LoggerProvider, or the globals):
// the scheduler checks one nil field per attempt, and starts no span,
// builds no attribute and allocates nothing when it is nil.
//
// The tree of an episode:
//
//	episode                    proctor.run_id, sample_id, epoch, seed; at the end attempt, status, error_kind
//	├── attempt                proctor.attempt; at the end status, error_kind
//	│   ├── sandbox.provision  (the first fork of a sample provisions its environment)
//	│   ├── sandbox.fork
//	│   ├── harness
//	│   │   └── sandbox.exec   (the command gets TRACEPARENT: an instrumented agent joins here)
//	│   └── judge
//	│       └── chat {model}   (judge/openai, judge/anthropic: GenAI client spans)
//	└── attempt                (a retry)
//
// Records carry the episode span's trace and span IDs. A trace per
// episode, not per run: a run of 100,000 episodes is unusable as one
// trace. The run's own context span, if any, is linked from each episode.

import (
	"context"
	"reflect"
	"strconv"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/log"
	lognoop "go.opentelemetry.io/otel/log/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/semconv"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
)

const scopeName = "github.com/proctor-evals/proctor/eval"

// maxExplanation bounds gen_ai.evaluation.explanation: a judge's reason
// can be a whole grader answer.
const maxExplanation = 2048

// telemetry is a run's tracer and event logger, each nil when off.
type telemetry struct {
	tracer trace.Tracer
	events log.Logger
}

// newTelemetry resolves the providers of cfg: its own, else the globals.
// A global that nobody installed, or a no-op provider, is off.
func newTelemetry(cfg *Config) telemetry {
	var t telemetry
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if !unsetProvider(tp) {
		t.tracer = tp.Tracer(scopeName, trace.WithInstrumentationVersion(proctorVersion()), trace.WithSchemaURL(semconv.SchemaURL))
	}
	lp := cfg.LoggerProvider
	if lp == nil {
		lp = otel.GetLoggerProvider()
	}
	if !unsetProvider(lp) {
		t.events = lp.Logger(scopeName, log.WithInstrumentationVersion(proctorVersion()), log.WithSchemaURL(semconv.SchemaURL))
	}
	return t
}

// globalPkg is where the otel package's placeholder providers live: what
// otel.GetTracerProvider and otel.GetLoggerProvider return until a
// provider is installed. Their spans would record nothing, but starting
// them costs allocations per episode; recognizing them keeps a run with
// nothing configured free. Should the package move, the check fails safe:
// spans are started, and are non-recording.
const globalPkg = "go.opentelemetry.io/otel/internal/global"

func unsetProvider(p any) bool {
	switch p.(type) {
	case tracenoop.TracerProvider, lognoop.LoggerProvider:
		return true
	}
	t := reflect.TypeOf(p)
	return t.Kind() == reflect.Pointer && t.Elem().PkgPath() == globalPkg
}

// episodeSpans are an episode's open spans, kept in its job.
type episodeSpans struct {
	episode trace.Span // the trace's root, ended when the episode settles
	attempt trace.Span // the attempt in flight, ended by conclude
}

// startAttempt starts the attempt's span, and the episode's on its first
// attempt, and returns ctx (the sandbox's, when forking) and base (the
// attempt's) with the attempt span in them. An episode the sampler drops
// gets no child spans, but its context still reaches sandbox commands, so
// that an instrumented agent drops its spans too.
func (s *scheduler[T, O]) startAttempt(ctx, base context.Context, j *job, ep *harness.Episode[T], forks bool) (context.Context, context.Context) {
	if j.spans.episode == nil {
		opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithAttributes(
			semconv.RunID.String(ep.RunID),
			semconv.Eval.String(s.e.Name),
			semconv.SampleID.String(ep.Sample.ID),
			semconv.Epoch.Int(ep.Epoch),
			semconv.Seed.String(strconv.FormatUint(ep.Seed, 10)),
		)}
		if caller := trace.SpanContextFromContext(ctx); caller.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: caller}))
		}
		_, j.spans.episode = s.tel.tracer.Start(context.Background(), "episode", opts...)
	}
	span := j.spans.episode
	if span.IsRecording() {
		parent := trace.ContextWithSpan(context.Background(), span)
		_, span = s.tel.tracer.Start(parent, "attempt", trace.WithAttributes(semconv.Attempt.Int(ep.Attempt)))
		j.spans.attempt = span
	}
	if forks {
		ctx = trace.ContextWithSpan(ctx, span)
	}
	return ctx, trace.ContextWithSpan(base, span)
}

// startStage starts the span of the harness or the judge; untraced (or
// unsampled), it returns ctx and nil.
func (s *scheduler[T, O]) startStage(ctx context.Context, name string) (context.Context, trace.Span) {
	if s.tel.tracer == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return s.tel.tracer.Start(ctx, name)
}

// endStage ends a stage's span with its error, if any.
func endStage(span trace.Span, kind sink.ErrorKind, err error) {
	if span == nil {
		return
	}
	if err != nil {
		if kind != "" {
			span.SetAttributes(semconv.ErrorKind.String(string(kind)))
		}
		span.SetStatus(codes.Error, firstLine(err.Error()))
	}
	span.End()
}

// traceOutcome stamps an attempt's record with its episode's trace, ends
// the attempt's span and emits the verdict. conclude calls it, once per
// attempt, when telemetry is on.
//
//go:noinline
func (s *scheduler[T, O]) traceOutcome(j *job, ep *harness.Episode[T], v *judge.Verdict) {
	rec := j.rec()
	var sc trace.SpanContext
	if root := j.spans.episode; root != nil {
		sc = root.SpanContext()
		if sc.IsSampled() { // a link to a trace nobody keeps would lead nowhere
			rec.TraceID, rec.SpanID = sc.TraceID().String(), sc.SpanID().String()
		}
	}
	if a := j.spans.attempt; a != nil {
		endOutcome(a, rec)
		j.spans.attempt = nil
	}
	if s.tel.events != nil && (rec.Status == sink.Pass || rec.Status == sink.Fail ||
		rec.Status == sink.Unscored && rec.ErrorKind != sink.KindNotSampled) {
		s.emitVerdict(sc, ep, rec, v)
	}
}

// endOutcome ends span with the outcome rec records.
func endOutcome(span trace.Span, rec *sink.Record, more ...attribute.KeyValue) {
	if !span.IsRecording() {
		span.End()
		return
	}
	// The common outcomes in one call: each call is an allocation.
	switch status := semconv.Status.String(string(rec.Status)); {
	case rec.Status == sink.Pass || rec.Status == sink.Fail:
		span.SetAttributes(append(more, status, semconv.Score.Float64(rec.Score))...)
	case rec.ErrorKind != "":
		span.SetAttributes(append(more, status, semconv.ErrorKind.String(string(rec.ErrorKind)))...)
	default:
		span.SetAttributes(append(more, status)...)
	}
	if rec.Status == sink.Error {
		span.SetStatus(codes.Error, firstLine(rec.Error))
	}
	span.End()
}

// endEpisode ends the episode's span once it has settled: recorded, or
// left for resume. settle calls it.
func (s *scheduler[T, O]) endEpisode(j *job) {
	root := j.spans.episode
	if root == nil {
		return
	}
	endOutcome(root, j.rec(), semconv.Attempt.Int(j.attempt))
	j.spans = episodeSpans{}
}

// originSpanner is a sample input that replays a production trace: its
// verdict event belongs to that trace's span, not to the episode's.
type originSpanner interface {
	OriginSpan() (traceID, spanID string)
}

// emitVerdict emits the verdict as a gen_ai.evaluation.result event,
// correlated with the span sc (the episode's) or, for a sample input that
// replays a production trace, with the span it came from.
func (s *scheduler[T, O]) emitVerdict(sc trace.SpanContext, ep *harness.Episode[T], rec *sink.Record, v *judge.Verdict) {
	if o, ok := any(ep.Sample.Input).(originSpanner); ok {
		if origin, ok := originContext(o); ok {
			sc = origin
		}
	}
	ctx := context.Background()
	if sc.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, sc)
	}
	if !s.tel.events.Enabled(ctx, log.EnabledParameters{Severity: log.SeverityInfo, EventName: semconv.EventGenAIEvaluationResult}) {
		return
	}
	var r log.Record
	r.SetEventName(semconv.EventGenAIEvaluationResult)
	r.SetTimestamp(time.Now())
	r.SetSeverity(log.SeverityInfo)
	label := string(rec.Status)
	r.AddAttributes(
		semconv.GenAIEvaluationName.String(s.e.Name),
		semconv.GenAIEvaluationScoreLabel.String(label),
		semconv.RunID.String(rec.RunID),
		semconv.SampleID.String(rec.SampleID),
		semconv.Epoch.Int(rec.Epoch),
	)
	if rec.Status != sink.Unscored {
		r.AddAttributes(semconv.GenAIEvaluationScoreValue.Float64(rec.Score))
	}
	if v.Reason != "" {
		r.AddAttributes(semconv.GenAIEvaluationExplanation.String(clip(v.Reason, maxExplanation)))
	}
	s.tel.events.Emit(ctx, r)
}

// originContext is the span an input replays, from its hex IDs.
func originContext(o originSpanner) (trace.SpanContext, bool) {
	tid, sid := o.OriginSpan()
	t, err := trace.TraceIDFromHex(tid)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sp, err := trace.SpanIDFromHex(sid)
	if err != nil {
		return trace.SpanContext{}, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: t, SpanID: sp, TraceFlags: trace.FlagsSampled, Remote: true}), true
}

// clip cuts s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	i := n - len(mark)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + mark
}
