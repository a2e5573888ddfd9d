package openai_test

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

// client is the bare driver against url; edit adjusts its options.
func client(url string, edit ...func(*openai.Options)) *openai.Client {
	o := &openai.Options{BaseURL: url + "/v1", APIKey: "sk-test", Model: "gpt-4o-mini"}
	for _, e := range edit {
		e(o)
	}
	return openai.New(o)
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

// TestCachedTokensArePricedAsCacheReads: cached prompt tokens cost half (or
// less) of input; the client once priced them at the input price.
func TestCachedTokensArePricedAsCacheReads(t *testing.T) {
	t.Parallel()
	s, _ := server(t, reply(200, `{"object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":10000,"completion_tokens":500,"prompt_tokens_details":{"cached_tokens":8000},"completion_tokens_details":{"reasoning_tokens":100}}}`))
	resp, err := client(s.URL).Complete(context.Background(), req)
	require.NoError(t, err)
	require.EqualValues(t, 8000, resp.Usage.CacheReadTokens)
	require.EqualValues(t, 100, resp.Usage.ReasoningTokens)
	// gpt-4o-mini: $0.15 in, $0.075 cached, $0.60 out per million.
	require.InDelta(t, (2000*0.15+8000*0.075+500*0.60)/1e6, resp.Usage.CostUSD, 1e-12)
}

// TestUsageNoProviderSendsIsAnError: the usage is decoded as the
// gateway decodes it (internal/providerusage): a negative count, or more
// cached tokens than input, is an error, not a figure to price.
func TestUsageNoProviderSendsIsAnError(t *testing.T) {
	t.Parallel()
	for _, u := range []string{`{"prompt_tokens":-5,"completion_tokens":1}`, `{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":20}}`} {
		s, _ := server(t, reply(200, `{"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":`+u+`}`))
		_, err := client(s.URL).Complete(context.Background(), req)
		require.ErrorContains(t, err, "openai: the response's usage", u)
	}
}

func TestPricesOverrideAndMaxTokensField(t *testing.T) {
	t.Parallel()
	var body map[string]any
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&body)
		reply(200, okBody)(w, r)
	})
	c := client(s.URL, func(o *openai.Options) {
		o.Prices = judge.Prices{"gpt-4o-mini": {Input: 1, Output: 2}}
		o.MaxTokensField = "max_completion_tokens"
	})
	resp, err := c.Complete(context.Background(), req)
	require.NoError(t, err)
	require.InDelta(t, (1000*1+200*2)/1e6, resp.Usage.CostUSD, 1e-12)
	require.Equal(t, 256.0, body["max_completion_tokens"])
	require.NotContains(t, body, "max_tokens")

	c = client(s.URL, func(o *openai.Options) { o.Prices = judge.Prices{} })
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

func TestNonRetryable400(t *testing.T) {
	t.Parallel()
	s, n := server(t, reply(400, `{"error":{"message":"Invalid value for 'temperature': must be between 0 and 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`))
	_, err := judge.Retry(client(s.URL), nil).Complete(context.Background(), req)
	var ae *judge.APIError
	require.ErrorAs(t, err, &ae)
	require.EqualValues(t, 1, n.Load(), "a 400 is not retried")
	require.True(t, ae.Permanent())
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

func TestResponseTooLargeIsUnscored(t *testing.T) {
	t.Parallel()
	// A well-formed answer padded past the default 32 MiB cap: cut, its
	// start would still look like JSON; it must not be read as an answer.
	pad := bytes.Repeat([]byte(" "), 1<<20)
	s, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"GRADE: C"},"finish_reason":"stop"}]`)
		for range 33 {
			w.Write(pad)
		}
		io.WriteString(w, "}")
	})
	_, err := judge.Retry(client(s.URL), nil).Complete(context.Background(), req)
	require.ErrorIs(t, err, judge.ErrUnscored)
	var ue *judge.UnscoredError
	require.ErrorAs(t, err, &ue)
	require.True(t, strings.HasPrefix(ue.Reason, "response too large"), ue.Reason)
	require.EqualValues(t, 1, n.Load(), "the same oversized answer is not paid for twice")

	// A body of exactly the cap is whole, and read.
	body := `{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"GRADE: C"},"finish_reason":"stop"}]}`
	s, _ = server(t, reply(200, body))
	resp, err := client(s.URL, func(o *openai.Options) { o.MaxResponseBytes = int64(len(body)) }).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "GRADE: C", resp.Text)
	_, err = client(s.URL, func(o *openai.Options) { o.MaxResponseBytes = int64(len(body)) - 1 }).Complete(context.Background(), req)
	require.ErrorIs(t, err, judge.ErrUnscored)
}

func TestNoModel(t *testing.T) {
	t.Setenv("OPENAI_MODEL", "")
	_, err := openai.New(&openai.Options{BaseURL: "http://127.0.0.1:1"}).Complete(context.Background(), req)
	require.ErrorContains(t, err, "openai: no model")
	var p interface{ Permanent() bool }
	require.True(t, errors.As(err, &p) && p.Permanent(), "a missing model is not retried")
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
	_, err := openai.New(nil).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "Bearer sk-env", auth)
}
