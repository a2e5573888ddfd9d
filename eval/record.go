package eval

// Records: what an attempt leaves, and the episode seed.

import (
	"bytes"
	"encoding/json"
	"time"
	"unsafe"

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
	// Field by field into a cleared record: a composite literal assigned
	// through a pointer is built in a temporary and copied, the whole
	// record twice on the path of every episode.
	*rec = sink.Record{}
	rec.Schema, rec.RunID, rec.Eval = sink.SchemaVersion, s.runID, s.e.Name
	rec.Variant, rec.SampleID, rec.Epoch, rec.Attempt = ep.Variant, ep.Sample.ID, ep.Epoch, ep.Attempt
	rec.Status, rec.Scores, rec.Weight, rec.Reason = status, v.Scores, v.Weight, v.Reason
	if status == sink.Pass || status == sink.Fail {
		rec.Score = v.Score
	}
	rec.Error, rec.ErrorKind, rec.JudgeStages = errMsg, kind, judging.Stages(ep)
	if s.ownBuffers && input != nil {
		// The job's buffer is encoded into again for its next episode
		// while this record waits for the recorder: the record takes a
		// copy, into its own.
		j.fin.input = append(j.fin.input[:0], input...)
		input = j.fin.input
	}
	rec.Input, rec.Output = input, output
	rec.Tags, rec.StartedAt = ep.Sample.Tags, start.UTC()
	rec.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	rec.InputTokens, rec.OutputTokens, rec.CostUSD = u.InputTokens, u.OutputTokens, u.CostUSD
	rec.JudgeInputTokens, rec.JudgeOutputTokens, rec.JudgeCostUSD = jdg.InputTokens, jdg.OutputTokens, jdg.CostUSD
	rec.Model, rec.JudgeModel = model, jdg.Model
	rec.SimulatorInputTokens, rec.SimulatorOutputTokens, rec.SimulatorCostUSD = sim.InputTokens, sim.OutputTokens, sim.CostUSD
	rec.SimulatorModel = sim.Model
	rec.Seed, rec.ParentRunID = ep.Seed, s.parentRunID
	rec.CallsReplayed, rec.ReplayDivergedAt = j.replay.calls, j.replay.divergedAt
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

// encodeInput is encodeHeld of a job's input, into the job's own buffer
// when the run owns its records' buffers (ownBuffers): no allocation an
// episode for an input that is a string, or that encodes through its
// pointer, the common inputs.
func (s *scheduler[T, O]) encodeInput(w *workerState[T], j *job, v *T) json.RawMessage {
	if !s.ownBuffers {
		if s.inputStrings != nil {
			return s.inputStrings.append(nil, unsafe.Pointer(v))
		}
		return encodeHeld(v, s.inputsByPointer)
	}
	if s.inputStrings != nil {
		j.inbuf = s.inputStrings.append(j.inbuf[:0], unsafe.Pointer(v))
		return j.inbuf
	}
	switch x := any(v).(type) {
	case *string:
		j.inbuf = jsontext.AppendString(j.inbuf[:0], *x)
		return j.inbuf
	case *json.RawMessage:
		return encodeJSON(*x) // the sample's own bytes when valid
	}
	if !s.inputsByPointer {
		return encodeOf(v)
	}
	j.inbuf = append(j.inbuf[:0], w.enc.encode(v)...)
	if w.enc.buf.Cap() > maxKeptBuffer {
		w.enc.buf = bytes.Buffer{} // a huge input's buffer is not worth keeping
	}
	return j.inbuf
}

// encodeOutput is encodeOf of an attempt's output, into the buffer of the
// job's finished episode when it owns it (ownBuffers) and the output is a
// string. (Any other is encoded as it was: through an interface, out
// would move to the heap from the worker's stack.)
func (s *scheduler[T, O]) encodeOutput(j *job, out *O) json.RawMessage {
	if x, ok := any(out).(*string); ok && s.ownBuffers {
		j.rec()
		f := j.fin
		f.output = jsontext.AppendString(f.output[:0], *x)
		return f.output
	}
	return encodeOf(out)
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
