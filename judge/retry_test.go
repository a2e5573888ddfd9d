package judge_test

import (
	"bytes"
	"context"
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
	"github.com/proctor-evals/proctor/judge/openai"
)

// The retry tests run the real drivers against httptest servers speaking
// each provider's wire format: the drivers make one request per call, and
// judge.Retry is what retries, for both alike.

const (
	openaiOK    = `{"id":"chatcmpl-abc123","object":"chat.completion","created":1741569952,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Matches.\nGRADE: C","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200}}`
	anthropicOK = `{"id":"msg_013Zva2CMHLNnXjNJJKqJ2EF","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"text","text":"Matches.\nGRADE: C"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":900,"output_tokens":200}}`
)

// apiServer answers each request with the next handler (the last repeats)
// and counts requests.
func apiServer(t *testing.T, hs ...http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
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

// hang answers when the client goes away.
func hang(w http.ResponseWriter, r *http.Request) {
	select {
	case <-time.After(5 * time.Second):
	case <-r.Context().Done():
	}
}

func openaiAt(url string) judge.Model {
	return openai.New(&openai.Options{BaseURL: url + "/v1", APIKey: "sk-test", Model: "gpt-4o-mini"})
}

func anthropicAt(url string) judge.Model {
	return anthropic.New(&anthropic.Options{BaseURL: url, APIKey: "sk-test", Model: "claude-sonnet-4-20250514"})
}

// waits records the waits Retry asks for, without waiting.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return nil
}

// retrying wraps m with opts (nil: defaults) recording the waits in w.
func retrying(m judge.Model, opts *judge.RetryOptions, w *waits) judge.Model {
	if opts == nil {
		opts = &judge.RetryOptions{}
	}
	judge.SetRetrySleep(opts, w.sleep)
	return judge.Retry(m, opts)
}

var request = judge.Request{System: "You grade.", Messages: []judge.Message{{Role: "user", Content: "Grade this."}}, MaxTokens: 256}

func isPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

func TestRetryHonoursRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	s, n := apiServer(t,
		reply(429, `{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, "Retry-After", "1"),
		reply(200, openaiOK))
	var w waits
	resp, err := retrying(openaiAt(s.URL), &judge.RetryOptions{Backoff: time.Millisecond}, &w).Complete(context.Background(), request)
	require.NoError(t, err)
	require.Equal(t, "Matches.\nGRADE: C", resp.Text)
	require.EqualValues(t, 2, n.Load())
	require.Equal(t, []time.Duration{time.Second}, w.d, "waited for Retry-After, not the 1ms backoff")
}

func TestRetryHonoursRetryAfterHTTPDate(t *testing.T) {
	t.Parallel()
	s, n := apiServer(t,
		reply(429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			"Retry-After", time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat)),
		reply(200, anthropicOK))
	var w waits
	resp, err := retrying(anthropicAt(s.URL), &judge.RetryOptions{Backoff: time.Millisecond}, &w).Complete(context.Background(), request)
	require.NoError(t, err)
	require.Equal(t, "Matches.\nGRADE: C", resp.Text)
	require.EqualValues(t, 2, n.Load())
	require.Len(t, w.d, 1)
	// The date has whole seconds: now+2s truncated is 1 to 2 s away.
	require.GreaterOrEqual(t, w.d[0], 900*time.Millisecond, "waited for Retry-After (an HTTP date), not the 1ms backoff")
	require.LessOrEqual(t, w.d[0], 2*time.Second)
}

func TestRetryRetries5xx(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		model func(string) judge.Model
		hs    []http.HandlerFunc
	}{
		"openai": {openaiAt, []http.HandlerFunc{reply(500, `{"error":{"message":"The server had an error","type":"server_error"}}`),
			reply(502, `<html>bad gateway</html>`), reply(200, openaiOK)}},
		"anthropic": {anthropicAt, []http.HandlerFunc{reply(500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`),
			reply(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), reply(200, anthropicOK)}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, n := apiServer(t, tc.hs...)
			var w waits
			_, err := retrying(tc.model(s.URL), &judge.RetryOptions{Backoff: 10 * time.Millisecond}, &w).Complete(context.Background(), request)
			require.NoError(t, err)
			require.EqualValues(t, 3, n.Load())
			require.Len(t, w.d, 2)
			for i, d := range w.d {
				require.Greater(t, d, time.Duration(0))
				require.LessOrEqual(t, d, 10*time.Millisecond<<i, "full jitter below the exponential bound")
			}
		})
	}
}

func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		model       func(string) judge.Model
		status      int
		body, etype string
	}{
		"openai":    {openaiAt, 503, `{"error":{"message":"overloaded","type":"server_error"}}`, "server_error"},
		"anthropic": {anthropicAt, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, n := apiServer(t, reply(tc.status, tc.body))
			var w waits
			_, err := retrying(tc.model(s.URL), &judge.RetryOptions{MaxAttempts: 3}, &w).Complete(context.Background(), request)
			var ae *judge.APIError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, tc.status, ae.StatusCode)
			require.Equal(t, tc.etype, ae.Type)
			require.False(t, ae.Permanent())
			require.EqualValues(t, 3, n.Load())
		})
	}
}

func TestRetryBackoffIsExponentialJitteredAndCapped(t *testing.T) {
	t.Parallel()
	var calls int
	m := judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) {
		calls++
		return judge.Response{}, errors.New("connection reset")
	})
	var w waits
	_, err := retrying(m, &judge.RetryOptions{MaxAttempts: 6, Backoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}, &w).
		Complete(context.Background(), request)
	require.ErrorContains(t, err, "connection reset")
	require.Equal(t, 6, calls, "an unclassified error is transient")
	bounds := []time.Duration{100, 200, 300, 300, 300}
	require.Len(t, w.d, len(bounds))
	for i, d := range w.d {
		require.Greater(t, d, time.Duration(0))
		require.LessOrEqual(t, d, bounds[i]*time.Millisecond, "wait %d", i)
	}
}

// A 401 (a bad key) from either provider, spoken in its real wire format,
// is sent once and comes back permanent: neither Retry nor the engine
// tries again.
func TestRetryNeverRetriesPermanentErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		model func(string) judge.Model
		body  string
	}{
		"openai":    {openaiAt, `{"error":{"message":"Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		"anthropic": {anthropicAt, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011"}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, n := apiServer(t, reply(401, tc.body), reply(200, openaiOK))
			var w waits
			_, err := retrying(tc.model(s.URL), nil, &w).Complete(context.Background(), request)
			require.Error(t, err)
			require.EqualValues(t, 1, n.Load(), "a 401 is sent once")
			require.Empty(t, w.d)
			require.True(t, isPermanent(err), "%v", err)
			var ae *judge.APIError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, 401, ae.StatusCode)
		})
	}

	for status, permanent := range map[int]bool{400: true, 401: true, 403: true, 404: true, 422: true,
		408: false, 409: false, 429: false, 500: false, 503: false, 529: false} {
		require.Equal(t, permanent, (&judge.APIError{StatusCode: status}).Permanent(), "HTTP %d", status)
	}

	for name, fault := range map[string]error{
		"wrapped by judge.Permanent": judge.Permanent(errors.New("bad config")),
		"unscored":                   judge.Unscored("response too large"),
	} {
		calls := 0
		m := judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) {
			calls++
			return judge.Response{}, fault
		})
		_, err := judge.Retry(m, nil).Complete(context.Background(), request)
		require.ErrorIs(t, err, fault, name)
		require.Equal(t, 1, calls, name)
	}
	require.NoError(t, judge.Permanent(nil))
	require.True(t, isPermanent(judge.Permanent(context.Canceled)))
	require.ErrorIs(t, judge.Permanent(context.Canceled), context.Canceled)
}

func TestRetrySlowResponseHitsTheAttemptTimeout(t *testing.T) {
	t.Parallel()
	s, _ := apiServer(t, hang)
	// Count attempts at the driver: a request that timed out before the
	// server's handler ran would be missing from the server's count.
	driver, attempts := openaiAt(s.URL), 0
	counted := judge.ModelFunc(func(ctx context.Context, req judge.Request) (judge.Response, error) {
		attempts++
		return driver.Complete(ctx, req)
	})
	var w waits
	start := time.Now()
	_, err := retrying(counted, &judge.RetryOptions{Timeout: 50 * time.Millisecond, MaxAttempts: 2}, &w).
		Complete(context.Background(), request)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "timed out")
	require.False(t, isPermanent(err))
	require.Equal(t, 2, attempts, "a timed-out attempt is retried")
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestRetryCallerCancellationIsNotRetried(t *testing.T) {
	t.Parallel()
	s, _ := apiServer(t, hang)
	driver, attempts := anthropicAt(s.URL), 0
	counted := judge.ModelFunc(func(ctx context.Context, req judge.Request) (judge.Response, error) {
		attempts++
		return driver.Complete(ctx, req)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var w waits
	_, err := retrying(counted, nil, &w).Complete(ctx, request)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 1, attempts)
	require.Empty(t, w.d)
}

func TestRetryGivesUpWhenTheWaitCannotBeHonoured(t *testing.T) {
	t.Parallel()
	rateLimited := `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`

	// A hint over MaxRetryAfter ends the retries.
	s, n := apiServer(t, reply(429, rateLimited, "Retry-After", "600"), reply(200, openaiOK))
	var w waits
	_, err := retrying(openaiAt(s.URL), &judge.RetryOptions{MaxRetryAfter: time.Minute}, &w).Complete(context.Background(), request)
	var ae *judge.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 10*time.Minute, ae.RetryAfter)
	require.EqualValues(t, 1, n.Load())
	require.Empty(t, w.d)

	// A wait that would outlast ctx's deadline is not begun.
	s, n = apiServer(t, reply(429, rateLimited, "Retry-After", "30"), reply(200, openaiOK))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = retrying(openaiAt(s.URL), nil, &w).Complete(ctx, request)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 429, ae.StatusCode)
	require.EqualValues(t, 1, n.Load())
	require.Empty(t, w.d)
}

func TestRetryBackoffEndsWithTheContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fault := &judge.APIError{Provider: "openai", StatusCode: 503}
	calls := 0
	m := judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) {
		calls++
		return judge.Response{}, fault
	})
	opts := &judge.RetryOptions{Backoff: time.Hour, MaxBackoff: time.Hour}
	judge.SetRetrySleep(opts, func(ctx context.Context, d time.Duration) error {
		cancel() // the caller gives up while Retry waits
		return judge.Sleep(ctx, d)
	})
	_, err := judge.Retry(m, opts).Complete(ctx, request)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, fault, "the last error is kept")
	require.Equal(t, 1, calls)
}

func TestLimit(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	inFlight, maxInFlight := 0, 0
	s, _ := apiServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		reply(200, openaiOK)(w, r)
	})
	m := judge.Limit(openaiAt(s.URL), 3)
	var wg sync.WaitGroup
	errs := make([]error, 15)
	for i := range errs {
		wg.Go(func() { _, errs[i] = m.Complete(context.Background(), request) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, 3, maxInFlight)

	require.Panics(t, func() { judge.Limit(m, 0) })
}

func TestLimitWaitEndsWithTheContext(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	m := judge.Limit(judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) {
		calls.Add(1)
		entered <- struct{}{}
		<-release
		return judge.Response{}, nil
	}), 1)
	done := make(chan error)
	go func() { _, err := m.Complete(context.Background(), request); done <- err }()
	<-entered // the only slot is taken
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Complete(ctx, request)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "judge: waiting for a model slot")
	close(release)
	require.NoError(t, <-done)
	require.EqualValues(t, 1, calls.Load())
}
