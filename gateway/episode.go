package gateway

import (
	"encoding/json"
	"strconv"

	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/usage"
)

// OpenEpisode is [Gateway.Open] for the engine (package eval's
// Config.Models, which a *Gateway satisfies): the episode is m, the
// returned env is [Env] for baseURL and the episode's token, and end
// revokes it. Each call becomes one event of kind "model" recorded into m
// (see [Event]); a call the call store answered or diverged at is first
// told to m's NoteReplay(how string) method, when it has one (the
// engine's: the episode's record counts them).
func (g *Gateway) OpenEpisode(baseURL string, m harness.Meter) (env map[string]string, end func()) {
	var meter Meter = harnessMeter{m}
	if k, ok := m.(Keyed); ok {
		meter = keyedHarnessMeter{harnessMeter{m}, k}
	}
	token, end := g.Open(meter)
	return Env(baseURL, token), end
}

// harnessMeter is a harness.Meter as a Meter.
type harnessMeter struct{ m harness.Meter }

func (h harnessMeter) Remaining() Budget {
	tokens, usd, capped := h.m.Remaining()
	return Budget{Tokens: tokens, CostUSD: usd, Capped: capped}
}

func (h harnessMeter) Record(c Call) {
	if c.Replay != "" {
		if n, ok := h.m.(replayNoter); ok {
			n.NoteReplay(c.Replay)
		}
	}
	h.m.AddEvent(Event(c))
}

// replayNoter is the optional interface of a harness.Meter told how the
// call store answered each call (Call.Replay, when set).
type replayNoter interface{ NoteReplay(how string) }

// keyedHarnessMeter is a harnessMeter whose meter has the episode's key
// (the engine's, when the run has a call store): Keyed.
type keyedHarnessMeter struct {
	harnessMeter
	k Keyed
}

func (h keyedHarnessMeter) CallKey() (string, string, int) { return h.k.CallKey() }

// Span implements Tracer for a harness.Meter that has the method (the
// engine's, when the episode is traced).
func (h harnessMeter) Span() trace.Span {
	if t, ok := h.m.(Tracer); ok {
		return t.Span()
	}
	return nil
}

// Event is c as a transcript event of kind "model", named for its model:
// its usage (priced, the model named) is the event's, so the episode
// counts it; its input is the request (or, when larger than the gateway
// keeps, its digest) with the provider and API, its output the status,
// the response (or its digest), whether it streamed, when its first byte
// came, why it was cut and what the rate governor held it (throttled,
// waited_ns); a call that did not complete has its Err.
func Event(c Call) harness.Event {
	type in struct {
		Provider      string          `json:"provider"`
		API           string          `json:"api,omitempty"`
		Request       json.RawMessage `json:"request,omitempty"`
		RequestSHA256 string          `json:"request_sha256,omitempty"`
	}
	type out struct {
		Status         int             `json:"status"`
		Stream         bool            `json:"stream,omitempty"`
		FirstByteNS    int64           `json:"first_byte_ns,omitempty"`
		Cut            string          `json:"cut,omitempty"`
		Response       json.RawMessage `json:"response,omitempty"`
		ResponseSHA256 string          `json:"response_sha256,omitempty"`
		Throttled      int             `json:"throttled,omitempty"`
		WaitedNS       int64           `json:"waited_ns,omitempty"`
		Replay         string          `json:"replay,omitempty"`
		Saved          *usage.Usage    `json:"saved,omitempty"` // a replayed or cached call's cost when bought
	}
	u := c.Usage
	if u.Model == "" {
		u.Model = c.Model
	}
	ev := harness.Event{Time: c.Start, Kind: "model", Name: c.Model, Duration: c.Duration, Usage: u, Error: c.Err}
	ev.Input, _ = json.Marshal(in{c.Provider, c.API, validJSON(c.Request), c.RequestSHA256})
	var saved *usage.Usage
	if c.Replay == ReplayReplayed || c.Replay == ReplayCached {
		saved = &c.Saved
	}
	ev.Output, _ = json.Marshal(out{c.Status, c.Stream, int64(c.FirstByte), c.Cut, validJSON(c.Response), c.ResponseSHA256,
		c.Throttled, int64(c.Waited), c.Replay, saved})
	if ev.Name == "" {
		ev.Name = c.Provider
	}
	if c.Err == "" && c.Status >= 400 {
		ev.Error = "status " + strconv.Itoa(c.Status)
	}
	return ev
}

// validJSON is b when it is a JSON value, else b as a JSON string (an
// agent's malformed request is still what it sent), nil for none.
func validJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}
