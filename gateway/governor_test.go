package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
)

// load is a simulated fleet of agents calling one model through gateways
// (each its own process) to a provider with a fixed rate limit, in a
// synctest bubble: the seconds pass at once and the outcome is
// deterministic.
type load struct {
	api      string // "chat.completions" or "messages"
	gateways int
	agents   int // per gateway, each calling in a loop
	limit    gatewaytest.RateLimit
	latency  time.Duration
	warmup   time.Duration // not measured: the governor converging
	measured time.Duration
	options  gateway.GovernorOptions
}

// outcome is what the provider saw once converged, and what the agents got.
type outcome struct {
	served, limited int // by the provider, in the measured time
	perSecond       float64
	limitedShare    float64
	agent429        int64 // 429s passed to agents (all the time)
	calls           int64
	// convergedAfter is when the provider answered its last 429, from the
	// start, to the second: no call was limited after it.
	convergedAfter time.Duration
}

func (l load) run(t *testing.T) outcome {
	p := gatewaytest.New()
	defer p.Close()
	p.RateLimit, p.Latency = &l.limit, l.latency
	var o outcome
	synctest.Test(t, func(t *testing.T) {
		path, body := "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
		if l.api == "messages" {
			path, body = "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
		}
		stop := time.Now().Add(l.warmup + l.measured)
		var wg sync.WaitGroup
		for range l.gateways {
			g, err := gateway.New(gateway.Options{OpenAI: gateway.Upstream{BaseURL: p.OpenAIBaseURL(), Key: "sk-x"},
				Anthropic: gateway.Upstream{BaseURL: p.AnthropicBaseURL(), Key: "sk-x"},
				Transport: p.Transport(), Governor: l.options})
			require.NoError(t, err)
			token, end := g.Open(&meter{})
			defer end()
			for range l.agents {
				wg.Go(func() {
					for time.Now().Before(stop) {
						req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
						req.Header.Set("Authorization", "Bearer "+token)
						if l.api == "messages" {
							req.Header.Set("anthropic-version", "2023-06-01")
						}
						w := httptest.NewRecorder()
						g.ServeHTTP(w, req)
						atomic.AddInt64(&o.calls, 1)
						if w.Code == http.StatusTooManyRequests {
							atomic.AddInt64(&o.agent429, 1)
							time.Sleep(time.Second) // as an SDK backs off
						}
					}
				})
			}
		}
		wg.Go(func() {
			start, last := time.Now(), 0
			for time.Now().Before(stop) {
				time.Sleep(time.Second)
				if n := p.Limited(); n > last {
					last, o.convergedAfter = n, time.Since(start)
				}
			}
		})
		time.Sleep(l.warmup)
		served0, limited0 := len(p.Served()), p.Limited()
		time.Sleep(l.measured)
		o.served, o.limited = len(p.Served())-served0, p.Limited()-limited0
		wg.Wait()
	})
	o.perSecond = float64(o.served) / l.measured.Seconds()
	o.limitedShare = float64(o.limited) / float64(max(o.served+o.limited, 1))
	return o
}

// TestGovernorConvergesToTheProvidersRateLimit is the target,
// against the token-bucket fake, for each provider's headers: converged
// within the 20 s warm-up (no 429 after it), then throughput within 10%
// of the limit and at most 2% of the calls answered 429, and no 429
// reaching an agent.
func TestGovernorConvergesToTheProvidersRateLimit(t *testing.T) {
	for _, api := range []string{"chat.completions", "messages"} {
		t.Run(api, func(t *testing.T) {
			o := load{api: api, gateways: 1, agents: 32, limit: gatewaytest.RateLimit{PerSecond: 20, Burst: 20},
				latency: 200 * time.Millisecond, warmup: 20 * time.Second, measured: 60 * time.Second}.run(t)
			t.Logf("%s: %.1f/s of 20, %.2f%% limited (%d served, %d limited), %d calls, %d 429s to agents; the last 429 %v after the start",
				api, o.perSecond, 100*o.limitedShare, o.served, o.limited, o.calls, o.agent429, o.convergedAfter)
			require.InDelta(t, 20, o.perSecond, 2, "throughput")
			require.Less(t, o.convergedAfter, 20*time.Second, "converged within the warm-up")
			require.LessOrEqual(t, o.limitedShare, 0.02, "share answered 429")
			require.Zero(t, o.agent429, "429s passed to agents")
		})
	}
}

// roundTrip is a provider as a function, in-process.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := f(r)
	if resp != nil {
		resp.Request = r
	}
	return resp, err
}

func answerWith(status int, header http.Header, body string) *http.Response {
	if header == nil {
		header = http.Header{}
	}
	header.Set("Content-Type", "application/json")
	return &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(strings.NewReader(body))}
}

const chatOK = `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`

// governed serves one chat call through a gateway whose provider is f and
// returns what the agent got and what was recorded.
func governed(t *testing.T, o gateway.GovernorOptions, f roundTrip) (*httptest.ResponseRecorder, gateway.Call) {
	g, err := gateway.New(gateway.Options{OpenAI: gateway.Upstream{BaseURL: "http://provider.invalid/v1", Key: "sk-x"}, Transport: f, Governor: o})
	require.NoError(t, err)
	m := &meter{}
	token, end := g.Open(m)
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[]}`))
	req.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	end()
	calls := m.Calls()
	require.Len(t, calls, 1)
	return w, calls[0]
}

// A 429 is waited out (its Retry-After) and sent again: the agent gets the
// answer that followed, the record says how often and how long.
func TestGovernorWaitsOutA429AndSendsTheCallAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		start := time.Now()
		var second time.Time
		w, c := governed(t, gateway.GovernorOptions{}, func(r *http.Request) (*http.Response, error) {
			if n.Add(1) == 1 {
				return answerWith(429, http.Header{"Retry-After": {"3"}}, `{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}`), nil
			}
			second = time.Now()
			return answerWith(200, nil, chatOK), nil
		})
		require.Equal(t, 200, w.Code, w.Body.String())
		require.Equal(t, int64(2), n.Load())
		require.Equal(t, 3*time.Second, second.Sub(start), "sent again once its Retry-After passed")
		require.Equal(t, 1, c.Throttled)
		require.Equal(t, 3*time.Second, c.Waited)
		require.Equal(t, int64(5), c.Usage.Tokens())
	})
}

// Once its retries are spent, the agent gets the provider's own answer,
// headers and all, and its SDK retries as it would have.
func TestGovernorPassesTheProvidersAnswerOnceItsRetriesAreSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		w, c := governed(t, gateway.GovernorOptions{Retries: 2}, func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			return answerWith(529, http.Header{"Retry-After": {"1"}}, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), nil
		})
		require.Equal(t, 529, w.Code)
		require.Equal(t, "1", w.Header().Get("Retry-After"))
		require.Contains(t, w.Body.String(), "overloaded_error")
		require.Equal(t, int64(3), n.Load(), "the first attempt and two retries")
		require.Equal(t, 2, c.Throttled)
	})
}

// An account out of credit is not congestion: waiting does not mend it,
// so it goes to the agent at once.
func TestGovernorDoesNotRetryInsufficientQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		w, c := governed(t, gateway.GovernorOptions{}, func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			return answerWith(429, nil, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`), nil
		})
		require.Equal(t, 429, w.Code)
		require.Equal(t, int64(1), n.Load())
		require.Zero(t, c.Throttled)
	})
}

// A hold longer than MaxWait is not waited out by the call that met it.
func TestGovernorPassesAHoldLongerThanMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		w, _ := governed(t, gateway.GovernorOptions{MaxWait: time.Minute}, func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			return answerWith(429, http.Header{"Retry-After": {"3600"}}, `{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}`), nil
		})
		require.Equal(t, 429, w.Code)
		require.Equal(t, int64(1), n.Load())
	})
}

// A call held by the governor ends with its episode: waiting is bounded
// by the episode, never longer.
func TestAHeldCallEndsWithItsEpisode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		g, err := gateway.New(gateway.Options{OpenAI: gateway.Upstream{BaseURL: "http://provider.invalid/v1", Key: "sk-x"},
			Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
				n.Add(1)
				return answerWith(429, http.Header{"Retry-After": {"100"}}, `{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}`), nil
			})})
		require.NoError(t, err)
		m := &meter{}
		token, end := g.Open(m)
		done := make(chan int)
		go func() {
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[]}`))
			req.Header.Set("Authorization", "Bearer "+token)
			w := httptest.NewRecorder()
			g.ServeHTTP(w, req)
			done <- w.Code
		}()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		require.Equal(t, []gateway.Lane{{Provider: "openai", Model: "gpt-4o-mini", KeyID: g.Lanes()[0].KeyID, Limit: gateway.DefaultGovernorInitial / 2,
			Waiting: 1, HeldUntil: time.Now().Add(90 * time.Second), Throttled: 1}}, g.Lanes())
		end()
		<-done
		require.Equal(t, int64(1), n.Load())
		require.Len(t, m.Calls(), 1)
		require.Equal(t, 10*time.Second, m.Calls()[0].Waited)
	})
}

// A stream the provider ends with Anthropic's mid-stream error event of
// type overloaded_error (its status 200) is congestion: the lane's window
// is halved and the lane counts it, while the agent gets the stream as
// the provider sent it. An error event of another type (api_error) is
// not congestion. Against the fake provider, over HTTP.
func TestAMidStreamOverloadedErrorCutsTheWindow(t *testing.T) {
	for _, tc := range []struct {
		typ       string
		congested bool
	}{{"overloaded_error", true}, {"api_error", false}} {
		t.Run(tc.typ, func(t *testing.T) {
			p := gatewaytest.New()
			defer p.Close()
			p.Key = "sk-x"
			p.StreamError = func(rq gatewaytest.Request) string {
				if rq.Turn == 0 {
					return tc.typ
				}
				return ""
			}
			g, err := gateway.New(gateway.Options{Anthropic: gateway.Upstream{BaseURL: p.AnthropicBaseURL(), Key: "sk-x"}})
			require.NoError(t, err)
			m := &meter{}
			token, end := g.Open(m)
			defer end()
			call := func() string {
				req := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(`{"model":"claude-haiku-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
				req.Header.Set("x-api-key", token)
				req.Header.Set("anthropic-version", "2023-06-01")
				w := httptest.NewRecorder()
				g.ServeHTTP(w, req)
				require.Equal(t, 200, w.Code)
				return w.Body.String()
			}
			body := call()
			require.Contains(t, body, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\""+tc.typ+"\"", "the agent gets the provider's stream")
			lanes := g.Lanes()
			require.Len(t, lanes, 1)
			want, throttled := gateway.DefaultGovernorInitial, int64(0)
			if tc.congested {
				want, throttled = gateway.DefaultGovernorInitial/2, 1
			}
			require.Equal(t, want, lanes[0].Limit, "the window")
			require.Equal(t, throttled, lanes[0].Throttled)
			require.Contains(t, call(), "event: message_stop", "the next call is answered whole")
			require.Len(t, m.Calls(), 2)
			require.Equal(t, "upstream", m.Calls()[0].Cut, "the first stream ended before its usage")
		})
	}
}

// TestGovernorWithoutRateLimitHeaders: a provider that says 429 and
// nothing else (no rate-limit headers, no retry-after) is governed by
// the window alone, halved at a 429 and grown while calls succeed: the
// limit's throughput, a few percent of calls answered 429 as the window
// probes (5% here, where the headers give none), none reaching an agent.
func TestGovernorWithoutRateLimitHeaders(t *testing.T) {
	o := load{api: "chat.completions", gateways: 1, agents: 32, limit: gatewaytest.RateLimit{PerSecond: 20, Burst: 20, Bare: true},
		latency: 200 * time.Millisecond, warmup: 20 * time.Second, measured: 60 * time.Second}.run(t)
	t.Logf("bare 429s: %.1f/s of 20, %.2f%% limited (%d served, %d limited), %d calls, %d 429s to agents; the last 429 %v after the start",
		o.perSecond, 100*o.limitedShare, o.served, o.limited, o.calls, o.agent429, o.convergedAfter)
	require.InDelta(t, 20, o.perSecond, 2, "throughput")
	require.LessOrEqual(t, o.limitedShare, 0.10, "share answered 429")
	require.Zero(t, o.agent429, "429s passed to agents")
}
