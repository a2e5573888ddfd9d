package gateway_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
	"github.com/proctor-evals/proctor/internal/agentbin"
	"github.com/proctor-evals/proctor/usage"
)

// agentRun is what the test agent printed: its conversations and summary.
type agentRun struct {
	Conversations []convo
	Summary       struct {
		Conversations, Calls int
		Error                string
		Found                []string
		Searched             int
	}
	ExitCode int
}

// convo is one conversation the agent held.
type convo struct {
	Calls     int    `json:"calls"`
	ToolCalls int    `json:"tool_calls"`
	Text      string `json:"text"`
}

// runAgent runs the agent in a fresh workspace with only the gateway's
// variables (and PATH, HOME) in its environment.
func runAgent(t *testing.T, bin string, env map[string]string, args ...string) agentRun {
	t.Helper()
	return runAgentStdin(t, bin, env, "", args...)
}

// runAgentStdin is runAgent with stdin.
func runAgentStdin(t *testing.T, bin string, env map[string]string, stdin string, args ...string) agentRun {
	t.Helper()
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "README.md"), []byte("# a workspace\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644))
	cmd := exec.Command(bin, args...)
	cmd.Dir = ws
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + ws}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	var run agentRun
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		run.ExitCode = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, l := range lines[:len(lines)-1] {
		var c convo
		require.NoError(t, json.Unmarshal([]byte(l), &c), l)
		run.Conversations = append(run.Conversations, c)
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &run.Summary), string(out))
	return run
}

var agentAPIs = []struct{ flag, api, model string }{
	{"chat", "chat.completions", "gpt-4o-mini"},
	{"responses", "responses", "gpt-4.1"},
	{"messages", "messages", "claude-sonnet-4-5"},
}

// TestARealAgentThroughTheGateway: the agent, on the official SDKs, holds
// multi-turn conversations with a tool through the gateway, streaming and
// not; every call is recorded with the tokens and cost the provider served,
// and the provider saw the gateway's key, never the episode's token.
func TestARealAgentThroughTheGateway(t *testing.T) {
	t.Parallel()
	bin := agentbin.Build(t)
	p, g, s := setup(t)
	p.ToolArguments = `{"path":"."}`
	p.Usage = func(r gatewaytest.Request) usage.Usage {
		return usage.Usage{InputTokens: 5000 + 100*int64(r.Turn), CacheReadTokens: 4000, OutputTokens: 120 + int64(r.Turn), ReasoningTokens: 20}
	}
	for _, a := range agentAPIs {
		for _, stream := range []bool{false, true} {
			m := &meter{}
			token, end := g.Open(m)
			before := len(p.Served())
			args := []string{"-api", a.flag, "-model", a.model, "-conversations", "2"}
			if stream {
				args = append(args, "-stream")
			}
			run := runAgent(t, bin, gateway.Env(s.URL, token), args...)
			end()
			require.Zero(t, run.ExitCode, "%s stream=%v: %s", a.api, stream, run.Summary.Error)
			require.Len(t, run.Conversations, 2)
			for _, c := range run.Conversations {
				require.Equal(t, 2, c.Calls, "a tool call, then the answer")
				require.Equal(t, 1, c.ToolCalls)
				require.Equal(t, "ok ok ok ", c.Text)
			}
			served := p.Served()[before:]
			calls := m.Calls()
			require.Len(t, served, 4)
			require.Len(t, calls, 4)
			var want, got usage.Usage
			for i, sv := range served {
				require.Equal(t, providerKey, sv.Key)
				require.Equal(t, a.api, calls[i].API)
				require.Equal(t, stream, calls[i].Stream)
				require.Empty(t, calls[i].Err)
				u := sv.Usage
				if a.api == "messages" {
					u.ReasoningTokens = 0
				}
				u.CostUSD = usage.DefaultPrices.Cost(u.Model, u)
				want, got = want.Add(u), got.Add(calls[i].Usage)
			}
			require.NotZero(t, want.CostUSD)
			if d := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); d != "" {
				t.Errorf("%s stream=%v: recorded usage (-served +recorded):\n%s", a.api, stream, d)
			}
		}
	}
}

// TestTheKeyStaysOutOfTheSandbox: the agent searches its environment, its
// workspace and /proc for the provider's key and does not find it; the
// same search finds the episode's token, so it does look.
func TestTheKeyStaysOutOfTheSandbox(t *testing.T) {
	t.Parallel()
	bin := agentbin.Build(t)
	_, g, s := setup(t)
	token, end := g.Open(&meter{})
	defer end()
	env := gateway.Env(s.URL, token)
	run := runAgentStdin(t, bin, env, providerKey, "-search")
	require.Empty(t, run.Summary.Found, "the provider's key is in the sandbox")
	require.Positive(t, run.Summary.Searched)
	run = runAgentStdin(t, bin, env, token, "-search")
	require.Contains(t, run.Summary.Found, "env:OPENAI_API_KEY", "the search finds what is there")
}

// TestAnAgentThatKeepsCallingIsStoppedAtTheCap: the budget runs out; the
// next call is refused and the agent's SDK fails with the provider-shaped
// error; a streamed answer that crosses the cap is cut and the SDK sees an
// error, not a silently short answer.
func TestAnAgentThatKeepsCallingIsStoppedAtTheCap(t *testing.T) {
	t.Parallel()
	bin := agentbin.Build(t)
	p, g, s := setup(t)
	p.Usage = func(gatewaytest.Request) usage.Usage { return usage.Usage{InputTokens: 1000, OutputTokens: 100} }
	for _, a := range agentAPIs {
		for _, stream := range []bool{false, true} {
			m := &budgetMeter{left: 5000}
			token, end := g.Open(m)
			args := []string{"-api", a.flag, "-model", a.model, "-conversations", "0"}
			if stream {
				args = append(args, "-stream")
			}
			run := runAgent(t, bin, gateway.Env(s.URL, token), args...)
			end()
			require.Equal(t, 3, run.ExitCode, "%s stream=%v: the agent stops on an API error", a.api, stream)
			require.Contains(t, run.Summary.Error, "budget is spent", "%s stream=%v", a.api, stream)
			// Four calls of 1,100 tokens leave 600: the fifth starts and
			// crosses the cap. When it was cut mid-stream (the provider's
			// input came first), the agent stops on that error; else the
			// sixth call is refused (the OpenAI SDK retries a 429: refused
			// again).
			var spent int64
			var refused int
			calls := m.Calls()
			for _, c := range calls {
				spent += c.Usage.Tokens()
				if strings.Contains(c.Err, "budget is spent") {
					refused++
				}
			}
			require.Equal(t, 5, len(calls)-refused, "%s stream=%v", a.api, stream)
			last := calls[len(calls)-1]
			require.True(t, refused > 0 || last.Cut == "cap", "%s stream=%v: the last call is refused or cut: %+v", a.api, stream, last)
			require.Greater(t, spent, int64(5000), "%s stream=%v", a.api, stream)
			require.LessOrEqual(t, spent, int64(5500), "%s stream=%v", a.api, stream)
		}
	}

	// A stream that crosses the cap mid-answer.
	p.Usage = nil
	p.Chunks, p.Text = 2000, "word word word w"
	for _, a := range agentAPIs {
		m := &budgetMeter{left: 2000}
		token, end := g.Open(m)
		run := runAgent(t, bin, gateway.Env(s.URL, token), "-api", a.flag, "-model", a.model, "-stream")
		end()
		require.Equal(t, 3, run.ExitCode, "%s: %+v", a.api, run.Summary)
		require.Contains(t, run.Summary.Error, "budget is spent", a.api)
		calls := m.Calls()
		last := calls[len(calls)-1]
		require.Equal(t, "cap", last.Cut, a.api)
	}
}

// budgetMeter is a meter with a token budget that calls spend.
type budgetMeter struct {
	meter
	left int64
}

func (m *budgetMeter) Remaining() gateway.Budget {
	m.mu.Lock()
	defer m.mu.Unlock()
	return gateway.Budget{Tokens: m.left, CostUSD: math.Inf(1), Capped: true}
}

func (m *budgetMeter) Record(c gateway.Call) {
	m.mu.Lock()
	m.left -= c.Usage.Tokens()
	m.mu.Unlock()
	m.meter.Record(c)
}
