// Package replay evaluates recorded production traffic: a [Case] is one
// operation a production system carried out (its input, its output and the
// span it was traced under), [Harness] returns the recorded output without
// running any agent, so that the same Eval, judges and report work on
// production traffic, and [Window] makes a job run per time window (hourly
// from cron, say) idempotent. [JSONL] loads recorded conversations;
// dataset/otlp loads OpenTelemetry traces.
//
// # Verdicts back to the tracing tool
//
// Case implements OriginSpan: when tracing is on, the engine emits each
// verdict as a gen_ai.evaluation.result event correlated with the recorded
// operation's span (its trace ID and span ID), not with the episode's own
// span, so the verdict shows up beside the production trace it judges.
//
// # An hourly job
//
//	w := replay.WindowAt(time.Now().Add(-time.Hour), time.Hour) // the last full hour
//	e := &eval.Eval[replay.Case, json.RawMessage]{
//		Name:    "support-bot",
//		Dataset: w.Filter(otlp.Traces("/var/otel/traces.jsonl", nil)),
//		Harness: replay.Harness(),
//		Judge:   judge.Subsample(cheap, grader, 0.05, 1), // all suspected failures, 5% of the rest
//	}
//	rep, err := e.Run(ctx, eval.Config{RunID: w.RunID(e.Name), Log: w.Log("runs", e.Name)})
//
// Running the job again for the same window (a retried cron job, a crash)
// resumes its log: episodes already judged are not judged, nor billed,
// again.
package replay

import (
	"context"
	"encoding/json"
	"time"

	"github.com/proctor-evals/proctor/harness"
)

// Case is one recorded operation: what a production system was given, what
// it answered, and where it was traced. It is the sample input of an
// evaluation of production traffic; its JSON form is the record's input.
type Case struct {
	// Input is what the operation was given: for a GenAI span, the input
	// messages (gen_ai.input.messages).
	Input json.RawMessage `json:"input"`
	// Output is what it answered: for a GenAI span, the output messages
	// (gen_ai.output.messages). Null when none was recorded.
	Output json.RawMessage `json:"output"`
	// TraceID and SpanID identify the operation's span, in lowercase hex
	// (32 and 16 digits); empty when it was not traced.
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
	// Time is when the operation started.
	Time time.Time `json:"time,omitzero"`
	// Attrs are the operation's other attributes (model, finish reasons,
	// token counts…), as strings: what a judge may want besides the
	// input and output.
	Attrs map[string]string `json:"attrs,omitempty"`
}

// OriginSpan returns the span the case was recorded under. The engine
// correlates the verdict's gen_ai.evaluation.result event with it.
func (c Case) OriginSpan() (traceID, spanID string) { return c.TraceID, c.SpanID }

// Harness returns the harness that replays a case: it returns the recorded
// output as it is, runs no agent, makes no call and costs nothing. Its
// transcript holds one event of kind "replay" naming the recorded span.
func Harness() harness.Harness[Case, json.RawMessage] {
	return harness.Func[Case, json.RawMessage](func(ctx context.Context, ep *harness.Episode[Case]) (json.RawMessage, error) {
		c := ep.Sample.Input
		name := "recorded output"
		if c.TraceID != "" {
			name = "recorded output of span " + c.TraceID + "/" + c.SpanID
		}
		ep.AddEvent(harness.Event{Kind: "replay", Name: name})
		if len(c.Output) == 0 {
			return json.RawMessage("null"), nil
		}
		return c.Output, nil
	})
}
