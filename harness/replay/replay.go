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

	"github.com/proctor-evals/proctor/dataset/recorded"
	"github.com/proctor-evals/proctor/harness"
)

// Case is one recorded operation: its input, its output and the span it
// was traced under. It is [recorded.Case], named here too because an eval
// of recorded traffic names its input type beside its harness.
type Case = recorded.Case

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
