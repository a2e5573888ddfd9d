package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/anthropic"
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

func client(url string, opts ...anthropic.Option) *anthropic.Client {
	return anthropic.New(append([]anthropic.Option{anthropic.WithBaseURL(url), anthropic.WithAPIKey("sk-test"),
		anthropic.WithModel("claude-sonnet-4-20250514"), anthropic.WithBackoff(time.Millisecond, 5*time.Millisecond)}, opts...)...)
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
	// claude-sonnet-4: $3 in, $15 out per million.
	require.InDelta(t, (1000*3+200*15)/1e6, resp.Usage.CostUSD, 1e-12)
}

func TestPricesOverride(t *testing.T) {
	t.Parallel()
	s, _ := server(t, reply(200, okBody))
	c := client(s.URL, anthropic.WithPrices(judge.Prices{"claude-sonnet-4": {Input: 1, Output: 2}}))
	resp, err := c.Complete(context.Background(), req)
	require.NoError(t, err)
	require.InDelta(t, (1000*1+200*2)/1e6, resp.Usage.CostUSD, 1e-12)
	resp, err = client(s.URL, anthropic.WithPrices(judge.Prices{})).Complete(context.Background(), req)
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

func TestRetries429HonouringRetryAfter(t *testing.T) {
	t.Parallel()
	s, n := server(t,
		reply(429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, "Retry-After", time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat)),
		reply(200, okBody))
	start := time.Now()
	resp, err := client(s.URL).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "Matches.\nGRADE: C", resp.Text)
	require.EqualValues(t, 2, n.Load())
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "waited for Retry-After (an HTTP date), not the 1ms backoff")
}

func TestRetries500(t *testing.T) {
	t.Parallel()
	s, n := server(t, reply(500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`),
		reply(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), reply(200, okBody))
	_, err := client(s.URL).Complete(context.Background(), req)
	require.NoError(t, err)
	require.EqualValues(t, 3, n.Load())
}

func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	s, n := server(t, reply(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	_, err := client(s.URL, anthropic.WithMaxAttempts(3)).Complete(context.Background(), req)
	var ae *judge.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 529, ae.StatusCode)
	require.Equal(t, "overloaded_error", ae.Type)
	require.True(t, ae.Retryable)
	require.EqualValues(t, 3, n.Load())
}

func TestNonRetryable400(t *testing.T) {
	t.Parallel()
	s, n := server(t, reply(400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"},"request_id":"req_011"}`))
	_, err := client(s.URL).Complete(context.Background(), req)
	var ae *judge.APIError
	require.ErrorAs(t, err, &ae)
	require.EqualValues(t, 1, n.Load(), "a 400 is not retried")
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

func TestSlowResponseHitsTheTimeout(t *testing.T) {
	t.Parallel()
	s, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	start := time.Now()
	_, err := client(s.URL, anthropic.WithTimeout(50*time.Millisecond), anthropic.WithMaxAttempts(2)).Complete(context.Background(), req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "timed out")
	require.EqualValues(t, 2, n.Load(), "a timed-out attempt is retried")
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestCallerCancellationIsNotRetried(t *testing.T) {
	t.Parallel()
	s, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := client(s.URL).Complete(ctx, req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.EqualValues(t, 1, n.Load())
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	inFlight, maxInFlight := 0, 0
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		reply(200, okBody)(w, r)
	})
	c := client(s.URL, anthropic.WithConcurrency(3))
	var wg sync.WaitGroup
	errs := make([]error, 15)
	for i := range errs {
		wg.Go(func() { _, errs[i] = c.Complete(context.Background(), req) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, 3, maxInFlight)
}

func TestNoModel(t *testing.T) {
	t.Setenv("ANTHROPIC_MODEL", "")
	_, err := anthropic.New(anthropic.WithBaseURL("http://127.0.0.1:1")).Complete(context.Background(), req)
	require.ErrorContains(t, err, "anthropic: no model")
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
	_, err := anthropic.New().Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "sk-env", auth)
}
