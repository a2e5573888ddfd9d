package gateway_test

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
	"github.com/proctor-evals/proctor/usage"
)

const providerKey = "sk-provider-SECRET-0123456789"

// meter is an episode's meter: a fixed budget and the calls recorded.
type meter struct {
	mu     sync.Mutex
	budget gateway.Budget
	calls  []gateway.Call
}

func (m *meter) Remaining() gateway.Budget {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.budget
}

func (m *meter) Record(c gateway.Call) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, c)
}

func (m *meter) Calls() []gateway.Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]gateway.Call(nil), m.calls...)
}

// setup starts a fake provider and a gateway in front of it.
func setup(t *testing.T) (*gatewaytest.Provider, *gateway.Gateway, *httptest.Server) {
	t.Helper()
	p := gatewaytest.New()
	t.Cleanup(p.Close)
	p.Key = providerKey
	g, err := gateway.New(gateway.Options{
		OpenAI:    gateway.Upstream{BaseURL: p.OpenAIBaseURL(), Key: providerKey},
		Anthropic: gateway.Upstream{BaseURL: p.AnthropicBaseURL(), Key: providerKey},
	})
	require.NoError(t, err)
	s := httptest.NewServer(g)
	t.Cleanup(s.Close)
	return p, g, s
}

// post sends body to the gateway's path with token as both providers'
// SDKs would; it returns the status and the body read.
func post(t *testing.T, url, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(path, "/v1/messages") {
		req.Header.Set("x-api-key", token)
		req.Header.Set("anthropic-version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// apis are the metered paths with a request body for each, {stream} to be
// replaced by true or false.
var apis = []struct{ api, path, body string }{
	{"chat.completions", "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":{stream},"messages":[{"role":"user","content":"hi"}]}`},
	{"responses", "/v1/responses", `{"model":"gpt-4.1","stream":{stream},"input":"hi"}`},
	{"messages", "/v1/messages", `{"model":"claude-sonnet-4-5","stream":{stream},"max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`},
}

func TestRecordedUsageIsWhatTheProviderServed(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	p.Usage = func(r gatewaytest.Request) usage.Usage {
		return usage.Usage{InputTokens: 12000 + int64(r.Turn), CacheReadTokens: 8000, CacheWriteTokens: 1000 * int64(r.Turn%2), OutputTokens: 345, ReasoningTokens: 45}
	}
	for _, a := range apis {
		for _, stream := range []string{"false", "true"} {
			m := &meter{}
			token, end := g.Open(m)
			code, body := post(t, s.URL, a.path, token, strings.Replace(a.body, "{stream}", stream, 1))
			end()
			require.Equal(t, 200, code, body)
			served := p.Served()
			last := served[len(served)-1]
			require.Equal(t, providerKey, last.Key, "the provider saw the gateway's key")
			calls := m.Calls()
			require.Len(t, calls, 1)
			c := calls[0]
			want := last.Usage
			if a.api == "chat.completions" || a.api == "responses" {
				want.CacheWriteTokens = 0 // OpenAI reports no cache writes
			}
			if a.api == "messages" {
				want.ReasoningTokens = 0 // Anthropic reports none
			}
			want.CostUSD = usage.DefaultPrices.Cost(want.Model, want)
			require.NotZero(t, want.CostUSD)
			if d := cmp.Diff(want, c.Usage, cmpopts.EquateApprox(0, 1e-15)); d != "" {
				t.Errorf("%s stream=%s: recorded usage (-served +recorded):\n%s", a.api, stream, d)
			}
			require.Equal(t, a.api, c.API)
			require.Equal(t, stream == "true", c.Stream)
			require.Empty(t, c.Cut, c.Err)
			require.Empty(t, c.Err)
			require.Equal(t, 200, c.Status)
			require.NotEmpty(t, c.ResponseSHA256)
			require.True(t, json.Valid(c.Response), "the response kept")
			require.Positive(t, c.FirstByte)
			require.GreaterOrEqual(t, c.Duration, c.FirstByte)
		}
	}
}

func TestCallsWithoutAValidTokenAreRefusedAndNeverForwarded(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	m := &meter{}
	token, end := g.Open(m)
	other, _ := setupOther(t)
	end()
	for name, tok := range map[string]string{"none": "", "ended": token, "another gateway's": other, "provider key": providerKey,
		"tampered": token[:len(token)-1] + "x"} {
		for _, a := range apis {
			code, body := post(t, s.URL, a.path, tok, strings.Replace(a.body, "{stream}", "false", 1))
			require.Equal(t, 401, code, "%s: %s", name, body)
			if a.api == "messages" {
				require.JSONEq(t, `{"type":"error","error":{"type":"authentication_error","message":"proctor gateway: no valid token: a gateway token is valid only while its episode runs"}}`, body)
			} else {
				require.Contains(t, body, `"code":"invalid_api_key"`)
			}
		}
	}
	require.Empty(t, p.Served(), "nothing reached the provider")
	require.Empty(t, m.Calls())
}

// setupOther opens an episode on a second gateway: its token is another
// run's.
func setupOther(t *testing.T) (string, func()) {
	g, err := gateway.New(gateway.Options{})
	require.NoError(t, err)
	return g.Open(&meter{})
}

func TestACallPastTheBudgetIsRefusedInTheProvidersShape(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	for _, b := range []gateway.Budget{{Tokens: 0, CostUSD: math.Inf(1), Capped: true}, {Tokens: math.MaxInt64, CostUSD: 0, Capped: true}} {
		m := &meter{budget: b}
		token, end := g.Open(m)
		for _, a := range apis {
			code, body := post(t, s.URL, a.path, token, strings.Replace(a.body, "{stream}", "true", 1))
			if a.api == "messages" {
				require.Equal(t, 400, code)
				require.Contains(t, body, `"type":"invalid_request_error"`)
			} else {
				require.Equal(t, 429, code)
				require.Contains(t, body, `"code":"insufficient_quota"`)
			}
			require.Contains(t, body, "budget is spent")
		}
		end()
		calls := m.Calls()
		require.Len(t, calls, 3)
		for _, c := range calls {
			require.Contains(t, c.Err, "budget is spent")
			require.Zero(t, c.Usage)
		}
	}
	require.Empty(t, p.Served())
}

func TestTheAnswerBoundIsClampedToTheBudget(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	m := &meter{budget: gateway.Budget{Tokens: 500, CostUSD: math.Inf(1), Capped: true}}
	token, end := g.Open(m)
	defer end()
	for _, a := range apis {
		code, body := post(t, s.URL, a.path, token, strings.Replace(a.body, "{stream}", "false", 1))
		require.Equal(t, 200, code, body)
	}
	field := map[string]string{"chat.completions": "max_completion_tokens", "responses": "max_output_tokens", "messages": "max_tokens"}
	for _, sv := range p.Served() {
		var got map[string]any
		require.NoError(t, json.Unmarshal(sv.Body, &got))
		limit := got[field[sv.API]]
		require.NotNil(t, limit, "%s: %s", sv.API, sv.Body)
		require.Less(t, limit.(float64), 500.0, "%s: the bound leaves room for the input", sv.API)
		require.Positive(t, limit.(float64))
	}
}

func TestAStreamCrossingTheCapIsCut(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	p.Chunks = 400
	p.Text = "word word word w" // 16 bytes: 4 estimated tokens a chunk
	for _, a := range apis {
		m := &meter{budget: gateway.Budget{Tokens: 300, CostUSD: math.Inf(1), Capped: true}}
		token, end := g.Open(m)
		code, body := post(t, s.URL, a.path, token, strings.Replace(a.body, "{stream}", "true", 1))
		end()
		require.Equal(t, 200, code)
		require.Contains(t, body, "budget is spent: the answer was cut")
		require.Less(t, strings.Count(body, "word word"), 300, "%s: the stream was cut", a.api)
		calls := m.Calls()
		require.Len(t, calls, 1)
		c := calls[0]
		require.Equal(t, "cap", c.Cut)
		require.Contains(t, c.Err, "crossed the episode's budget")
		require.Greater(t, c.Usage.Tokens(), int64(300), "the estimate that crossed is recorded")
		require.Less(t, c.Usage.Tokens(), int64(400))
		require.NotZero(t, c.Usage.CostUSD)
	}
}

func TestRequestBodyIsForwardedAsSentWhenNothingIsClamped(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	m := &meter{}
	token, end := g.Open(m)
	body := `{"model":"claude-sonnet-4-5", "max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`
	code, _ := post(t, s.URL, "/v1/messages", token, body)
	end()
	require.Equal(t, 200, code)
	require.Equal(t, body, string(p.Served()[0].Body))
	require.Equal(t, body, string(m.Calls()[0].Request))
}

// slowMeter records a call only once the next call asked its budget (or
// after 5 s): the agent has read the answer, and sent its next call,
// before the gateway recorded the answer.
type slowMeter struct {
	budgetMeter
	asked   atomic.Int32
	release chan struct{}
}

func (m *slowMeter) Remaining() gateway.Budget {
	if m.asked.Add(1) == 2 {
		close(m.release)
	}
	return m.budgetMeter.Remaining()
}

func (m *slowMeter) Record(c gateway.Call) {
	select {
	case <-m.release:
	case <-time.After(5 * time.Second):
	}
	m.budgetMeter.Record(c)
}

// answerEnds reads resp's body up to the end of the answer, as an SDK
// does: a whole JSON object, or a stream's last event; not to the body's
// end, which comes only once the gateway is done with the call.
func answerEnds(t *testing.T, resp *http.Response) {
	t.Helper()
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		got = append(got, buf[:n]...)
		s := string(got)
		if json.Valid(got) || strings.Contains(s, "[DONE]") || strings.Contains(s, "message_stop") || strings.Contains(s, "response.completed") {
			return
		}
		require.NoError(t, err, "the answer ended early: %s", got)
	}
}

// TestAnAnswerNotYetRecordedCountsAgainstTheNextCall: an agent may send
// its next call as soon as it read an answer, before the gateway recorded
// that answer's usage; the next call's budget counts it all the same, so a
// budget the first answer spent refuses the second call (before the fix it
// was forwarded: the meter did not know of the first answer yet).
func TestAnAnswerNotYetRecordedCountsAgainstTheNextCall(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	p.Usage = func(gatewaytest.Request) usage.Usage { return usage.Usage{InputTokens: 900, OutputTokens: 100} }
	for _, a := range apis {
		for _, stream := range []string{"false", "true"} {
			m := &slowMeter{budgetMeter: budgetMeter{left: 1000}, release: make(chan struct{})}
			token, end := g.Open(m)
			body := strings.Replace(a.body, "{stream}", stream, 1)
			req, err := http.NewRequest("POST", s.URL+a.path, strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode, "%s stream=%s", a.api, stream)
			answerEnds(t, resp)
			code, answer := post(t, s.URL, a.path, token, body)
			resp.Body.Close()
			require.NotEqual(t, 200, code, "%s stream=%s: the second call was forwarded though the first spent the budget", a.api, stream)
			require.Contains(t, answer, "budget is spent", "%s stream=%s", a.api, stream)
			end()
		}
	}
}

// TestExtendedThinkingIsClampedWithItsBound: a Messages request with
// extended thinking, its max_tokens clamped to what the episode has left,
// gets its thinking budget clamped below it (the API refuses a budget not
// below max_tokens); when what is left cannot hold the least budget the
// API takes (1,024), the call is refused as one past the cap, never
// forwarded.
func TestExtendedThinkingIsClampedWithItsBound(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	body := `{"model":"claude-sonnet-4-5","max_tokens":16000,"thinking":{"type":"enabled","budget_tokens":10000},"messages":[{"role":"user","content":"think"}]}`
	for _, left := range []int64{5000, 1500} {
		m := &meter{budget: gateway.Budget{Tokens: left, CostUSD: math.Inf(1), Capped: true}}
		token, end := g.Open(m)
		code, answer := post(t, s.URL, "/v1/messages", token, body)
		end()
		require.Equal(t, 200, code, answer)
		served := p.Served()
		var got struct {
			MaxTokens int64 `json:"max_tokens"`
			Thinking  struct {
				Type         string `json:"type"`
				BudgetTokens int64  `json:"budget_tokens"`
			} `json:"thinking"`
		}
		require.NoError(t, json.Unmarshal(served[len(served)-1].Body, &got))
		require.Less(t, got.MaxTokens, left, "the bound leaves room for the input")
		require.Equal(t, "enabled", got.Thinking.Type)
		require.Equal(t, got.MaxTokens-1, got.Thinking.BudgetTokens, "%d left: the thinking budget below the bound", left)
		require.GreaterOrEqual(t, got.Thinking.BudgetTokens, int64(1024))
	}
	before := len(p.Served())
	m := &meter{budget: gateway.Budget{Tokens: 900, CostUSD: math.Inf(1), Capped: true}}
	token, end := g.Open(m)
	code, answer := post(t, s.URL, "/v1/messages", token, body)
	end()
	require.Equal(t, 400, code, answer)
	require.Contains(t, answer, "extended thinking")
	require.Len(t, p.Served(), before, "never forwarded")
	calls := m.Calls()
	require.Len(t, calls, 1)
	require.Contains(t, calls[0].Err, "no room for extended thinking")

	// Disabled thinking, or a budget below the clamped bound, is left as sent.
	m = &meter{budget: gateway.Budget{Tokens: 5000, CostUSD: math.Inf(1), Capped: true}}
	token, end = g.Open(m)
	code, answer = post(t, s.URL, "/v1/messages", token, `{"model":"claude-sonnet-4-5","max_tokens":16000,"thinking":{"type":"enabled","budget_tokens":2000},"messages":[{"role":"user","content":"think"}]}`)
	end()
	require.Equal(t, 200, code, answer)
	served := p.Served()
	require.Contains(t, string(served[len(served)-1].Body), `"budget_tokens":2000`)
}
