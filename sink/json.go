package sink

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/proctor-evals/proctor/internal/jsontext"
)

// MaxJSONDepth is the deepest nesting of a record's input or output
// written as it is. Deeper values are written as a JSON string holding
// their text (the engine makes such an episode an error instead): read
// back in a record, one level deeper, they could exceed what JSON readers
// accept (10,000 levels for encoding/json; less for others).
const MaxJSONDepth = jsontext.MaxDepth

// AppendJSON appends r's JSON form (one object, no newline) to b. It writes
// the same document encoding/json would (fields in declaration order, map
// keys sorted) without reflection: the log is on every episode's hot path.
// Non-finite floats, which JSON cannot carry, are written as null.
func (r *Record) AppendJSON(b []byte) []byte {
	b = append(b, `{"schema":`...)
	b = jsontext.AppendInt(b, int64(r.Schema))
	b = appendStringField(b, `,"run_id":`, r.RunID)
	b = appendStringField(b, `,"eval":`, r.Eval)
	b = appendOptString(b, `,"variant":`, r.Variant)
	b = appendStringField(b, `,"sample_id":`, r.SampleID)
	b = append(b, `,"epoch":`...)
	b = jsontext.AppendInt(b, int64(r.Epoch))
	b = append(b, `,"attempt":`...)
	b = jsontext.AppendInt(b, int64(r.Attempt))
	b = appendStringField(b, `,"status":`, string(r.Status))
	b = append(b, `,"score":`...)
	b = jsontext.AppendFloat(b, r.Score)
	if len(r.Scores) > 0 {
		b = append(b, `,"scores":{`...)
		var buf [8]string
		for i, k := range sortedKeys(r.Scores, buf[:0]) {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsontext.AppendString(b, k)
			b = append(b, ':')
			b = jsontext.AppendFloat(b, r.Scores[k])
		}
		b = append(b, '}')
	}
	if r.Weight != 0 {
		b = append(b, `,"weight":`...)
		b = jsontext.AppendFloat(b, r.Weight)
	}
	b = appendOptString(b, `,"reason":`, r.Reason)
	b = appendOptString(b, `,"error":`, r.Error)
	b = appendOptString(b, `,"error_kind":`, string(r.ErrorKind))
	b = appendOptString(b, `,"error_source":`, r.ErrorSource)
	b = appendOptString(b, `,"judge_stages":`, r.JudgeStages)
	b = appendRaw(b, `,"input":`, r.Input)
	b = appendRaw(b, `,"output":`, r.Output)
	if len(r.Tags) > 0 {
		b = append(b, `,"tags":{`...)
		var buf [8]string
		for i, k := range sortedKeys(r.Tags, buf[:0]) {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsontext.AppendString(b, k)
			b = append(b, ':')
			b = jsontext.AppendString(b, r.Tags[k])
		}
		b = append(b, '}')
	}
	b = append(b, `,"started_at":"`...)
	b = jsontext.AppendTime(b, r.StartedAt)
	b = append(b, `","duration_ms":`...)
	b = jsontext.AppendFloat(b, r.DurationMS)
	b = append(b, `,"input_tokens":`...)
	b = jsontext.AppendInt(b, r.InputTokens)
	b = append(b, `,"output_tokens":`...)
	b = jsontext.AppendInt(b, r.OutputTokens)
	b = append(b, `,"cost_usd":`...)
	b = jsontext.AppendFloat(b, r.CostUSD)
	if r.JudgeInputTokens != 0 {
		b = append(b, `,"judge_input_tokens":`...)
		b = jsontext.AppendInt(b, r.JudgeInputTokens)
	}
	if r.JudgeOutputTokens != 0 {
		b = append(b, `,"judge_output_tokens":`...)
		b = jsontext.AppendInt(b, r.JudgeOutputTokens)
	}
	if r.JudgeCostUSD != 0 { // NaN too, as null: omitempty omits only zero
		b = append(b, `,"judge_cost_usd":`...)
		b = jsontext.AppendFloat(b, r.JudgeCostUSD)
	}
	b = appendOptString(b, `,"model":`, r.Model)
	b = appendOptString(b, `,"judge_model":`, r.JudgeModel)
	if r.SimulatorInputTokens != 0 {
		b = append(b, `,"simulator_input_tokens":`...)
		b = jsontext.AppendInt(b, r.SimulatorInputTokens)
	}
	if r.SimulatorOutputTokens != 0 {
		b = append(b, `,"simulator_output_tokens":`...)
		b = jsontext.AppendInt(b, r.SimulatorOutputTokens)
	}
	if r.SimulatorCostUSD != 0 {
		b = append(b, `,"simulator_cost_usd":`...)
		b = jsontext.AppendFloat(b, r.SimulatorCostUSD)
	}
	b = appendOptString(b, `,"simulator_model":`, r.SimulatorModel)
	b = appendOptString(b, `,"resources":`, r.Resources)
	if r.CallsReplayed != 0 {
		b = append(b, `,"calls_replayed":`...)
		b = jsontext.AppendInt(b, int64(r.CallsReplayed))
	}
	if r.ReplayDivergedAt != 0 {
		b = append(b, `,"replay_diverged_at":`...)
		b = jsontext.AppendInt(b, int64(r.ReplayDivergedAt))
	}
	b = append(b, `,"seed":`...)
	b = strconv.AppendUint(b, r.Seed, 10)
	b = appendOptString(b, `,"trace":`, r.Transcript)
	b = appendOptString(b, `,"parent_run_id":`, r.ParentRunID)
	b = appendOptString(b, `,"reused_from":`, r.ReusedFrom)
	b = appendOptString(b, `,"worker":`, r.Worker)
	b = appendOptString(b, `,"trace_id":`, r.TraceID)
	b = appendOptString(b, `,"span_id":`, r.SpanID)
	return append(b, '}')
}

// MarshalJSON implements json.Marshaler with AppendJSON.
func (r Record) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// sortedKeys returns m's keys in order, in buf while they fit: a record's
// few tags and scores then cost no allocation.
func sortedKeys[V any](m map[string]V, buf []string) []string {
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendStringField and the two below take the field's key with its
// comma and colon (`,"name":`), so that it is one append.
func appendStringField(b []byte, key, v string) []byte {
	return jsontext.AppendString(append(b, key...), v)
}

func appendOptString(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendStringField(b, key, v)
}

func appendRaw(b []byte, key string, v json.RawMessage) []byte {
	if len(v) == 0 {
		return b
	}
	return jsontext.AppendRawJSON(append(b, key...), v)
}
