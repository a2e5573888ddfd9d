package gateway

// The providers' rate-limit headers, read from every answer (2xx or not):
//
//	OpenAI:    x-ratelimit-{limit,remaining,reset}-{requests,tokens}
//	           (reset is a duration: "1s", "6m0s", "17ms"), retry-after-ms
//	Anthropic: anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}
//	           (reset is an RFC 3339 time)
//	both:      retry-after (seconds or an HTTP date)
//
// Each "reset" is when the limit is whole again, so with the limit and
// what remains it gives the rate the provider refills at.

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/internal/retryafter"
)

// limitHint is what the headers say of one of the provider's limits.
type limitHint struct {
	known            bool    // remaining was given
	limit, remaining float64 // limit 0: not given
	reset            time.Duration
}

// missing is what the limit lacks of whole, and the time it takes to
// fill: their ratio is the provider's refill rate. The remaining count is
// rounded down (a provider says 5 of 5.7), so half a request is taken off
// what is missing; ok is false when that leaves too little to say.
func (h limitHint) missing() (n float64, in time.Duration, ok bool) {
	if !h.known || h.limit-h.remaining < 1 || h.reset <= 0 {
		return 0, 0, false
	}
	return h.limit - h.remaining - 0.5, h.reset, true
}

// rateHeaders is what an answer's headers say of the provider's limits.
type rateHeaders struct {
	requests limitHint
	// tokens is the most exhausted of the token limits (Anthropic has
	// three): only whether it is spent, and until when, is used.
	tokens        limitHint
	retryAfter    time.Duration
	hasRetryAfter bool
}

// parseRateHeaders reads h at now. A header that does not parse is left
// out, never guessed: the governor then works from statuses alone.
func parseRateHeaders(h http.Header, now time.Time) rateHeaders {
	var r rateHeaders
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms >= 0 {
			r.retryAfter, r.hasRetryAfter = seconds(ms/1000), true
		}
	}
	if !r.hasRetryAfter {
		r.retryAfter, r.hasRetryAfter = retryafter.Parse(h.Get("Retry-After"), now)
	}
	r.requests = openAIHint(h, "requests")
	if !r.requests.known {
		r.requests = anthropicHint(h, "requests", now)
	}
	r.tokens = openAIHint(h, "tokens")
	for _, kind := range []string{"tokens", "input-tokens", "output-tokens"} {
		if t := anthropicHint(h, kind, now); t.known && (!r.tokens.known || t.remaining < r.tokens.remaining) {
			r.tokens = t
		}
	}
	return r
}

func openAIHint(h http.Header, kind string) limitHint {
	rem, ok := count(h.Get("X-Ratelimit-Remaining-" + kind))
	if !ok {
		return limitHint{}
	}
	lim, _ := count(h.Get("X-Ratelimit-Limit-" + kind))
	reset, _ := resetDuration(h.Get("X-Ratelimit-Reset-" + kind))
	return limitHint{known: true, limit: lim, remaining: rem, reset: reset}
}

func anthropicHint(h http.Header, kind string, now time.Time) limitHint {
	p := "Anthropic-Ratelimit-" + kind + "-"
	rem, ok := count(h.Get(p + "Remaining"))
	if !ok {
		return limitHint{}
	}
	lim, _ := count(h.Get(p + "Limit"))
	var reset time.Duration
	if t, err := time.Parse(time.RFC3339, strings.TrimSpace(h.Get(p+"Reset"))); err == nil {
		reset = min(max(t.Sub(now), 0), maxReset)
	}
	return limitHint{known: true, limit: lim, remaining: rem, reset: reset}
}

// count reads a non-negative count (a float is accepted: some compatible
// servers send one).
func count(v string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(f >= 0) || math.IsInf(f, 1) {
		return 0, false
	}
	return f, true
}

// maxReset bounds a reset or retry hint read from a header: beyond it a
// Duration would overflow, and no governor waits that long anyway.
const maxReset = 1e6 * time.Second

// resetDuration reads OpenAI's reset: a Go-style duration ("6m0s",
// "1.5s", "17ms") or plain seconds.
func resetDuration(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !(s >= 0) {
			return 0, false
		}
		return seconds(s), true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, false
	}
	return min(d, maxReset), true
}

func seconds(s float64) time.Duration {
	return time.Duration(min(s, maxReset.Seconds()) * float64(time.Second))
}
