package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/anthropic"
	"github.com/proctor-evals/proctor/usage"
)

const okBody = `{
  "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-20250514",
  "content": [
    {"type": "thinking", "thinking": "Compare the cities.", "signature": "sig"},
    {"type": "text", "text": "Matches.\n"},
    {"type": "text", "text": "GRADE: C"}
  ],
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "usage": {"input_tokens": 900, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 100, "output_tokens": 200, "service_tier": "standard"}
}`

// server answers each request with the next handler (the last repeats) and
// counts requests.
func server(t *testing.T, hs ...http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		// Read the body first: the server notices a client that went away
		// (and cancels r.Context()) only once the body is consumed.
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		hs[min(i, len(hs)-1)](w, r)
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func reply(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// client is the bare driver against url; edit adjusts its options.
func client(url string, edit ...func(*anthropic.Options)) *anthropic.Client {
	o := &anthropic.Options{BaseURL: url, APIKey: "sk-test", Model: "claude-sonnet-4-20250514"}
	for _, e := range edit {
		e(o)
	}
	return anthropic.New(o)
}

var req = judge.Request{System: "You grade.", Messages: []judge.Message{{Role: "user", Content: "Grade this."}}, MaxTokens: 256}

func TestCompleteSendsTheWireFormatAndReadsUsage(t *testing.T) {
	t.Parallel()
	var body map[string]any
	s, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "POST", r.Method)
		require.Equal(t, "/v1/messages", r.URL.Path)
		require.Equal(t, "sk-test", r.Header.Get("x-api-key"))
		require.Equal(t, "2023-06-01", r.Header.Get("anthropic-version"))
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		reply(200, okBody)(w, r)
	})
	temp := 0.0
	rq := req
	rq.Temperature = &temp
	resp, err := client(s.URL).Complete(context.Background(), rq)
	require.NoError(t, err)
	require.EqualValues(t, 1, n.Load())
	require.Equal(t, map[string]any{
		"model": "claude-sonnet-4-20250514", "max_tokens": 256.0, "system": "You grade.", "temperature": 0.0, "stream": false,
		"messages": []any{map[string]any{"role": "user", "content": "Grade this."}},
	}, body)
	require.Equal(t, "Matches.\nGRADE: C", resp.Text, "text blocks joined, thinking skipped")
	require.Equal(t, judge.StopEnd, resp.StopReason)
	require.Equal(t, "claude-sonnet-4-20250514", resp.Model)
	require.EqualValues(t, 1000, resp.Usage.InputTokens, "input plus cache tokens")
	require.EqualValues(t, 200, resp.Usage.OutputTokens)
	// claude-sonnet-4: $3 in, $0.30 cache read, $15 out per million.
	require.InDelta(t, (900*3+100*0.30+200*15)/1e6, resp.Usage.CostUSD, 1e-12)
}

// TestCacheTokensArePricedAsSuch: cache reads cost a tenth of input and
// cache writes 1.25 times it; the client once priced both at the input price.
func TestCacheTokensArePricedAsSuch(t *testing.T) {
	t.Parallel()
	s, _ := server(t, reply(200, `{"type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn",`+
		`"usage":{"input_tokens":100,"cache_creation_input_tokens":2000,"cache_read_input_tokens":50000,"output_tokens":300}}`))
	resp, err := client(s.URL).Complete(context.Background(), req)
	require.NoError(t, err)
	want := usage.Usage{InputTokens: 52100, CacheReadTokens: 50000, CacheWriteTokens: 2000, OutputTokens: 300,
		CostUSD: (100*3 + 50000*0.30 + 2000*3.75 + 300*15) / 1e6}
	require.InDelta(t, want.CostUSD, resp.Usage.CostUSD, 1e-12)
	want.CostUSD = resp.Usage.CostUSD
	if d := cmp.Diff(want, resp.Usage); d != "" {
		t.Errorf("usage (-want +got):\n%s", d)
	}
}

func TestPricesOverride(t *testing.T) {
	t.Parallel()
	s, _ := server(t, reply(200, okBody))
	c := client(s.URL, func(o *anthropic.Options) { o.Prices = judge.Prices{"claude-sonnet-4": {Input: 1, Output: 2}} })
	resp, err := c.Complete(context.Background(), req)
	require.NoError(t, err)
	require.InDelta(t, (1000*1+200*2)/1e6, resp.Usage.CostUSD, 1e-12)
	resp, err = client(s.URL, func(o *anthropic.Options) { o.Prices = judge.Prices{} }).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Zero(t, resp.Usage.CostUSD, "an unknown model's cost is not guessed")
}

func TestStopReasons(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{"max_tokens": judge.StopMaxTokens, "refusal": judge.StopRefusal,
		"stop_sequence": judge.StopEnd, "pause_turn": "pause_turn"} {
		s, _ := server(t, reply(200, `{"type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"partial"}],"stop_reason":"`+raw+`","usage":{"input_tokens":1,"output_tokens":2}}`))
		resp, err := client(s.URL).Complete(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, want, resp.StopReason, raw)
		require.Equal(t, "partial", resp.Text)
	}
}

func TestNonRetryable400(t *testing.T) {
	t.Parallel()
	s, n := server(t, reply(400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"},"request_id":"req_011"}`))
	_, err := judge.Retry(client(s.URL), nil).Complete(context.Background(), req)
	var ae *judge.APIError
	require.ErrorAs(t, err, &ae)
	require.EqualValues(t, 1, n.Load(), "a 400 is not retried")
	require.True(t, ae.Permanent())
	require.Equal(t, &judge.APIError{Provider: "anthropic", StatusCode: 400, Type: "invalid_request_error",
		Message: "max_tokens: Field required"}, ae)
	require.ErrorContains(t, err, "anthropic: HTTP 400")
}

func TestMalformedJSON(t *testing.T) {
	t.Parallel()
	s, n := server(t, reply(200, `{"content": [`))
	_, err := client(s.URL).Complete(context.Background(), req)
	require.ErrorContains(t, err, "anthropic: decoding the response")
	require.EqualValues(t, 1, n.Load())
}

func TestResponseTooLargeIsUnscored(t *testing.T) {
	t.Parallel()
	s, n := server(t, reply(200, okBody))
	_, err := judge.Retry(client(s.URL, func(o *anthropic.Options) { o.MaxResponseBytes = int64(len(okBody)) - 1 }), nil).
		Complete(context.Background(), req)
	require.ErrorIs(t, err, judge.ErrUnscored)
	var ue *judge.UnscoredError
	require.ErrorAs(t, err, &ue)
	require.True(t, strings.HasPrefix(ue.Reason, "response too large"), ue.Reason)
	require.EqualValues(t, 1, n.Load(), "the same oversized answer is not paid for twice")

	resp, err := client(s.URL, func(o *anthropic.Options) { o.MaxResponseBytes = int64(len(okBody)) }).Complete(context.Background(), req)
	require.NoError(t, err, "a body of exactly the cap is whole")
	require.Equal(t, "Matches.\nGRADE: C", resp.Text)
}

func TestNoModel(t *testing.T) {
	t.Setenv("ANTHROPIC_MODEL", "")
	_, err := anthropic.New(&anthropic.Options{BaseURL: "http://127.0.0.1:1"}).Complete(context.Background(), req)
	require.ErrorContains(t, err, "anthropic: no model")
	var p interface{ Permanent() bool }
	require.True(t, errors.As(err, &p) && p.Permanent(), "a missing model is not retried")
}

func TestEnvironment(t *testing.T) {
	var auth string
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("x-api-key")
		reply(200, okBody)(w, r)
	})
	t.Setenv("ANTHROPIC_BASE_URL", s.URL+"/")
	t.Setenv("ANTHROPIC_API_KEY", "sk-env")
	t.Setenv("ANTHROPIC_MODEL", "claude-haiku-4-5")
	_, err := anthropic.New(nil).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "sk-env", auth)
}
