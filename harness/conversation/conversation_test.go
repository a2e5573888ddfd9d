package conversation_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/harness/conversation"
	"github.com/proctor-evals/proctor/judge"
)

// echo is an agent that answers "re: <the user's last message>".
func echo(_ context.Context, turns []conversation.Turn) (string, error) {
	return "re: " + turns[len(turns)-1].Content, nil
}

func kinds(ep *harness.Episode[string]) (out []string) {
	for _, ev := range ep.Events() {
		out = append(out, ev.Kind+":"+ev.Name)
	}
	return out
}

func TestScriptRunsOutOrStops(t *testing.T) {
	t.Parallel()
	ep := &harness.Episode[string]{}
	res, err := conversation.Run(t.Context(), ep, &conversation.Script{Lines: []string{"hi", "book a table"}}, echo, nil)
	require.NoError(t, err)
	want := conversation.Result{Ended: conversation.EndedByUser, Turns: []conversation.Turn{
		{Role: "user", Content: "hi"}, {Role: "agent", Content: "re: hi"},
		{Role: "user", Content: "book a table"}, {Role: "agent", Content: "re: book a table"}}}
	require.Empty(t, cmp.Diff(want, res))
	require.Equal(t, "re: book a table", res.LastReply())
	require.Equal(t, []string{"user:", "agent:", "user:", "agent:"}, kinds(ep))
	require.Equal(t, harness.Usage{}, ep.SimulatorUsage(), "a script spends nothing")

	stop := &conversation.Script{Lines: []string{"a", "b", "c"},
		Stop: func(turns []conversation.Turn) bool { return strings.HasSuffix(turns[len(turns)-1].Content, "a") }}
	res, err = conversation.Run(t.Context(), &harness.Episode[string]{}, stop, echo, nil)
	require.NoError(t, err)
	require.Len(t, res.Turns, 2, "the stop condition holds after the first reply")
	require.Equal(t, conversation.EndedByUser, res.Ended)
}

func TestTurnLimit(t *testing.T) {
	t.Parallel()
	lines := make([]string, 20)
	for i := range lines {
		lines[i] = "again"
	}
	res, err := conversation.Run(t.Context(), &harness.Episode[string]{}, &conversation.Script{Lines: lines}, echo, &conversation.Options{MaxTurns: 3})
	require.NoError(t, err)
	require.Equal(t, conversation.EndedAtLimit, res.Ended)
	require.Len(t, res.Turns, 6)
	res, err = conversation.Run(t.Context(), &harness.Episode[string]{}, &conversation.Script{Lines: lines}, echo, nil)
	require.NoError(t, err)
	require.Len(t, res.Turns, 20, "10 turns by default")
}

func TestErrorsEndTheConversation(t *testing.T) {
	t.Parallel()
	boom := errors.New("agent down")
	res, err := conversation.Run(t.Context(), &harness.Episode[string]{}, &conversation.Script{Lines: []string{"hi", "more"}},
		func(context.Context, []conversation.Turn) (string, error) { return "", boom }, nil)
	require.ErrorIs(t, err, boom)
	require.Len(t, res.Turns, 1, "the turns so far come back")

	down := &conversation.Persona{Model: judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) {
		return judge.Response{}, &judge.APIError{Provider: "anthropic", StatusCode: 503}
	})}
	ep := &harness.Episode[string]{}
	_, err = conversation.Run(t.Context(), ep, down, echo, nil)
	require.ErrorContains(t, err, "the simulated user, turn 1")
	require.NotEmpty(t, ep.Events()[0].Error, "the failed call is in the transcript")

	empty := &conversation.Persona{Model: judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) {
		return judge.Response{Text: "  ", StopReason: judge.StopEnd}, nil
	})}
	_, err = conversation.Run(t.Context(), &harness.Episode[string]{}, empty, echo, nil)
	require.ErrorContains(t, err, "empty message")
}

// TestPersona: the model sees its persona and goal, the conversation with
// the roles turned round, and stops with its token; what it spends is the
// simulator's, not the agent's alone.
func TestPersona(t *testing.T) {
	t.Parallel()
	var reqs []judge.Request
	m := judge.ModelFunc(func(_ context.Context, req judge.Request) (judge.Response, error) {
		reqs = append(reqs, req)
		text := "I need a table for two."
		if len(reqs) == 2 {
			text = "Thanks, that works.\n###STOP###"
		}
		return judge.Response{Text: text, StopReason: judge.StopEnd, Model: "user-m",
			Usage: harness.Usage{InputTokens: 10, OutputTokens: 2, CostUSD: 0.01}}, nil
	})
	p := &conversation.Persona{Model: m, Persona: "a regular at the restaurant", Goal: "book a table for two tonight"}
	ep := &harness.Episode[string]{}
	ep.AddEvent(harness.Event{Kind: "model", Usage: harness.Usage{InputTokens: 100, CostUSD: 1}}) // the agent's own
	res, err := conversation.Run(t.Context(), ep, p, echo, nil)
	require.NoError(t, err)
	require.Equal(t, conversation.EndedByUser, res.Ended)
	require.Equal(t, []conversation.Turn{{Role: "user", Content: "I need a table for two."}, {Role: "agent", Content: "re: I need a table for two."},
		{Role: "user", Content: "Thanks, that works."}}, res.Turns, "the last word is kept, and not answered")

	require.Contains(t, reqs[0].System, "a regular at the restaurant")
	require.Contains(t, reqs[0].System, "book a table for two tonight")
	require.Contains(t, reqs[0].System, "###STOP###")
	require.Equal(t, []judge.Message{{Role: "user", Content: "(The conversation starts: write your first message.)"},
		{Role: "assistant", Content: "I need a table for two."}, {Role: "user", Content: "re: I need a table for two."}}, reqs[1].Messages)

	sim := harness.Usage{InputTokens: 20, OutputTokens: 4, CostUSD: 0.02, Model: "user-m"}
	require.Equal(t, sim, ep.SimulatorUsage())
	agent, jdg := ep.UsageByRole()
	require.Equal(t, int64(120), agent.InputTokens, "the simulator's part is in the agent's, told apart by SimulatorUsage")
	require.Equal(t, harness.Usage{}, jdg)
	require.Empty(t, agent.Model, "the agent's part stays named by the agent's model, not the simulator's")
	require.Equal(t, []string{"model:", "model:persona", "user:", "agent:", "model:persona", "user:"}, kinds(ep))

	alone := &conversation.Persona{Model: judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) {
		return judge.Response{Text: "###STOP###", StopReason: judge.StopEnd}, nil
	})}
	res, err = conversation.Run(t.Context(), &harness.Episode[string]{}, alone, echo, nil)
	require.NoError(t, err)
	require.Empty(t, res.Turns, "a user who stops at once says nothing")
}
