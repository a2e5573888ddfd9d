// Package atif reads and writes the Agent Trajectory Interchange Format
// (ATIF), Harbor's JSON format for an agent's whole run: its steps
// (system prompt, user messages, agent turns with their tool calls,
// observations and token metrics). The specification is Harbor's RFC 0001
// (docs/rfcs/0001-trajectory-format.md in github.com/laude-institute/harbor;
// this package follows v1.4, and reads any ATIF-v1.x).
//
// [Import] turns the trajectory an agent CLI wrote into the episode's
// transcript events and usage, so that its tokens and cost are known even
// when it does not call models through proctor's gateway; [Export] writes
// any transcript as a trajectory (`proctor trace -format atif`).
//
// The mapping is one step per event. An ATIF step imports as an event of
// kind "model" (an agent step: its metrics are the event's usage) or
// "message" (a system or user step, named by its source), whose output
// holds the step's other fields as ATIF spells them; the trajectory's own
// fields (session, agent, notes, final metrics) are a first "note" event
// named "atif". An event of any other kind (a command, a model call
// recorded by the gateway) exports as an agent step (a command or tool as
// a tool call and its observation) that keeps the event whole in the
// step's extra, under "proctor". So Import(Export(t)) is t, and
// Export(Import(trajectory)) is the trajectory, on every field ATIF has.
package atif

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// SchemaVersion is the version Export writes.
const SchemaVersion = "ATIF-v1.4"

// Trajectory is an ATIF document's root object.
type Trajectory struct {
	SchemaVersion string          `json:"schema_version"`
	SessionID     string          `json:"session_id"`
	Agent         Agent           `json:"agent"`
	Steps         []Step          `json:"steps"`
	Notes         string          `json:"notes,omitempty"`
	FinalMetrics  *FinalMetrics   `json:"final_metrics,omitempty"`
	Extra         json.RawMessage `json:"extra,omitempty"`
}

// Agent identifies the agent system.
type Agent struct {
	Name      string          `json:"name"`
	Version   string          `json:"version"`
	ModelName string          `json:"model_name,omitempty"`
	Extra     json.RawMessage `json:"extra,omitempty"`
}

// FinalMetrics are a trajectory's totals.
type FinalMetrics struct {
	TotalPromptTokens     *int64          `json:"total_prompt_tokens,omitempty"`
	TotalCompletionTokens *int64          `json:"total_completion_tokens,omitempty"`
	TotalCachedTokens     *int64          `json:"total_cached_tokens,omitempty"`
	TotalCostUSD          *float64        `json:"total_cost_usd,omitempty"`
	TotalSteps            *int64          `json:"total_steps,omitempty"`
	Extra                 json.RawMessage `json:"extra,omitempty"`
}

// Step is one turn: a system prompt, a user message or an agent turn.
type Step struct {
	StepID    int    `json:"step_id"`
	Timestamp string `json:"timestamp,omitempty"`
	Source    string `json:"source"` // "system", "user" or "agent"
	ModelName string `json:"model_name,omitempty"`
	StepBody
	Metrics *Metrics        `json:"metrics,omitempty"`
	Extra   json.RawMessage `json:"extra,omitempty"`
}

// StepBody is a step's content: what an imported event's output holds.
type StepBody struct {
	// ReasoningEffort is a string or a number.
	ReasoningEffort  json.RawMessage `json:"reasoning_effort,omitempty"`
	Message          string          `json:"message"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall      `json:"tool_calls,omitempty"`
	Observation      *Observation    `json:"observation,omitempty"`
}

// ToolCall is one tool invocation of an agent step.
type ToolCall struct {
	ToolCallID   string          `json:"tool_call_id"`
	FunctionName string          `json:"function_name"`
	Arguments    json.RawMessage `json:"arguments"`
}

// Observation is what the environment returned.
type Observation struct {
	Results []Result `json:"results"`
}

// Result is one tool call's or action's result.
type Result struct {
	SourceCallID          string          `json:"source_call_id,omitempty"`
	Content               *string         `json:"content,omitempty"`
	SubagentTrajectoryRef json.RawMessage `json:"subagent_trajectory_ref,omitempty"`
}

// Metrics are an agent step's model usage.
type Metrics struct {
	PromptTokens       *int64          `json:"prompt_tokens,omitempty"` // all input, cached included
	CompletionTokens   *int64          `json:"completion_tokens,omitempty"`
	CachedTokens       *int64          `json:"cached_tokens,omitempty"`
	CostUSD            *float64        `json:"cost_usd,omitempty"`
	PromptTokenIDs     json.RawMessage `json:"prompt_token_ids,omitempty"`
	CompletionTokenIDs json.RawMessage `json:"completion_token_ids,omitempty"`
	Logprobs           json.RawMessage `json:"logprobs,omitempty"`
	// Extra holds provider metrics beyond the core ones; Import reads
	// reasoning_tokens and cache_creation_input_tokens from it.
	Extra json.RawMessage `json:"extra,omitempty"`
}

// Decode reads an ATIF document: a JSON object with the required fields
// (schema_version "ATIF-v1.x", session_id, agent name and version, steps
// each with a step_id, a source of system, user or agent, and a message)
// and nothing after it. Unknown fields are errors, as ATIF puts custom
// data in its extra objects.
func Decode(data []byte) (*Trajectory, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var tr Trajectory
	if err := dec.Decode(&tr); err != nil {
		return nil, fmt.Errorf("atif: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("atif: more than one JSON value")
	}
	if err := tr.check(data); err != nil {
		return nil, fmt.Errorf("atif: %w", err)
	}
	return &tr, nil
}

func (tr *Trajectory) check(data []byte) error {
	if !strings.HasPrefix(tr.SchemaVersion, "ATIF-v1.") {
		return fmt.Errorf("schema_version %q is not ATIF-v1.x", tr.SchemaVersion)
	}
	// Required fields that decode to their zero value when absent.
	var req struct {
		SessionID *string `json:"session_id"`
		Agent     *struct {
			Name    *string `json:"name"`
			Version *string `json:"version"`
		} `json:"agent"`
		Steps []struct {
			StepID  *int    `json:"step_id"`
			Message *string `json:"message"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return err
	}
	switch {
	case req.SessionID == nil:
		return errors.New("no session_id")
	case req.Agent == nil || req.Agent.Name == nil || req.Agent.Version == nil:
		return errors.New("agent needs a name and a version")
	case tr.Steps == nil:
		return errors.New("no steps")
	}
	for i, s := range tr.Steps {
		if req.Steps[i].StepID == nil || req.Steps[i].Message == nil {
			return fmt.Errorf("step %d: step_id and message are required", i+1)
		}
		switch s.Source {
		case "system", "user", "agent":
		default:
			return fmt.Errorf("step %d: source %q is not system, user or agent", s.StepID, s.Source)
		}
		if s.Timestamp != "" {
			if _, err := time.Parse(time.RFC3339Nano, s.Timestamp); err != nil {
				return fmt.Errorf("step %d: timestamp: %w", s.StepID, err)
			}
		}
		for _, c := range s.ToolCalls {
			if a := bytes.TrimSpace(c.Arguments); len(a) == 0 || a[0] != '{' {
				return fmt.Errorf("step %d: tool call %q: arguments must be an object", s.StepID, c.ToolCallID)
			}
		}
	}
	return nil
}
