// Package conversation runs multi-turn episodes: an agent talks with a
// simulated user, a [Script] of lines or a [Persona] played by a model,
// until the user's stop condition or a turn limit.
//
// [Run] is called from a harness with the episode. Each user message is a
// transcript event of kind "user", each agent reply one of kind "agent";
// what a [Persona]'s model spends is recorded as the simulator's usage
// (harness.Episode.AddSimulatorEvent), apart from the agent's and the
// judge's in the record, the report's cost split and the history.
//
//	h := harness.Func[Task, conversation.Result](func(ctx context.Context, ep *harness.Episode[Task]) (conversation.Result, error) {
//		user := &conversation.Persona{Model: userModel, Persona: "a hurried traveller", Goal: ep.Sample.Input.Goal}
//		return conversation.Run(ctx, ep, user, myAgent.Reply, &conversation.Options{MaxTurns: 8})
//	})
package conversation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

// Roles of a [Turn].
const (
	RoleUser  = "user"
	RoleAgent = "agent"
)

// Turn is one message of a conversation.
type Turn struct {
	Role    string `json:"role"` // RoleUser or RoleAgent
	Content string `json:"content"`
}

// Reply is a simulated user's next move: a message, or the end.
type Reply struct {
	Message string
	// Stop ends the conversation: the user's goal is met or given up.
	// A message sent with it is recorded but not answered.
	Stop bool
}

// Recorder is where a simulated user records what it spent: [Run] hands
// it one that records under the simulator's role.
type Recorder interface{ AddEvent(harness.Event) }

// User is a simulated user.
type User interface {
	// Next returns the user's move after turns (empty at the start).
	Next(ctx context.Context, rec Recorder, turns []Turn) (Reply, error)
}

// Agent answers the user's last message; turns is the conversation so far.
type Agent func(ctx context.Context, turns []Turn) (string, error)

// Options configures [Run]. The zero value (and nil) is valid.
type Options struct {
	// MaxTurns is the most user messages the agent answers; 0: 10.
	MaxTurns int
}

// Ended says why a conversation ended.
type Ended string

const (
	EndedByUser  Ended = "user"      // the user's stop condition
	EndedAtLimit Ended = "max_turns" // Options.MaxTurns
)

// Result is a finished conversation.
type Result struct {
	Turns []Turn `json:"turns"`
	Ended Ended  `json:"ended"`
}

// LastReply is the agent's last message, "" if it never spoke.
func (r Result) LastReply() string {
	for i := len(r.Turns) - 1; i >= 0; i-- {
		if r.Turns[i].Role == RoleAgent {
			return r.Turns[i].Content
		}
	}
	return ""
}

// Run holds a conversation between user and agent in episode ep: the user
// speaks first, the agent answers each message, until the user stops or
// has had Options.MaxTurns answers. An error of the user or the agent ends
// it and is returned with the turns so far (for the harness to return:
// the engine retries the episode).
func Run[T any](ctx context.Context, ep *harness.Episode[T], user User, agent Agent, opts *Options) (Result, error) {
	maxTurns := 10
	if opts != nil && opts.MaxTurns > 0 {
		maxTurns = opts.MaxTurns
	}
	rec := simulatorRecorder[T]{ep}
	var res Result
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		start := time.Now()
		r, err := user.Next(ctx, rec, res.Turns)
		if err != nil {
			return res, fmt.Errorf("conversation: the simulated user, turn %d: %w", len(res.Turns)/2+1, err)
		}
		if r.Message != "" {
			res.Turns = append(res.Turns, Turn{RoleUser, r.Message})
			ep.AddEvent(harness.Event{Time: start, Kind: "user", Output: text(r.Message), Duration: time.Since(start)})
		}
		if r.Stop {
			res.Ended = EndedByUser
			return res, nil
		}
		if r.Message == "" {
			return res, errors.New("conversation: the simulated user sent an empty message without stopping")
		}
		start = time.Now()
		reply, err := agent(ctx, res.Turns)
		if err != nil {
			return res, err
		}
		res.Turns = append(res.Turns, Turn{RoleAgent, reply})
		ep.AddEvent(harness.Event{Time: start, Kind: "agent", Output: text(reply), Duration: time.Since(start)})
		if len(res.Turns)/2 >= maxTurns {
			res.Ended = EndedAtLimit
			return res, nil
		}
	}
}

type simulatorRecorder[T any] struct{ ep *harness.Episode[T] }

func (r simulatorRecorder[T]) AddEvent(ev harness.Event) { r.ep.AddSimulatorEvent(ev) }

func text(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// Script is a user that says its lines in order and stops after the last
// one is answered, or earlier when Stop says so.
type Script struct {
	Lines []string
	// Stop, checked before each line but the first, ends the
	// conversation when it returns true (the agent's reply settles it);
	// nil: never before the lines run out.
	Stop func(turns []Turn) bool
}

// Next implements [User].
func (s *Script) Next(_ context.Context, _ Recorder, turns []Turn) (Reply, error) {
	said := 0
	for _, t := range turns {
		if t.Role == RoleUser {
			said++
		}
	}
	if said >= len(s.Lines) || said > 0 && s.Stop != nil && s.Stop(turns) {
		return Reply{Stop: true}, nil
	}
	return Reply{Message: s.Lines[said]}, nil
}

// DefaultStopToken is what a [Persona]'s model writes when its goal is met.
const DefaultStopToken = "###STOP###"

// Persona is a user played by a model: a persona with a goal. Its model
// sees the conversation with the roles turned round (the agent's
// messages as the user's) and writes the user's next message; a message
// that contains StopToken ends the conversation, the rest of the message
// recorded as the user's last word.
type Persona struct {
	Model   judge.Model
	Persona string // who the user is: "a student who is confused about recursion"
	Goal    string // what the user wants from the conversation
	// StopToken ends the conversation; "": DefaultStopToken.
	StopToken string
	// MaxTokens bounds each message; 0: 512.
	MaxTokens int
	// Temperature is the sampling temperature; nil: the provider's default.
	Temperature *float64
	// Name names the simulator in transcript events; "": "persona".
	Name string
}

// Prompt is the system prompt p's model gets.
func (p *Persona) Prompt() string {
	return fmt.Sprintf(`You are role-playing a user talking with an AI assistant, to test the assistant.
Stay in character and write only the user's next message, in the first person.

[Who you are]
%s

[Your goal]
%s

When your goal is met, or you see it will not be, write %s on a line of its own instead of a message.`,
		p.Persona, p.Goal, p.stopToken())
}

func (p *Persona) stopToken() string {
	if p.StopToken == "" {
		return DefaultStopToken
	}
	return p.StopToken
}

// Next implements [User]. A refused or empty answer of the model is an
// error: the simulation failed, not the agent.
func (p *Persona) Next(ctx context.Context, rec Recorder, turns []Turn) (Reply, error) {
	req := judge.Request{System: p.Prompt(), MaxTokens: p.MaxTokens, Temperature: p.Temperature,
		Messages: []judge.Message{{Role: "user", Content: "(The conversation starts: write your first message.)"}}}
	if req.MaxTokens <= 0 {
		req.MaxTokens = 512
	}
	for _, t := range turns {
		role := "user" // the agent speaks to the simulator as its user
		if t.Role == RoleUser {
			role = "assistant"
		}
		req.Messages = append(req.Messages, judge.Message{Role: role, Content: t.Content})
	}
	name := p.Name
	if name == "" {
		name = "persona"
	}
	start := time.Now()
	resp, err := p.Model.Complete(ctx, req)
	ev := harness.Event{Time: start, Kind: "model", Name: name, Duration: time.Since(start), Usage: resp.Usage}
	if ev.Usage.Model == "" {
		ev.Usage.Model = resp.Model
	}
	if err != nil {
		ev.Error = err.Error()
		rec.AddEvent(ev)
		return Reply{}, err
	}
	ev.Output = text(resp.Text)
	rec.AddEvent(ev)
	switch resp.StopReason {
	case judge.StopRefusal, "content_filter":
		return Reply{}, fmt.Errorf("conversation: the persona's model refused: %.200s", resp.Text)
	}
	msg, stop := strings.CutSuffix(strings.TrimSpace(resp.Text), p.stopToken())
	if !stop {
		before, _, found := strings.Cut(resp.Text, p.stopToken())
		msg, stop = before, found
	}
	msg = strings.TrimSpace(msg)
	if msg == "" && !stop {
		return Reply{}, errors.New("conversation: the persona's model wrote an empty message")
	}
	return Reply{Message: msg, Stop: stop}, nil
}
