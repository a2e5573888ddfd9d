package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/gateway"
)

// rawUpstream is a gateway in front of a provider answering with h.
func rawUpstream(t *testing.T, h http.HandlerFunc) (*gateway.Gateway, *httptest.Server) {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	g, err := gateway.New(gateway.Options{OpenAI: gateway.Upstream{BaseURL: up.URL + "/v1"}, Anthropic: gateway.Upstream{BaseURL: up.URL}})
	require.NoError(t, err)
	s := httptest.NewServer(g)
	t.Cleanup(s.Close)
	return g, s
}

func TestAProviderAnsweringGarbageGivesAClearErrorOnThatCall(t *testing.T) {
	t.Parallel()
	g, s := rawUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `<html>oops</html>`)
	})
	m := &meter{}
	token, end := g.Open(m)
	code, body := post(t, s.URL, "/v1/chat/completions", token, `{"model":"gpt-4o","messages":[]}`)
	end()
	require.Equal(t, 200, code)
	require.Equal(t, `<html>oops</html>`, body, "forwarded as it came")
	c := m.Calls()[0]
	require.Contains(t, c.Err, "metering: the provider's response is not JSON")
	require.Contains(t, c.Err, "usage estimated")
	require.Positive(t, c.Usage.InputTokens, "estimated from the request")
	require.JSONEq(t, `"<html>oops</html>"`, string(c.Response), "kept, as a string")
}

func TestAStreamCutMidEventIsFlaggedAndPricedFromWhatPassed(t *testing.T) {
	t.Parallel()
	g, s := rawUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":700,\"output_tokens\":1}}}\n\n")
		io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\""+strings.Repeat("abcd", 50)+"\"}}\n\n")
		io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_bl")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-event
	})
	m := &meter{}
	token, end := g.Open(m)
	req, _ := http.NewRequest("POST", s.URL+"/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":100,"stream":true,"messages":[]}`))
	req.Header.Set("x-api-key", token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Error(t, err, "the agent sees the stream break, as it would from the provider")
	end()
	c := m.Calls()[0]
	require.Equal(t, "upstream", c.Cut)
	require.Contains(t, c.Err, "ended before its usage")
	require.EqualValues(t, 700, c.Usage.InputTokens, "the provider's input, from message_start")
	require.EqualValues(t, 50, c.Usage.OutputTokens, "200 bytes of text forwarded, 4 a token")
	require.Positive(t, c.Usage.CostUSD)
}

func TestAMalformedAgentRequestIsRefusedInTheProvidersShape(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	m := &meter{}
	token, end := g.Open(m)
	code, body := post(t, s.URL, "/v1/messages", token, `{"model": "claude`)
	require.Equal(t, 400, code)
	require.Contains(t, body, `"type":"invalid_request_error"`)
	code, body = post(t, s.URL, "/v1/chat/completions", token, `{"model":"gpt-4o","stream":true,"stream_options":"yes"}`)
	require.Equal(t, 400, code)
	require.Contains(t, body, "stream_options is not an object")
	code, body = post(t, s.URL, "/v1/responses", token, `{"model":"gpt-4o","max_output_tokens":"lots"}`)
	require.Equal(t, 200, code, "no budget: nothing to clamp, the provider judges: %s", body)
	// null decodes without error into a struct: it is refused as what it is
	// (FuzzRewrite found rewrite's panic on it; its input is a seed now).
	code, body = post(t, s.URL, "/v1/chat/completions", token, ` null`)
	require.Equal(t, 400, code, body)
	require.Contains(t, body, "not a JSON object")
	end()
	require.Len(t, m.Calls(), 4)
	require.Contains(t, m.Calls()[0].Err, "not a JSON object")
	require.Contains(t, m.Calls()[3].Err, "not a JSON object")
	require.Len(t, p.Served(), 1)
}

func TestOtherPathsAreRefusedOrPassedThroughAsDocumented(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	m := &meter{}
	token, end := g.Open(m)
	for _, path := range []string{"/v1/embeddings", "/v1/files", "/admin", "/v1/models/x/y"} {
		code, body := post(t, s.URL, path, token, `{}`)
		require.Equal(t, 404, code, path)
		require.Contains(t, body, "is not served", path)
	}
	req, _ := http.NewRequest("GET", s.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, string(b))
	require.Contains(t, string(b), `"object":"list"`)
	end()
	calls := m.Calls()
	require.Len(t, calls, 5)
	require.Equal(t, "models", calls[4].API)
	require.Zero(t, calls[4].Usage)
	require.Empty(t, p.Served(), "the fake counts only model calls")
}

func TestAnUnreachableProviderIsA502InItsShape(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.NotFoundHandler())
	up.Close()
	g, err := gateway.New(gateway.Options{Anthropic: gateway.Upstream{BaseURL: up.URL}})
	require.NoError(t, err)
	s := httptest.NewServer(g)
	defer s.Close()
	m := &meter{}
	token, end := g.Open(m)
	code, body := post(t, s.URL, "/v1/messages", token, `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[]}`)
	end()
	require.Equal(t, 502, code)
	require.Contains(t, body, `"type":"api_error"`)
	require.Contains(t, m.Calls()[0].Err, "could not be reached")
}

func TestAnAgentGoingAwayMidStreamIsRecordedAsCutByTheClient(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	p.Chunks, p.ChunkDelay = 50, 20*time.Millisecond
	m := &meter{}
	token, end := g.Open(m)
	req, _ := http.NewRequest("POST", s.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[]}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	buf := make([]byte, 100)
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	resp.Body.Close() // the agent goes away
	end()
	c := m.Calls()[0]
	require.Equal(t, "client", c.Cut, c.Err)
	require.Contains(t, c.Err, "usage estimated")
	require.Positive(t, c.Usage.InputTokens)
	require.Less(t, len(p.Served()[0].Body), 1000)
}

func TestEndingAnEpisodeCancelsItsCallsAndWaitsForTheirRecords(t *testing.T) {
	t.Parallel()
	p, g, s := setup(t)
	p.Chunks, p.ChunkDelay = 1000, 10*time.Millisecond
	m := &meter{}
	token, end := g.Open(m)
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest("POST", s.URL+"/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":9,"stream":true,"messages":[]}`))
		req.Header.Set("x-api-key", token)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	require.Eventually(t, func() bool { return len(p.Served()) == 1 }, 5*time.Second, time.Millisecond)
	end() // the stream would take 10 s
	require.Len(t, m.Calls(), 1, "end returned after the call was recorded")
	require.Equal(t, "client", m.Calls()[0].Cut)
	<-done
}
