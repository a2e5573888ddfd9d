package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var headersNow = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func TestRateHeadersAsTheProvidersSendThem(t *testing.T) {
	for name, c := range map[string]struct {
		h    http.Header
		want rateHeaders
	}{
		"openai": {http.Header{
			"X-Ratelimit-Limit-Requests": {"500"}, "X-Ratelimit-Remaining-Requests": {"499"}, "X-Ratelimit-Reset-Requests": {"120ms"},
			"X-Ratelimit-Limit-Tokens": {"30000"}, "X-Ratelimit-Remaining-Tokens": {"0"}, "X-Ratelimit-Reset-Tokens": {"6m0s"},
			"Retry-After-Ms": {"1500"}, "Retry-After": {"2"},
		}, rateHeaders{
			requests: limitHint{known: true, limit: 500, remaining: 499, reset: 120 * time.Millisecond},
			tokens:   limitHint{known: true, limit: 30000, remaining: 0, reset: 6 * time.Minute},
			// retry-after-ms is the more precise, as the OpenAI SDKs read it.
			retryAfter: 1500 * time.Millisecond, hasRetryAfter: true,
		}},
		"anthropic": {http.Header{
			"Anthropic-Ratelimit-Requests-Limit": {"50"}, "Anthropic-Ratelimit-Requests-Remaining": {"0"},
			"Anthropic-Ratelimit-Requests-Reset":     {"2026-11-28T12:00:02Z"},
			"Anthropic-Ratelimit-Tokens-Remaining":   {"9000"},
			"Anthropic-Ratelimit-Input-Tokens-Limit": {"20000"}, "Anthropic-Ratelimit-Input-Tokens-Remaining": {"10"},
			"Anthropic-Ratelimit-Input-Tokens-Reset": {"2026-11-28T12:00:30Z"},
			"Retry-After":                            {"Sat, 28 Nov 2026 12:00:05 GMT"},
		}, rateHeaders{
			requests:   limitHint{known: true, limit: 50, remaining: 0, reset: 2 * time.Second},
			tokens:     limitHint{known: true, limit: 20000, remaining: 10, reset: 30 * time.Second},
			retryAfter: 5 * time.Second, hasRetryAfter: true,
		}},
		"unreadable": {http.Header{
			"X-Ratelimit-Remaining-Requests": {"-1"}, "X-Ratelimit-Remaining-Tokens": {"lots"},
			"Anthropic-Ratelimit-Requests-Remaining": {"NaN"}, "Retry-After-Ms": {"-5"}, "Retry-After": {"soon"},
		}, rateHeaders{}},
	} {
		if diff := cmp.Diff(c.want, parseRateHeaders(c.h, headersNow), cmp.AllowUnexported(rateHeaders{}, limitHint{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// FuzzRateHeaders reads arbitrary rate-limit headers: never a panic, never
// a negative count or wait.
func FuzzRateHeaders(f *testing.F) {
	f.Add("499", "500", "120ms", "2", "1500", "2026-11-28T12:00:02Z")
	f.Add("0", "1e400", "6m0s", "Sat, 28 Nov 2026 12:00:05 GMT", "NaN", "yesterday")
	f.Add("-1", "+Inf", "-3s", "-1", "1e300", "9999-12-31T23:59:59Z")
	f.Fuzz(func(t *testing.T, remaining, limit, reset, retryAfter, retryAfterMS, anthropicReset string) {
		h := http.Header{
			"X-Ratelimit-Remaining-Requests": {remaining}, "X-Ratelimit-Limit-Requests": {limit}, "X-Ratelimit-Reset-Requests": {reset},
			"X-Ratelimit-Remaining-Tokens": {limit}, "X-Ratelimit-Reset-Tokens": {retryAfterMS},
			"Anthropic-Ratelimit-Output-Tokens-Remaining": {remaining}, "Anthropic-Ratelimit-Output-Tokens-Reset": {anthropicReset},
			"Retry-After": {retryAfter}, "Retry-After-Ms": {retryAfterMS},
		}
		r := parseRateHeaders(h, headersNow)
		for _, l := range []limitHint{r.requests, r.tokens} {
			if !(l.remaining >= 0) || !(l.limit >= 0) || l.reset < 0 || l.reset > maxReset {
				t.Fatalf("%+v from %v", l, h)
			}
			if n, in, ok := l.missing(); ok && (!(n > 0) || in <= 0) {
				t.Fatalf("missing %v in %v from %+v", n, in, l)
			}
		}
		if r.retryAfter < 0 || (!r.hasRetryAfter && r.retryAfter != 0) {
			t.Fatalf("retry after %v, %v from %v", r.retryAfter, r.hasRetryAfter, h)
		}
	})
}
