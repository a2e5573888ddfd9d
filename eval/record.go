package eval

// Records: what an attempt leaves, and the episode seed.

import (
	"encoding/json"
	"hash/fnv"
	"io"
	"time"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
)

// buildRecord fills rec with an attempt's outcome. Tokens and cost are
// those of every attempt of the episode: earlier is what the attempts
// before this one used.
func (s *scheduler[T, O]) buildRecord(rec *sink.Record, ep *harness.Episode[T], start time.Time, status sink.Status, kind sink.ErrorKind, errMsg string, v *judge.Verdict, out any, earlier harness.Usage) {
	u := ep.Usage().Add(earlier)
	*rec = sink.Record{
		Schema: sink.SchemaVersion, RunID: s.runID, Eval: s.e.Name,
		SampleID: ep.Sample.ID, Epoch: ep.Epoch, Attempt: ep.Attempt,
		Status: status, Score: v.Score, Scores: v.Scores, Weight: v.Weight, Reason: v.Reason,
		Error: errMsg, ErrorKind: kind,
		Input: encodeJSON(ep.Sample.Input),
		Tags:  ep.Sample.Tags, StartedAt: start.UTC(),
		DurationMS:  float64(time.Since(start).Microseconds()) / 1000,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD,
		Seed: ep.Seed, ParentRunID: s.parentRunID,
	}
	if status != sink.Error || out != nil {
		rec.Output = encodeJSON(out)
	}
	if status != sink.Pass && status != sink.Fail {
		rec.Score = 0
	}
}

// encodeJSON encodes v for a record, with a fast path for the common
// string case. A value encoding/json rejects is kept as its error message.
func encodeJSON(v any) json.RawMessage {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return sink.AppendString(nil, x)
	case json.RawMessage:
		if json.Valid(x) {
			return x
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return sink.AppendString(nil, "unencodable: "+err.Error())
	}
	return b
}

// episodeSeed derives an episode's seed from the run seed, the sample ID
// and the epoch (FNV-1a, then a SplitMix64 finaliser), so that it depends on
// nothing else: not on order, concurrency or resume.
func episodeSeed(run uint64, sampleID string, epoch int) uint64 {
	h := fnv.New64a()
	io.WriteString(h, sampleID)
	x := h.Sum64() ^ run*0x9e3779b97f4a7c15 ^ uint64(epoch)*0xbf58476d1ce4e5b9
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
