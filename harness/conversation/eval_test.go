package conversation_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/harness/conversation"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/anthropic"
	"github.com/proctor-evals/proctor/judge/openai"
	"github.com/proctor-evals/proctor/judge/trajectory"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/usage"
)

type task struct {
	Script []string `json:"script,omitempty"` // a scripted user's lines; none: a persona
	Goal   string   `json:"goal"`
}

// TestConversationEval runs an eval of conversations end to end: one
// episode with a scripted user, one with a model user (Anthropic Messages),
// the agent a model (OpenAI Chat Completions) and the judge a rubric that
// reads the transcript, each against its own httptest provider speaking
// the real wire format. The record, the report and its cost split keep
// the three roles apart, to the cent.
func TestConversationEval(t *testing.T) {
	t.Parallel()
	fixed := func(in, out int64) func(gatewaytest.Request) usage.Usage {
		return func(gatewaytest.Request) usage.Usage { return usage.Usage{InputTokens: in, OutputTokens: out} }
	}
	agentProv, simProv, judgeProv := gatewaytest.New(), gatewaytest.New(), gatewaytest.New()
	defer agentProv.Close()
	defer simProv.Close()
	defer judgeProv.Close()
	agentProv.Text, agentProv.Usage = "A table is booked. ", fixed(1000, 100)
	simProv.Text, simProv.Usage = "And for tonight? ", fixed(1000, 100)
	judgeProv.Text, judgeProv.Chunks, judgeProv.Usage = "The agent booked it.\nGRADE: C\n", 1, fixed(1000, 100)
	perMillion := func(model string, in, out float64) judge.Prices { return judge.Prices{model: {Input: in, Output: out}} }
	// Per call: agent $0.002, simulator $0.0003, judge $0.02.
	agentModel := openai.New(&openai.Options{BaseURL: agentProv.OpenAIBaseURL(), APIKey: "k", Model: "agent-m", Prices: perMillion("agent-m", 1, 10)})
	userModel := anthropic.New(&anthropic.Options{BaseURL: simProv.AnthropicBaseURL(), APIKey: "k", Model: "user-m", Prices: perMillion("user-m", 0.1, 2)})
	grader := openai.New(&openai.Options{BaseURL: judgeProv.OpenAIBaseURL(), APIKey: "k", Model: "judge-m", Prices: perMillion("judge-m", 10, 100)})

	agent := func(ep *harness.Episode[task]) conversation.Agent {
		return func(ctx context.Context, turns []conversation.Turn) (string, error) {
			req := judge.Request{System: "You book tables."}
			for _, t := range turns {
				role := "user"
				if t.Role == conversation.RoleAgent {
					role = "assistant"
				}
				req.Messages = append(req.Messages, judge.Message{Role: role, Content: t.Content})
			}
			resp, err := agentModel.Complete(ctx, req)
			u := resp.Usage
			if u.Model == "" {
				u.Model = resp.Model
			}
			ep.AddEvent(harness.Event{Kind: "model", Name: "agent", Usage: u})
			return resp.Text, err
		}
	}
	h := harness.Func[task, conversation.Result](func(ctx context.Context, ep *harness.Episode[task]) (conversation.Result, error) {
		var user conversation.User = &conversation.Persona{Model: userModel, Persona: "a regular", Goal: ep.Sample.Input.Goal}
		if len(ep.Sample.Input.Script) > 0 {
			user = &conversation.Script{Lines: ep.Sample.Input.Script}
		}
		return conversation.Run(ctx, ep, user, agent(ep), &conversation.Options{MaxTurns: 3})
	})
	j := judge.All(
		trajectory.Judge[task, conversation.Result](&trajectory.Options{Kinds: []string{"user", "agent"}},
			trajectory.MaxSteps(6), trajectory.Match(trajectory.InOrder, trajectory.Call{Kind: "user"}, trajectory.Call{Kind: "agent"})),
		judge.Rubric[task, conversation.Result](grader, &judge.RubricOptions[task]{
			Task:       func(t task) any { return t.Goal },
			Transcript: &judge.TranscriptOptions{Kinds: []string{"user", "agent"}}}),
	)
	e := &eval.Eval[task, conversation.Result]{Name: "booking", Harness: h, Judge: j, Dataset: dataset.Slice[task]{
		{ID: "scripted", Input: task{Script: []string{"A table for two, please.", "At eight."}, Goal: "book a table"}},
		{ID: "persona", Input: task{Goal: "book a table for two tonight"}},
	}}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rep, err := e.Run(context.Background(), eval.Config{Log: log, Concurrency: 2})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Passed, "%+v", rep.Failures)

	recs := map[string]sink.Record{}
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		recs[r.SampleID] = r
	}
	// The scripted user: 2 turns, 2 agent calls, 1 judge call, nothing simulated.
	s := recs["scripted"]
	require.Equal(t, sink.Record{}.SimulatorCostUSD, s.SimulatorCostUSD)
	require.Zero(t, s.SimulatorInputTokens)
	require.InDelta(t, 2*0.002+0.02, s.CostUSD, 1e-12)
	require.InDelta(t, 0.02, s.JudgeCostUSD, 1e-12)
	// The model user never writes its stop token: 3 turns (the limit), 3
	// persona calls, 3 agent calls, 1 judge call.
	p := recs["persona"]
	require.EqualValues(t, 3000, p.SimulatorInputTokens)
	require.EqualValues(t, 300, p.SimulatorOutputTokens)
	require.InDelta(t, 3*0.0003, p.SimulatorCostUSD, 1e-12)
	require.Equal(t, "user-m", p.SimulatorModel)
	require.Equal(t, "agent-m", p.Model)
	require.Equal(t, "judge-m", p.JudgeModel)
	require.InDelta(t, 3*0.002+3*0.0003+0.02, p.CostUSD, 1e-12)
	require.Len(t, agentProv.Served(), 2+3)
	require.Len(t, simProv.Served(), 3)
	require.Len(t, judgeProv.Served(), 2)

	// The report splits the cost three ways, overall and by model.
	require.InDelta(t, 3*0.0003, rep.SimulatorUsage.CostUSD, 1e-12)
	require.InDelta(t, 2*0.02, rep.JudgeUsage.CostUSD, 1e-12)
	require.InDelta(t, 5*0.002+3*0.0003+2*0.02, rep.Usage.CostUSD, 1e-12)
	byRole := map[string]float64{}
	for _, m := range rep.ByModel {
		byRole[m.Role+"/"+m.Model] += m.Usage.CostUSD
	}
	require.InDelta(t, 5*0.002, byRole["agent/agent-m"], 1e-12)
	require.InDelta(t, 3*0.0003, byRole["simulator/user-m"], 1e-12)
	require.InDelta(t, 2*0.02, byRole["judge/judge-m"], 1e-12)
	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	require.Contains(t, text.String(), "agent 5500 tokens $0.0100, simulator 3300 tokens $0.0009, judge 2200 tokens $0.0400")

	// The grader read the conversation.
	prompt := string(judgeProv.Served()[0].Request.Body)
	require.Contains(t, prompt, "[Transcript of how the agent reached it]")
	require.Contains(t, prompt, `1. user → \"`)
}
