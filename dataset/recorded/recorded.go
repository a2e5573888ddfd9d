// Package recorded holds the element type of datasets of recorded
// production traffic: a [Case] is one operation a production system
// carried out, with its input, its output and the span it was traced
// under.
//
// Its loaders are harness/replay's JSONL (recorded conversations) and
// dataset/otlp's Traces (OpenTelemetry traces); replay.Harness judges the
// recorded output again. The type lives here, on the floor of datasets,
// so that a loader of traffic needs no harness; harness/replay re-exports
// it as replay.Case, the name an eval of traffic usually writes.
package recorded

import (
	"encoding/json"
	"time"
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
// correlates the verdict's gen_ai.evaluation.result event with it, so that
// the verdict shows up beside the production trace it judges.
func (c Case) OriginSpan() (traceID, spanID string) { return c.TraceID, c.SpanID }

// SampleID is the name of the case's sample when its source gives none:
// "TRACE_ID-SPAN_ID", or TRACE_ID alone without a span ID. Every loader
// of traffic names samples so, so that one operation has one ID whichever
// file it was read from.
func (c Case) SampleID() string {
	if c.SpanID == "" {
		return c.TraceID
	}
	return c.TraceID + "-" + c.SpanID
}
