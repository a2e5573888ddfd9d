// Package sink defines the standard result row, [Record], and the [Sink]
// interface every result backend implements. Drivers live in subpackages:
// sink/jsonl (the durable, resumable log: the source of truth) and
// sink/parquetsink (columnar files for DuckDB, pandas and polars). The
// conformance suite every sink runs lives in sink/sinktest.
package sink

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// SchemaVersion is the version of Record's serialized form. Renaming or
// retyping a field bumps it; adding an optional field does not.
const SchemaVersion = 1

// Status is an episode's outcome.
type Status string

const (
	Pass     Status = "pass"     // the judge passed the agent's output
	Fail     Status = "fail"     // the agent ran and the judge failed it
	Error    Status = "error"    // infrastructure: sandbox, timeout, harness error, panic…
	Unscored Status = "unscored" // the judge ran but could not decide
)

// ErrorKind classifies an Error (or Unscored) record.
type ErrorKind string

const (
	KindTimeout   ErrorKind = "timeout"
	KindPanic     ErrorKind = "panic"
	KindSandbox   ErrorKind = "sandbox"
	KindHarness   ErrorKind = "harness"
	KindJudge     ErrorKind = "judge"
	KindCancelled ErrorKind = "cancelled"
	// KindNotSampled marks an unscored record that an asymmetric-sampling
	// judge left out of the expensive judge: weight 0, not a judge failure.
	KindNotSampled ErrorKind = "not_sampled"
	// KindLimit marks an episode stopped by a per-episode cap on tokens or
	// cost (Config.MaxEpisodeTokens, MaxEpisodeCostUSD): its usage is what
	// it spent. Not retried: a retry would spend as much again.
	KindLimit ErrorKind = "limit"
)

// Record is the standard row: one per finished episode. Its JSON form, one
// line of the JSONL log, is schema 1: the snake_case names in the tags, in
// this order.
//
//   - schema: 1 ([SchemaVersion]).
//   - run_id, eval: the run and the eval's name.
//   - variant: the harness variant, for an eval with variants.
//   - sample_id, epoch: with the variant, the episode's key: (run,
//     variant, sample, epoch) is recorded exactly once.
//   - attempt: 0 on the first try; retries count up.
//   - status: pass, fail (the agent was wrong), error (infrastructure:
//     timeout, panic, sandbox, harness or judge error, after retries),
//     unscored (the judge could not decide). Pass rates leave out error and
//     unscored episodes; a report always counts them.
//   - score, scores, weight: the judge's score in [0,1], its sub-scores,
//     and the inverse-probability weight of a sampled verdict.
//   - reason, error, error_kind: why; the error (with the stack for a
//     panic); its [ErrorKind].
//   - input, output: the sample's input and the harness's output, as JSON.
//   - tags: the sample's breakdown keys.
//   - started_at, duration_ms: when the last attempt started, and how long
//     it took.
//   - input_tokens, output_tokens, cost_usd: the usage the harness and the
//     judge recorded, over every attempt.
//   - seed: the episode's seed, derived from (run seed, sample ID, epoch).
//   - trace (Go: Transcript): PATH#OFFSET, the episode's transcript in the
//     run's transcript store beside the log (run.traces.jsonl for
//     run.jsonl; jsonl.TranscriptLink). The JSON name predates the word.
//   - judge_stages: the calls of each stage of the judge, and how many
//     gave a verdict (Go: JudgeStages).
//   - resources: the limits and image digest of the episode's sandbox.
//   - calls_replayed, replay_diverged_at: the model calls the gateway
//     answered from the call store when the episode ran again, and the
//     first whose request differed.
//   - parent_run_id: for a rejudged run, the run whose outputs it judged.
//   - reused_from: for a reused result, the run that produced it.
//   - worker: where the episode ran in a sharded or distributed run
//     ("host:pid").
//   - trace_id, span_id: the episode's OpenTelemetry trace and span, when
//     tracing is on.
//
// AppendJSON writes that form without reflection; encoding/json reads it.
type Record struct {
	Schema int    `json:"schema"`
	RunID  string `json:"run_id"`
	Eval   string `json:"eval"`
	// Variant names the harness variant the episode ran (Eval.Variants):
	// with the sample and the epoch it keys the episode. Empty for an eval
	// without variants and in logs written before they existed.
	Variant   string             `json:"variant,omitempty"`
	SampleID  string             `json:"sample_id"`
	Epoch     int                `json:"epoch"`
	Attempt   int                `json:"attempt"`
	Status    Status             `json:"status"`
	Score     float64            `json:"score"`
	Scores    map[string]float64 `json:"scores,omitempty"`
	Weight    float64            `json:"weight,omitempty"` // inverse-probability weight of a sampled verdict; 0 means 1
	Reason    string             `json:"reason,omitempty"`
	Error     string             `json:"error,omitempty"`
	ErrorKind ErrorKind          `json:"error_kind,omitempty"`
	// ErrorSource says where an error or unscored verdict came from: the
	// stage ("sandbox", "harness", "judge") and, for a judge, its path
	// through the combinators ("judge/cascade.expensive/rubric"). Empty
	// in logs written before it existed.
	ErrorSource string `json:"error_source,omitempty"`
	// JudgeStages counts the calls of each stage of the judge (its path,
	// as in ErrorSource) and those that gave a verdict:
	// "judge/cascade.cheap=1/1,judge/cascade.expensive/rubric=1/0", the
	// paths sorted, "%" and "," in them written %25 and %2C. Empty for a
	// judge without stages (no combinator, Named or Rubric) and in logs
	// written before it existed. A report fails its gates on a stage that
	// never gave a verdict, however few episodes reached it.
	JudgeStages  string            `json:"judge_stages,omitempty"`
	Input        json.RawMessage   `json:"input,omitempty"`  // the sample's input, as JSON
	Output       json.RawMessage   `json:"output,omitempty"` // the harness's output, as JSON; for both, see MaxJSONDepth
	Tags         map[string]string `json:"tags,omitempty"`
	StartedAt    time.Time         `json:"started_at"`
	DurationMS   float64           `json:"duration_ms"`
	InputTokens  int64             `json:"input_tokens"`
	OutputTokens int64             `json:"output_tokens"`
	CostUSD      float64           `json:"cost_usd"`
	// The judge's part of the usage above (which counts agent and judge
	// together): the agent's is the difference. Zero in logs written
	// before they existed, where the split is unknown.
	JudgeInputTokens  int64   `json:"judge_input_tokens,omitempty"`
	JudgeOutputTokens int64   `json:"judge_output_tokens,omitempty"`
	JudgeCostUSD      float64 `json:"judge_cost_usd,omitempty"`
	// Model and JudgeModel name the models the harness and the judge
	// spent their usage on, when they named one (harness.Usage.Model).
	Model      string `json:"model,omitempty"`
	JudgeModel string `json:"judge_model,omitempty"`
	// The simulated user's part of the usage above (a conversation's
	// other side, harness.Episode.AddSimulatorEvent), and its model: the
	// agent's part is what neither the judge nor the simulator spent.
	// Zero in logs written before they existed.
	SimulatorInputTokens  int64   `json:"simulator_input_tokens,omitempty"`
	SimulatorOutputTokens int64   `json:"simulator_output_tokens,omitempty"`
	SimulatorCostUSD      float64 `json:"simulator_cost_usd,omitempty"`
	SimulatorModel        string  `json:"simulator_model,omitempty"`
	// Resources are the limits and image (with the digest it resolved
	// to) of the episode's sandbox, sandbox.Resources.String; empty for an
	// episode without a sandbox.
	Resources string `json:"resources,omitempty"`
	// CallsReplayed counts the model calls the gateway answered from the
	// call store when the episode ran again (a retry, a resume): they cost
	// nothing and are in no usage above. ReplayDivergedAt is the number
	// (from 1) of the first call whose request differed from the recorded
	// one, which went live with every call after it; 0 when none did.
	CallsReplayed    int    `json:"calls_replayed,omitempty"`
	ReplayDivergedAt int    `json:"replay_diverged_at,omitempty"`
	Seed             uint64 `json:"seed"`
	Transcript       string `json:"trace,omitempty"` // a link that resolves to the episode's transcript
	// ParentRunID names the run this record was derived from (a rejudged
	// run links to the run whose outputs it judged again).
	ParentRunID string `json:"parent_run_id,omitempty"`
	// ReusedFrom names the run whose result this record reuses unchanged
	// (Config.ReuseFrom); empty for an episode that ran in this run.
	ReusedFrom string `json:"reused_from,omitempty"`
	// Worker says where the episode ran in a distributed or sharded run:
	// "host:pid". Empty for a run on one machine.
	Worker string `json:"worker,omitempty"`
	// TraceID and SpanID are the OpenTelemetry trace and span of the
	// episode (hex), when tracing is on.
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
}

// Key identifies an episode within a run: the unit of exactly-once.
type Key struct {
	Variant  string // empty for an eval without variants
	SampleID string
	Epoch    int
}

// Key returns the record's episode key.
func (r *Record) Key() Key { return Key{r.Variant, r.SampleID, r.Epoch} }

// EffectiveWeight returns Weight, or 1 when it is unset.
func (r *Record) EffectiveWeight() float64 {
	if r.Weight > 0 {
		return r.Weight
	}
	return 1
}

// Sink receives the records of a run.
//
// The engine calls Write from one goroutine at a time, in completion order,
// and Close once at the end of the run, even when the run was canceled (with
// a context that is not canceled, so that Close can flush). A sink need not
// be safe for concurrent use unless its documentation says so. Write must not
// keep r's maps or slices after it returns: the caller may reuse them.
// Write after Close returns an error wrapping ErrClosed.
type Sink interface {
	Write(ctx context.Context, r Record) error
	Close(ctx context.Context) error
}

// ErrClosed is returned by Write on a closed sink.
var ErrClosed = errors.New("sink: closed")

// Multi returns a sink that writes each record to every sink in order and
// joins their errors. A failing sink does not stop the others.
func Multi(sinks ...Sink) Sink {
	return multi(append([]Sink(nil), sinks...))
}

type multi []Sink

func (m multi) Write(ctx context.Context, r Record) error {
	var errs []error
	for _, s := range m {
		if err := s.Write(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m multi) Close(ctx context.Context) error {
	var errs []error
	for _, s := range m {
		if err := s.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Discard is a sink that drops every record.
var Discard Sink = discard{}

type discard struct{}

func (discard) Write(context.Context, Record) error { return nil }
func (discard) Close(context.Context) error         { return nil }
