// Package harness defines how an agent is run on one episode: the [Episode]
// it receives (sample, epoch, seed, sandbox, and a recorder for its transcript and
// token usage), the [Harness] interface, the [Func] adapter, and [Command],
// a harness that runs an external agent CLI in the episode's sandbox.
package harness

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/internal/judgestages"
	"github.com/proctor-evals/proctor/internal/judging"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/usage"
)

// Episode is one run of an agent on one sample: sample × epoch. The engine
// builds it; harnesses and judges read it and record into it.
type Episode[T any] struct {
	RunID   string
	Sample  dataset.Sample[T]
	Variant string           // the eval's variant this episode runs ("" for an eval without variants)
	Epoch   int              // 0-based repeat index
	Attempt int              // 0 on the first try, 1.. on retries
	Seed    uint64           // derived from (run seed, sample ID, epoch): reproducible
	Sandbox *sandbox.Sandbox // nil when the eval has no sandbox provider

	mu      sync.Mutex
	usage   *roleUsage // nil until usage is recorded: an episode without any (a no-op harness, a plain judge) is smaller
	judging bool
	events  []Event
	stages  *judgestages.Tally // the judge's stages, counted by package judge; nil for a judge without
}

// Usage is what an episode consumed from model providers: the type of
// package usage, kept here so that harness.Usage keeps working.
type Usage = usage.Usage

// Event is one step of an episode's transcript.
type Event struct {
	Time     time.Time       `json:"time"`
	Kind     string          `json:"kind"` // "model", "tool", "command", "judge", "note"…
	Name     string          `json:"name,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	Duration time.Duration   `json:"duration_ns,omitempty"`
	Usage    Usage           `json:"usage,omitzero"`
	Error    string          `json:"error,omitempty"`
}

// Transcript is an episode's events as the run's transcript store keeps them
// beside its log, one JSON line each; a record's transcript link points to it.
type Transcript struct {
	RunID    string  `json:"run_id"`
	SampleID string  `json:"sample_id"`
	Epoch    int     `json:"epoch"`
	Attempt  int     `json:"attempt"`
	Events   []Event `json:"events"`
}

// AddEvent appends ev to the episode's transcript and adds its usage to the
// episode's totals. A zero ev.Time is set to now. Name the model in
// ev.Usage.Model, so that the report can split cost by model. Safe for
// concurrent use.
func (ep *Episode[T]) AddEvent(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ep.mu.Lock()
	ep.events = append(ep.events, ev)
	ep.addUsage(ev.Usage)
	ep.mu.Unlock()
}

// AddSimulatorEvent is [Episode.AddEvent] for a step of a simulated user
// (package harness/conversation records its turns so): its usage counts in
// the episode's totals, and apart as the simulator's, which the record,
// the report's cost split and the history keep as a third role beside
// the agent's and the judge's. Safe for concurrent use.
func (ep *Episode[T]) AddSimulatorEvent(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ep.mu.Lock()
	ep.events = append(ep.events, ev)
	if ev.Usage != (Usage{}) {
		r := ep.roles()
		if ep.judging {
			r.judge = r.judge.Add(ev.Usage)
		} else {
			// The agent's part counts it, but stays named by the agent's model.
			u := ev.Usage
			u.Model = ""
			r.agent = r.agent.Add(u)
			r.sim = r.sim.Add(ev.Usage)
		}
	}
	ep.mu.Unlock()
}

// roleUsage is an episode's usage by role.
type roleUsage struct {
	agent Usage // recorded before the judge was called
	judge Usage // recorded after
	sim   Usage // the part of agent a simulated user spent
}

// roles returns ep's usage by role, made on first use; ep.mu is held.
func (ep *Episode[T]) roles() *roleUsage {
	if ep.usage == nil {
		ep.usage = new(roleUsage)
	}
	return ep.usage
}

// SimulatorUsage returns the part of the agent's usage ([Episode.UsageByRole])
// that a simulated user spent ([Episode.AddSimulatorEvent]).
func (ep *Episode[T]) SimulatorUsage() Usage {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.usage == nil {
		return Usage{}
	}
	return ep.usage.sim
}

// AddUsage adds u to the episode's totals without a transcript event.
func (ep *Episode[T]) AddUsage(u Usage) {
	ep.mu.Lock()
	ep.addUsage(u)
	ep.mu.Unlock()
}

func (ep *Episode[T]) addUsage(u Usage) {
	if u == (Usage{}) {
		return
	}
	if r := ep.roles(); ep.judging {
		r.judge = r.judge.Add(u)
	} else {
		r.agent = r.agent.Add(u)
	}
}

// Usage returns the episode's totals so far, agent and judge together.
func (ep *Episode[T]) Usage() Usage {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.usage == nil {
		return Usage{}
	}
	return ep.usage.agent.Add(ep.usage.judge)
}

// startJudging marks the end of the agent's part of the attempt: usage
// recorded from then on is the judge's. The engine calls it (through
// internal/judging) when the harness has returned, before it calls the
// judge.
func (ep *Episode[T]) startJudging() {
	ep.mu.Lock()
	ep.judging = true
	ep.mu.Unlock()
}

func (ep *Episode[T]) isJudging() bool {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.judging
}

// stageCalled counts a call of a stage of the judge.
func (ep *Episode[T]) stageCalled(path string, verdict bool) {
	ep.mu.Lock()
	if ep.stages == nil {
		ep.stages = new(judgestages.Tally)
	}
	ep.stages.Add(path, verdict)
	ep.mu.Unlock()
}

// judgeStages returns the counts of the judge's stages in a record's
// judge_stages form.
func (ep *Episode[T]) judgeStages() string {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.stages == nil {
		return ""
	}
	return ep.stages.String()
}

// judgingEpisode is an *Episode of any sample type.
type judgingEpisode interface {
	startJudging()
	isJudging() bool
	stageCalled(path string, verdict bool)
	judgeStages() string
}

func init() {
	judging.Start = func(ep any) { ep.(judgingEpisode).startJudging() }
	judging.Started = func(ep any) bool { return ep.(judgingEpisode).isJudging() }
	judging.Called = func(ep any, path string, verdict bool) { ep.(judgingEpisode).stageCalled(path, verdict) }
	judging.Stages = func(ep any) string { return ep.(judgingEpisode).judgeStages() }
}

// UsageByRole returns the episode's usage so far split between the agent
// (recorded before the engine called the judge) and the judge (after),
// each named by the last model named in its part. A simulated user's
// usage is in the agent's part; [Episode.SimulatorUsage] says how much.
func (ep *Episode[T]) UsageByRole() (agent, judge Usage) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.usage == nil {
		return Usage{}, Usage{}
	}
	return ep.usage.agent, ep.usage.judge
}

// Events returns a copy of the episode's transcript so far.
func (ep *Episode[T]) Events() []Event {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return append([]Event(nil), ep.events...)
}

// Meter is an episode as a model gateway sees it (package gateway, which
// the engine serves through eval.Config.Models): where each model call of
// the episode's agent is recorded, as an event of kind "model" whose
// usage the episode counts (*Episode[T] records it so), and what the
// episode may still spend. Its methods may be called concurrently.
type Meter interface {
	AddEvent(Event)
	// Remaining is what the episode may still spend before a cap or a
	// budget stops it, in tokens and in US dollars; a bound that does not
	// apply is math.MaxInt64 or +Inf, and capped is false when none does.
	// Zero or less: a call must not start, and one under way is cut.
	Remaining() (tokens int64, costUSD float64, capped bool)
}

// Harness runs an agent on one episode and returns its output. An error
// means the episode could not be carried out (infrastructure: a provider
// outage, a dead sandbox); the engine retries it. An agent that ran and got
// the task wrong is not an error: return its output and let the judge decide.
//
// Run is called concurrently for different episodes. It must honour ctx;
// a harness that does not is abandoned at the episode's timeout.
type Harness[T, O any] interface {
	Run(ctx context.Context, ep *Episode[T]) (O, error)
}

// Func adapts a function to a Harness.
type Func[T, O any] func(ctx context.Context, ep *Episode[T]) (O, error)

// Run calls f(ctx, ep).
func (f Func[T, O]) Run(ctx context.Context, ep *Episode[T]) (O, error) { return f(ctx, ep) }
