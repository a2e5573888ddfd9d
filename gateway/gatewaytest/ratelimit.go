package gatewaytest

// The provider's rate limit: a token bucket of requests (and, optionally,
// a cap of requests in progress), answered as the real APIs answer it.

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// RateLimit is a provider's fixed rate limit (Provider.RateLimit): a token
// bucket of Burst requests refilled at PerSecond, and at most Concurrency
// requests in progress (0: no cap). A request beyond it is answered 429 as
// the provider would: OpenAI's rate_limit_exceeded error with retry-after
// and retry-after-ms, Anthropic's rate_limit_error with retry-after (whole
// seconds, rounded up). Every answer, 429 or not, carries the provider's
// request-limit headers: x-ratelimit-{limit,remaining,reset}-requests
// (reset as a Go duration, "1.2s") or anthropic-ratelimit-requests-*
// (reset as an RFC 3339 time; with milliseconds, where the real API gives
// seconds, so that a limit per second can be read from it).
//
// With Bare, it sends none of those headers and no retry-after: a 429 and
// its error body alone, as a self-hosted server or a proxy in front of
// one may.
type RateLimit struct {
	PerSecond   float64
	Burst       int // 0: PerSecond rounded up
	Concurrency int
	Bare        bool
}

// bucket is the provider's state of its limit; guarded by Provider.mu.
type bucket struct {
	tokens   float64
	at       time.Time
	started  bool
	inFlight int
	limited  int
}

// take takes a request from the bucket at now (false: limited), and the
// time until the bucket is full and until it next has a request.
func (p *Provider) take(now time.Time) (ok bool, remaining float64, toFull, toNext time.Duration) {
	rl := p.RateLimit
	burst := float64(rl.Burst)
	if burst <= 0 {
		burst = math.Ceil(rl.PerSecond)
	}
	b := &p.bucket
	if !b.started {
		b.tokens, b.at, b.started = burst, now, true
	}
	b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*rl.PerSecond)
	b.at = now
	ok = b.tokens >= 1 && (rl.Concurrency <= 0 || b.inFlight < rl.Concurrency)
	if ok {
		b.tokens--
		b.inFlight++
	} else {
		b.limited++
	}
	per := func(n float64) time.Duration { return time.Duration(n / rl.PerSecond * float64(time.Second)) }
	toFull = per(burst - b.tokens)
	toNext = per(max(1-b.tokens, 0))
	if toNext == 0 { // a full bucket, but every place in progress taken
		toNext = time.Second
	}
	return ok, math.Floor(b.tokens), toFull, toNext
}

// Limited is the number of requests answered 429 by the rate limit.
func (p *Provider) Limited() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bucket.limited
}

// limit applies the rate limit to a request of api at now: it sets the
// limit's headers, and answers 429 and returns false when the request is
// over it. done ends an admitted request.
func (p *Provider) limit(w http.ResponseWriter, api string, now time.Time) (admitted bool, done func()) {
	p.mu.Lock()
	ok, remaining, toFull, toNext := p.take(now)
	p.mu.Unlock()
	h := w.Header()
	limit := strconv.Itoa(max(p.RateLimit.Burst, int(math.Ceil(p.RateLimit.PerSecond))))
	if p.RateLimit.Bare {
		h = http.Header{} // written nowhere
	}
	if api == "messages" {
		h.Set("anthropic-ratelimit-requests-limit", limit)
		h.Set("anthropic-ratelimit-requests-remaining", strconv.Itoa(int(remaining)))
		h.Set("anthropic-ratelimit-requests-reset", now.Add(toFull).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	} else {
		h.Set("x-ratelimit-limit-requests", limit)
		h.Set("x-ratelimit-remaining-requests", strconv.Itoa(int(remaining)))
		h.Set("x-ratelimit-reset-requests", toFull.Round(time.Millisecond).String())
	}
	if ok {
		return true, func() {
			p.mu.Lock()
			p.bucket.inFlight--
			p.mu.Unlock()
		}
	}
	secs := int(math.Ceil(toNext.Seconds()))
	h.Set("retry-after", strconv.Itoa(secs))
	w.Header().Set("Content-Type", "application/json")
	if api == "messages" {
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"rate_limit_error","message":%s}}`,
			q("This request would exceed the rate limit for your organization of "+limit+" requests per second. Please try again later."))
		return false, nil
	}
	h.Set("retry-after-ms", strconv.FormatInt(max(toNext.Milliseconds(), 1), 10))
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, `{"error":{"message":%s,"type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		q(fmt.Sprintf("Rate limit reached for requests per second (RPS): Limit %s. Please try again in %dms.", limit, max(toNext.Milliseconds(), 1))))
	return false, nil
}
