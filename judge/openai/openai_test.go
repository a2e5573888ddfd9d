package openai_test

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
	"github.com/proctor-evals/proctor/judge/openai"
)

const okBody = `{
  "id": "chatcmpl-abc123",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "gpt-4o-mini-2024-07-18",
  "choices": [{
    "index": 0,
    "message": {"role": "assistant", "content": "Matches.\nGRADE: C", "refusal": null, "annotations": []},
    "logprobs": null,
    "finish_reason": "stop"
  }],
  "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200,
    "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}},
  "service_tier": "default",
  "system_fingerprint": "fp_06737a9306"
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

func client(url string, opts ...openai.Option) *openai.Client {
	return openai.New(append([]openai.Option{openai.WithBaseURL(url + "/v1"), openai.WithAPIKey("sk-test"),
		openai.WithModel("gpt-4o-mini"), openai.WithBackoff(time.Millisecond, 5*time.Millisecond)}, opts...)...)
}

var req = judge.Request{System: "You grade.", Messages: []judge.Message{{Role: "user", Content: "Grade this."}}, MaxTokens: 256}

func TestCompleteSendsTheWireFormatAndReadsUsage(t *testing.T) {
	t.Parallel()
	var body map[string]any
	s, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "POST", r.Method)
		require.Equal(t, "/v1/chat/completions", r.URL.Path)
		require.Equal(t, "Bearer sk-test", r.Header.Get("Authorization"))
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
	require.Equal(t, "gpt-4o-mini", body["model"])
	require.Equal(t, false, body["stream"])
	require.Equal(t, 256.0, body["max_tokens"], "max_tokens for servers other than api.openai.com")
	require.Equal(t, 0.0, body["temperature"])
	require.Equal(t, []any{
		map[string]any{"role": "system", "content": "You grade."},
		map[string]any{"role": "user", "content": "Grade this."},
	}, body["messages"])

	require.Equal(t, "Matches.\nGRADE: C", resp.Text)
	require.Equal(t, judge.StopEnd, resp.StopReason)
	require.Equal(t, "gpt-4o-mini-2024-07-18", resp.Model)
	require.EqualValues(t, 1000, resp.Usage.InputTokens)
	require.EqualValues(t, 200, resp.Usage.OutputTokens)
	// gpt-4o-mini: $0.15 in, $0.60 out per million; the dated name matches by prefix.
	require.InDelta(t, (1000*0.15+200*0.60)/1e6, resp.Usage.CostUSD, 1e-12)
}

func TestPricesOverrideAndMaxTokensField(t *testing.T) {
	t.Parallel()
	var body map[string]any
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&body)
		reply(200, okBody)(w, r)
	})
	c := client(s.URL, openai.WithPrices(judge.Prices{"gpt-4o-mini": {Input: 1, Output: 2}}), openai.WithMaxTokensField("max_completion_tokens"))
	resp, err := c.Complete(context.Background(), req)
	require.NoError(t, err)
	require.InDelta(t, (1000*1+200*2)/1e6, resp.Usage.CostUSD, 1e-12)
	require.Equal(t, 256.0, body["max_completion_tokens"])
	require.NotContains(t, body, "max_tokens")

	c = client(s.URL, openai.WithPrices(judge.Prices{}))
	resp, err = c.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Zero(t, resp.Usage.CostUSD, "an unknown model's cost is not guessed")
}

func TestStopReasons(t *testing.T) {
	t.Parallel()
	tests := []struct{ finish, refusal, want, text string }{
		{"length", "", judge.StopMaxTokens, "partial"},
		{"content_filter", "", judge.StopRefusal, "partial"},
		{"stop", "I can't assist with that.", judge.StopRefusal, "I can't assist with that."},
	}
	for _, tt := range tests {
		refusal := "null"
		if tt.refusal != "" {
			refusal = `"` + tt.refusal + `"`
		}
		s, _ := server(t, reply(200, `{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"partial","refusal":`+refusal+`},"finish_reason":"`+tt.finish+`"}]}`))
		resp, err := client(s.URL).Complete(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, tt.want, resp.StopReason, tt.finish)
		require.Equal(t, tt.text, resp.Text)
		require.Zero(t, resp.Usage, "no usage field, no usage")
	}
}

func TestRetries429HonouringRetryAfter(t *testing.T) {
	t.Parallel()
	s, n := server(t,
		reply(429, `{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, "Retry-After", "1"),
		reply(200, okBody))
	start := time.Now()
	resp, err := client(s.URL).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "Matches.\nGRADE: C", resp.Text)
	require.EqualValues(t, 2, n.Load())
	require.GreaterOrEqual(t, time.Since(start), 950*time.Millisecond, "waited for Retry-After, not the 1ms backoff")
}

func TestRetries500(t *testing.T) {
	t.Parallel()
	s, n := server(t, reply(500, `{"error":{"message":"The server had an error","type":"server_error"}}`),
		reply(502, `<html>bad gateway</html>`), reply(200, okBody))
	_, err := client(s.URL).Complete(context.Background(), req)
	require.NoError(t, err)
	require.EqualValues(t, 3, n.Load())
}

func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	s, n := server(t, reply(503, `{"error":{"message":"overloaded","type":"server_error"}}`))
	_, err := client(s.URL, openai.WithMaxAttempts(3)).Complete(context.Background(), req)
	var ae *judge.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 503, ae.StatusCode)
	require.True(t, ae.Retryable)
	require.EqualValues(t, 3, n.Load())
}

func TestNonRetryable400(t *testing.T) {
	t.Parallel()
	s, n := server(t, reply(400, `{"error":{"message":"Invalid value for 'temperature': must be between 0 and 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`))
	_, err := client(s.URL).Complete(context.Background(), req)
	var ae *judge.APIError
	require.ErrorAs(t, err, &ae)
	require.EqualValues(t, 1, n.Load(), "a 400 is not retried")
	require.Equal(t, &judge.APIError{Provider: "openai", StatusCode: 400, Type: "invalid_request_error/invalid_value",
		Message: "Invalid value for 'temperature': must be between 0 and 2."}, ae)
	require.ErrorContains(t, err, "openai: HTTP 400")
}

func TestMalformedJSON(t *testing.T) {
	t.Parallel()
	s, n := server(t, reply(200, `{"choices": [`))
	_, err := client(s.URL).Complete(context.Background(), req)
	require.ErrorContains(t, err, "openai: decoding the response")
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
	_, err := client(s.URL, openai.WithTimeout(50*time.Millisecond), openai.WithMaxAttempts(2)).Complete(context.Background(), req)
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
	c := client(s.URL, openai.WithConcurrency(3))
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
	t.Setenv("OPENAI_MODEL", "")
	_, err := openai.New(openai.WithBaseURL("http://127.0.0.1:1")).Complete(context.Background(), req)
	require.ErrorContains(t, err, "openai: no model")
}

func TestEnvironment(t *testing.T) {
	var auth string
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		reply(200, okBody)(w, r)
	})
	t.Setenv("OPENAI_BASE_URL", s.URL+"/v1/")
	t.Setenv("OPENAI_API_KEY", "sk-env")
	t.Setenv("OPENAI_MODEL", "gpt-4o-mini")
	_, err := openai.New().Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "Bearer sk-env", auth)
}
