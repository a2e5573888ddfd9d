// Package retryafter reads the Retry-After header (RFC 9110 §10.2.3), for
// the judges' HTTP clients and the model gateway's rate governor.
package retryafter

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Parse reads a Retry-After header: delay seconds or an HTTP date (a past
// date is 0). The result is never negative; ok is false for an empty or
// unreadable header.
func Parse(h string, now time.Time) (d time.Duration, ok bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(h, 64); err == nil {
		if !(s >= 0) { // negative or NaN
			return 0, false
		}
		// Saturate: a float beyond int64 nanoseconds converts to an
		// unspecified (possibly negative) Duration.
		return time.Duration(min(s, 1e9) * float64(time.Second)), true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
