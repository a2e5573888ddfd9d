package gateway

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/gateway/gatewaytest"
	"github.com/proctor-evals/proctor/usage"
)

// capped is a meter with a budget that never runs out.
type capped struct{}

func (capped) Remaining() Budget {
	return Budget{Tokens: math.MaxInt64 / 2, CostUSD: 1e9, Capped: true}
}
func (capped) Record(Call) {}

// TestHoldsAreReleasedWhole: once every call of an episode is recorded,
// nothing of its answers is held, whatever their usage holds (cache and
// reasoning tokens, a cost): a hold that kept a part would grow with
// every call.
func TestHoldsAreReleasedWhole(t *testing.T) {
	t.Parallel()
	p := gatewaytest.New()
	t.Cleanup(p.Close)
	p.Usage = func(r gatewaytest.Request) usage.Usage {
		return usage.Usage{InputTokens: 1200, CacheReadTokens: 800, CacheWriteTokens: 100, OutputTokens: 345, ReasoningTokens: 45}
	}
	g, err := New(Options{OpenAI: Upstream{BaseURL: p.OpenAIBaseURL()}, Anthropic: Upstream{BaseURL: p.AnthropicBaseURL()},
		Prices: usage.Prices{"m": {Input: 1, Output: 3, CacheRead: 0.1, CacheWrite: 1.25}}})
	require.NoError(t, err)
	s := httptest.NewServer(g)
	t.Cleanup(s.Close)

	token, end := g.Open(capped{})
	var ep *episode
	g.mu.RLock()
	for _, e := range g.tokens {
		ep = e
	}
	g.mu.RUnlock()
	for _, path := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"} {
		for _, stream := range []string{"false", "true"} {
			body := `{"model":"m","stream":` + stream + `,"max_tokens":100,"messages":[{"role":"user","content":"hi"}],"input":"hi"}`
			req, err := http.NewRequest("POST", s.URL+path, strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode, path)
		}
	}
	end() // every call recorded
	require.Len(t, p.Served(), 6)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	require.Zero(t, ep.held, "held after every call was recorded")
}
