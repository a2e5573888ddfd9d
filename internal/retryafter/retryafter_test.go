package retryafter

import (
	"net/http"
	"testing"
	"time"
)

// FuzzParse reads arbitrary Retry-After headers: never a panic,
// never a negative wait, and 0 when the header is not understood.
func FuzzParse(f *testing.F) {
	now := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	for _, s := range []string{"", "1", " 2 ", "1.5", "0", "-1", "NaN", "+Inf", "1e300", "soon",
		now.Add(2 * time.Second).Format(http.TimeFormat), now.Add(-time.Hour).Format(http.TimeFormat),
		"Monday, 10-Mar-25 12:00:05 GMT", "Mon Mar 10 12:00:05 2025"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		d, ok := Parse(h, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("Parse(%q) = %v, %v", h, d, ok)
		}
	})
}

func TestParse(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"1": time.Second, "1.5": 1500 * time.Millisecond, "0": 0,
		now.Add(2 * time.Second).Format(http.TimeFormat): 2 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):      0,
		"1e300": 1e9 * time.Second, // saturated, not wrapped negative
	} {
		d, ok := Parse(h, now)
		if !ok || d != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", h, d, ok, want)
		}
	}
	for _, h := range []string{"", "-1", "NaN", "soon"} {
		if d, ok := Parse(h, now); ok {
			t.Errorf("Parse(%q) = %v, true; want not understood", h, d)
		}
	}
}
