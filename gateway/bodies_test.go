package gateway_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestBodiesOverKeepBytesAreKeptAsDigestsOnly: a call's request and
// response within Options.KeepBytes are kept whole; over it, only their
// digests, which are those of the bytes on the wire.
func TestBodiesOverKeepBytesAreKeptAsDigestsOnly(t *testing.T) {
	t.Parallel()
	p := gatewaytest.New()
	t.Cleanup(p.Close)
	p.Key = providerKey
	for _, keep := range []int{0, 200} {
		g, err := gateway.New(gateway.Options{
			OpenAI:    gateway.Upstream{BaseURL: p.OpenAIBaseURL(), Key: providerKey},
			Anthropic: gateway.Upstream{BaseURL: p.AnthropicBaseURL(), Key: providerKey},
			KeepBytes: keep,
		})
		require.NoError(t, err)
		s := httptest.NewServer(g)
		t.Cleanup(s.Close)
		long := strings.Repeat("a long prompt ", 30) // over 200 bytes with the rest of the request
		for _, a := range apis {
			for _, stream := range []string{"false", "true"} {
				body := strings.Replace(strings.Replace(a.body, "{stream}", stream, 1), `"hi"`, `"`+long+`"`, 1)
				m := &meter{}
				token, end := g.Open(m)
				code, answer := post(t, s.URL, a.path, token, body)
				end()
				require.Equal(t, 200, code, answer)
				calls := m.Calls()
				require.Len(t, calls, 1)
				c := calls[0]
				what := fmt.Sprintf("KeepBytes %d, %s stream=%s", keep, a.api, stream)
				require.Equal(t, sha(body), c.RequestSHA256, what)
				require.Equal(t, sha(answer), c.ResponseSHA256, what)
				require.Greater(t, len(body), 200, what)
				require.Greater(t, len(answer), 200, what)
				if keep == 200 {
					require.Nil(t, c.Request, what)
					require.Nil(t, c.Response, what)
					continue
				}
				require.JSONEq(t, body, string(c.Request), what)
				require.NotNil(t, c.Response, what)
			}
		}
	}
}

// TestStreamEventsReachTheAgentAsTheyArrive: the provider sends one event
// of a stream and waits until the agent has read it before it sends the
// rest. A gateway that buffered a stream, whole or in part, would never
// pass that event on: the test would fail at its timeout.
func TestStreamEventsReachTheAgentAsTheyArrive(t *testing.T) {
	t.Parallel()
	read := make(chan struct{})
	chunk := func(content string) string {
		return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":null}]}` + "\n\n"
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("first"))
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-time.After(10 * time.Second):
			t.Error("the agent did not get the stream's first event within 10 s of its sending")
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, chunk(" and the rest"))
		io.WriteString(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	g, err := gateway.New(gateway.Options{OpenAI: gateway.Upstream{BaseURL: up.URL + "/v1", Key: providerKey}})
	require.NoError(t, err)
	s := httptest.NewServer(g)
	t.Cleanup(s.Close)

	m := &meter{}
	token, end := g.Open(m)
	req, err := http.NewRequest("POST", s.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	lines := bufio.NewReader(resp.Body)
	first, err := lines.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, first, `"first"`)
	close(read)
	rest, err := io.ReadAll(lines)
	require.NoError(t, err)
	require.Contains(t, string(rest), "[DONE]")
	end()
	calls := m.Calls()
	require.Len(t, calls, 1)
	require.Equal(t, int64(10), calls[0].Usage.InputTokens)
	require.Equal(t, int64(4), calls[0].Usage.OutputTokens)
	require.Empty(t, calls[0].Cut)
}
