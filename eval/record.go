package eval

// Records: what an attempt leaves, and the episode seed.

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/jsontext"
	"github.com/proctor-evals/proctor/internal/judging"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
)

// buildRecord fills rec with an attempt's outcome and returns what the
// attempt used; output is nil when the harness produced none. Tokens and cost
// are those of every attempt of the episode: j holds what the attempts
// before this one used (all of it, and the judge's part).
func (s *scheduler[T, O]) buildRecord(rec *sink.Record, ep *harness.Episode[T], agent, jdg harness.Usage, start time.Time, status sink.Status, kind sink.ErrorKind, errMsg string, v *judge.Verdict, input, output json.RawMessage, j *job) (used harness.Usage) {
	used = agent.Add(jdg)
	u := j.usage.Add(used)
	jdg = j.judgeUsage.Add(jdg)
	sim := j.simUsage.Add(simulatorUsage(ep, agent))
	model := agent.Model
	if model == "" {
		model = j.usage.Model // the agent's, from an earlier attempt
	}
	*rec = sink.Record{
		Schema: sink.SchemaVersion, RunID: s.runID, Eval: s.e.Name,
		Variant: ep.Variant, SampleID: ep.Sample.ID, Epoch: ep.Epoch, Attempt: ep.Attempt,
		Status: status, Score: v.Score, Scores: v.Scores, Weight: v.Weight, Reason: v.Reason,
		Error: errMsg, ErrorKind: kind, JudgeStages: judging.Stages(ep),
		Input: input, Output: output,
		Tags: ep.Sample.Tags, StartedAt: start.UTC(),
		DurationMS:  float64(time.Since(start).Microseconds()) / 1000,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD,
		JudgeInputTokens: jdg.InputTokens, JudgeOutputTokens: jdg.OutputTokens, JudgeCostUSD: jdg.CostUSD,
		Model: model, JudgeModel: jdg.Model,
		SimulatorInputTokens: sim.InputTokens, SimulatorOutputTokens: sim.OutputTokens, SimulatorCostUSD: sim.CostUSD,
		SimulatorModel: sim.Model,
		Seed:           ep.Seed, ParentRunID: s.parentRunID,
		CallsReplayed: j.replay.calls, ReplayDivergedAt: j.replay.divergedAt,
	}
	if status != sink.Pass && status != sink.Fail {
		rec.Score = 0
	}
	if ep.Sandbox != nil {
		rec.Resources = ep.Sandbox.Resources().String()
	}
	return used
}

// simulatorUsage is a simulated user's part of the attempt's agent usage:
// none when checkUsage zeroed the agent's usage as unusable.
func simulatorUsage[T any](ep *harness.Episode[T], agent harness.Usage) harness.Usage {
	sim := ep.SimulatorUsage()
	if sim == (harness.Usage{}) || agent.Tokens() == 0 && agent.CostUSD == 0 || !usable(sim) {
		return harness.Usage{}
	}
	return sim
}

// encodeJSON encodes v for a record, with a fast path for the common
// string case. A value encoding/json rejects is kept as its error message.
func encodeJSON(v any) json.RawMessage {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return jsontext.AppendString(nil, x)
	case json.RawMessage:
		if json.Valid(x) {
			return x
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return jsontext.AppendString(nil, "unencodable: "+err.Error())
	}
	return b
}

// encodeOf is encodeJSON(*v) without boxing *v when it is a string or raw
// JSON, the common inputs and outputs: a pointer goes into an interface
// without an allocation, a string does not.
func encodeOf[V any](v *V) json.RawMessage {
	switch x := any(v).(type) {
	case *string:
		return jsontext.AppendString(nil, *x)
	case *json.RawMessage:
		return encodeJSON(*x)
	}
	return encodeJSON(*v)
}

// encodeHeld is encodeOf for a value on the heap already (a sample's
// input), which byPointer says encoding/json writes as it writes a
// pointer to it (encodesByPointer): then it is encoded through its
// pointer, not copied into an interface. (An output is not: on the
// worker's stack, it would move to the heap.)
func encodeHeld[V any](v *V, byPointer bool) json.RawMessage {
	switch any(v).(type) {
	case *string, *json.RawMessage:
	default:
		if byPointer {
			return encodeJSON(v)
		}
	}
	return encodeOf(v)
}

// inputEncoder encodes inputs as encodeJSON does, into one buffer reused
// from call to call: hashing a million inputs allocates nothing per input.
type inputEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
	str []byte
}

// encode returns the encoding of v, valid until the next call.
func (e *inputEncoder) encode(v any) []byte {
	switch x := v.(type) {
	case nil, json.RawMessage:
		return encodeJSON(v)
	case string:
		e.str = jsontext.AppendString(e.str[:0], x)
		return e.str
	}
	if e.enc == nil {
		e.enc = json.NewEncoder(&e.buf)
	}
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return encodeJSON(v) // its error message, as a record would hold it
	}
	return bytes.TrimSuffix(e.buf.Bytes(), []byte("\n"))
}

// episodeSeed derives an episode's seed from the run seed, the sample ID
// and the epoch (FNV-1a, then a SplitMix64 finaliser), so that it depends on
// nothing else: not on order, concurrency or resume.
func episodeSeed(run uint64, sampleID string, epoch int) uint64 {
	x := fnv1a(sampleID) ^ run*0x9e3779b97f4a7c15 ^ uint64(epoch)*0xbf58476d1ce4e5b9
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// fnv1a is FNV-1a 64 of s, as hash/fnv computes it, without allocating.
func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
