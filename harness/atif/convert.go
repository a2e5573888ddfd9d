package atif

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/proctor-evals/proctor/harness"
)

// The kinds and name of the events an ATIF trajectory imports as.
const (
	KindModel   = "model"   // an agent step
	KindMessage = "message" // a system or user step, named by its source
	KindNote    = "note"    // with NameHeader: the trajectory's own fields
	NameHeader  = "atif"
)

// header is the trajectory without its steps: the input of the first
// event Import makes.
type header struct {
	SchemaVersion string          `json:"schema_version"`
	SessionID     string          `json:"session_id"`
	Agent         Agent           `json:"agent"`
	Notes         string          `json:"notes,omitempty"`
	FinalMetrics  *FinalMetrics   `json:"final_metrics,omitempty"`
	Extra         json.RawMessage `json:"extra,omitempty"`
}

// exported is the extra "proctor" of what Export writes that is not an
// imported trajectory: the transcript's episode (at the root) or the
// whole event (on a step).
type exported struct {
	Proctor json.RawMessage `json:"proctor"`
}

type episode struct {
	RunID    string `json:"run_id"`
	SampleID string `json:"sample_id"`
	Epoch    int    `json:"epoch"`
	Attempt  int    `json:"attempt"`
}

// Events imports tr as transcript events: a "note" named "atif" with the
// trajectory's own fields (unless it is a transcript Export wrote), then
// an event per step. An agent step is a "model" event whose usage is its
// metrics (prompt tokens as input, cached among them, completion tokens
// as output, cost; reasoning_tokens and cache_creation_input_tokens from
// the metrics' extra), named by its model; a system or user step is a
// "message" event named by its source. Each event's output is its step.
// A step Export wrote from another kind of event is that event again.
func Events(tr *Trajectory) ([]harness.Event, error) {
	var evs []harness.Event
	if _, ok := proctorOf(tr.Extra); !ok {
		h, err := json.Marshal(header{tr.SchemaVersion, tr.SessionID, tr.Agent, tr.Notes, tr.FinalMetrics, tr.Extra})
		if err != nil {
			return nil, err
		}
		evs = append(evs, harness.Event{Kind: KindNote, Name: NameHeader, Input: h})
	}
	for _, s := range tr.Steps {
		ev, err := event(tr, s)
		if err != nil {
			return nil, fmt.Errorf("atif: step %d: %w", s.StepID, err)
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func event(tr *Trajectory, s Step) (harness.Event, error) {
	var at time.Time
	if s.Timestamp != "" {
		var err error
		if at, err = time.Parse(time.RFC3339Nano, s.Timestamp); err != nil {
			return harness.Event{}, err
		}
	}
	if p, ok := proctorOf(s.Extra); ok {
		var ev harness.Event
		if err := json.Unmarshal(p, &ev); err != nil {
			return harness.Event{}, fmt.Errorf("extra.proctor: %w", err)
		}
		ev.Time = at
		return ev, nil
	}
	out, err := json.Marshal(s)
	if err != nil {
		return harness.Event{}, err
	}
	ev := harness.Event{Time: at, Kind: KindMessage, Name: s.Source, Output: out}
	if s.Source == "agent" {
		ev.Kind, ev.Name = KindModel, s.ModelName
		ev.Usage = usageOf(s.Metrics)
		ev.Usage.Model = s.ModelName
		if ev.Usage.Model == "" {
			ev.Usage.Model = tr.Agent.ModelName
		}
	}
	return ev, nil
}

func usageOf(m *Metrics) harness.Usage {
	var u harness.Usage
	if m == nil {
		return u
	}
	get := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	u.InputTokens, u.OutputTokens, u.CacheReadTokens = get(m.PromptTokens), get(m.CompletionTokens), get(m.CachedTokens)
	if m.CostUSD != nil {
		u.CostUSD = *m.CostUSD
	}
	var extra struct {
		Reasoning  int64 `json:"reasoning_tokens"`
		CacheWrite int64 `json:"cache_creation_input_tokens"`
	}
	if json.Unmarshal(m.Extra, &extra) == nil {
		u.ReasoningTokens, u.CacheWriteTokens = extra.Reasoning, extra.CacheWrite
	}
	return u
}

// proctorOf returns extra's "proctor" when it is extra's only member.
func proctorOf(extra json.RawMessage) (json.RawMessage, bool) {
	if len(extra) == 0 {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(extra, &m) != nil || len(m) != 1 || m["proctor"] == nil {
		return nil, false
	}
	return m["proctor"], true
}

// Export writes t as an ATIF trajectory. A transcript imported from a
// trajectory exports as that trajectory. Any other event is an agent step
// whose extra keeps it whole: a "command" or "tool" event as a tool call
// (its input as the arguments, its output as the observation), a "model"
// event with its output as the message and its usage as the metrics,
// others with their output (or input) as the message.
func Export(t *harness.Transcript) (*Trajectory, error) {
	evs := t.Events
	tr := &Trajectory{SchemaVersion: SchemaVersion, SessionID: fmt.Sprintf("%s/%s/%d/%d", t.RunID, t.SampleID, t.Epoch, t.Attempt),
		Agent: Agent{Name: "proctor", Version: "unknown"}, Steps: []Step{}}
	if len(evs) > 0 && evs[0].Kind == KindNote && evs[0].Name == NameHeader && evs[0].Output == nil && evs[0].Time.IsZero() && evs[0].Usage == (harness.Usage{}) {
		var h header
		if err := strictJSON(evs[0].Input, &h); err == nil {
			if b, _ := json.Marshal(h); bytes.Equal(b, evs[0].Input) {
				tr.SchemaVersion, tr.SessionID, tr.Agent, tr.Notes, tr.FinalMetrics, tr.Extra = h.SchemaVersion, h.SessionID, h.Agent, h.Notes, h.FinalMetrics, h.Extra
				evs = evs[1:]
			}
		}
	}
	if tr.Extra == nil && tr.Agent.Name == "proctor" {
		ep, _ := json.Marshal(episode{t.RunID, t.SampleID, t.Epoch, t.Attempt})
		tr.Extra, _ = json.Marshal(exported{Proctor: ep})
	}
	for i, ev := range evs {
		s, err := stepOf(tr, ev, i+1)
		if err != nil {
			return nil, err
		}
		tr.Steps = append(tr.Steps, s)
	}
	return tr, nil
}

func stepOf(tr *Trajectory, ev harness.Event, id int) (Step, error) {
	// An event Import made exports as its step, when importing that step
	// again gives the event back.
	if ev.Kind == KindModel || ev.Kind == KindMessage {
		var s Step
		if strictJSON(ev.Output, &s) == nil {
			if back, err := event(tr, s); err == nil && equal(back, ev) {
				return s, nil
			}
		}
	}
	s := Step{StepID: id, Source: "agent"}
	if !ev.Time.IsZero() {
		s.Timestamp = ev.Time.Format(time.RFC3339Nano)
	}
	keep := ev
	keep.Time = time.Time{}
	p, err := json.Marshal(keep)
	if err != nil {
		return Step{}, err
	}
	if s.Extra, err = json.Marshal(exported{Proctor: p}); err != nil {
		return Step{}, err
	}
	s.ModelName = ev.Usage.Model
	switch ev.Kind {
	case "command", "tool":
		args := ev.Input
		if a := bytes.TrimSpace(args); len(a) == 0 || a[0] != '{' {
			if len(a) == 0 {
				a = []byte("null")
			}
			args, _ = json.Marshal(map[string]json.RawMessage{"input": a})
		}
		call := fmt.Sprintf("call_%d", id)
		content := text(ev.Output)
		if ev.Error != "" {
			content += "\nerror: " + ev.Error
		}
		s.ToolCalls = []ToolCall{{ToolCallID: call, FunctionName: ev.Kind + ":" + ev.Name, Arguments: args}}
		s.Observation = &Observation{Results: []Result{{SourceCallID: call, Content: &content}}}
	default:
		s.Message = text(ev.Output)
		if s.Message == "" {
			s.Message = text(ev.Input)
		}
	}
	if u := ev.Usage; u.InputTokens != 0 || u.OutputTokens != 0 || u.CacheReadTokens != 0 || u.CostUSD != 0 || u.ReasoningTokens != 0 || u.CacheWriteTokens != 0 {
		m := &Metrics{PromptTokens: &u.InputTokens, CompletionTokens: &u.OutputTokens, CachedTokens: &u.CacheReadTokens, CostUSD: &u.CostUSD}
		if u.ReasoningTokens != 0 || u.CacheWriteTokens != 0 {
			m.Extra, _ = json.Marshal(map[string]int64{"reasoning_tokens": u.ReasoningTokens, "cache_creation_input_tokens": u.CacheWriteTokens})
		}
		s.Metrics = m
	}
	return s, nil
}

// text is a JSON value as a message: a string as itself, anything else as
// its JSON.
func text(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// equal compares events as a transcript keeps them: times by instant,
// JSON byte for byte.
func equal(a, b harness.Event) bool {
	return a.Time.Equal(b.Time) && a.Kind == b.Kind && a.Name == b.Name && bytes.Equal(a.Input, b.Input) && bytes.Equal(a.Output, b.Output) &&
		a.Duration == b.Duration && a.Usage == b.Usage && a.Error == b.Error
}

// Import decodes the ATIF document data (the trajectory an agent CLI
// wrote, read from its sandbox) and adds its steps to the episode's
// transcript, their metrics to its usage. With countUsage false the
// events carry no usage: for an agent whose model calls the gateway
// already recorded, which would otherwise count twice. When no step has
// metrics, the trajectory's final_metrics are the usage.
func Import[T any](ep *harness.Episode[T], data []byte, countUsage bool) error {
	tr, err := Decode(data)
	if err != nil {
		return err
	}
	evs, err := Events(tr)
	if err != nil {
		return err
	}
	var stepUsage bool
	for _, ev := range evs {
		if !countUsage {
			model := ev.Usage.Model
			ev.Usage = harness.Usage{Model: model}
		} else if ev.Usage != (harness.Usage{Model: ev.Usage.Model}) {
			stepUsage = true
		}
		ep.AddEvent(ev)
	}
	if fm := tr.FinalMetrics; countUsage && !stepUsage && fm != nil {
		m := &Metrics{PromptTokens: fm.TotalPromptTokens, CompletionTokens: fm.TotalCompletionTokens, CachedTokens: fm.TotalCachedTokens, CostUSD: fm.TotalCostUSD}
		u := usageOf(m)
		u.Model = tr.Agent.ModelName
		ep.AddUsage(u)
	}
	return nil
}

// ImportFile imports the trajectory the agent wrote at name in the
// episode's sandbox (a path relative to the workspace), as [Import] does:
// for an agent CLI run by harness.Command, after it returned.
func ImportFile[T any](ctx context.Context, ep *harness.Episode[T], name string, countUsage bool) error {
	if ep.Sandbox == nil {
		return fmt.Errorf("atif: no sandbox to read %s from", name)
	}
	data, err := ep.Sandbox.ReadFile(ctx, name)
	if err != nil {
		return fmt.Errorf("atif: %w", err)
	}
	if err := Import(ep, data, countUsage); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
