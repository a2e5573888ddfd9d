package recordjson

import (
	"fmt"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/internal/jsontext"
)

// FuzzParseUTC: parseUTC accepts only what time.Time.UnmarshalJSON
// accepts, and reads it to the same time.
func FuzzParseUTC(f *testing.F) {
	for _, s := range timeInputs() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkParseUTC(t, s)
	})
}

// TestParseUTC: parseUTC reads every time as AppendTime writes it (it is
// the decoder's fast path) and nothing UnmarshalJSON reads otherwise.
func TestParseUTC(t *testing.T) {
	canonical := 0
	for _, s := range timeInputs() {
		read := checkParseUTC(t, s)
		var want time.Time
		if want.UnmarshalJSON([]byte(`"`+s+`"`)) == nil && string(jsontext.AppendTime(nil, want)) == s {
			canonical++
			if !read {
				t.Errorf("parseUTC does not read %q, as AppendTime writes it", s)
			}
		}
	}
	if canonical < 200 {
		t.Errorf("%d inputs in AppendTime's form, want 200 or more", canonical)
	}
}

// timeInputs are times at the edges of every field, with fractions of
// zero to ten digits, and near misses of the form.
func timeInputs() []string {
	var in []string
	for _, y := range []int{0, 1, 1900, 1970, 2000, 2024, 2026, 2100, 9999} {
		for _, m := range []int{0, 1, 2, 3, 4, 12, 13} {
			for _, d := range []int{0, 1, 28, 29, 30, 31, 32} {
				in = append(in, fmt.Sprintf("%04d-%02d-%02dT12:34:56Z", y, m, d))
			}
		}
	}
	for _, hms := range []string{"00:00:00", "23:59:59", "24:00:00", "12:60:00", "12:00:60", "1:00:00", "12:00:0a"} {
		in = append(in, "2026-11-22T"+hms+"Z")
	}
	for _, frac := range []string{"", ".", ".1", ".12", ".123456", ".123456789", ".1234567890", ".000000001", ".100", ".x", ",5"} {
		in = append(in, "2026-11-22T12:00:00"+frac+"Z")
	}
	in = append(in, "2026-11-22T12:00:00+00:00", "2026-11-22T12:00:00z", "2026-11-22t12:00:00Z", "2026-11-22 12:00:00Z",
		"2026/11/22T12:00:00Z", "+2026-11-22T12:00:00Z", "-001-11-22T12:00:00Z", "2026-11-22T12:00:00", "")
	return in
}

// checkParseUTC reports whether parseUTC read s, failing t when it reads
// it otherwise than UnmarshalJSON.
func checkParseUTC(t *testing.T, s string) bool {
	t.Helper()
	var want, got time.Time
	err := want.UnmarshalJSON([]byte(`"` + s + `"`))
	if !parseUTC(&got, []byte(s)) {
		return false
	}
	if err != nil {
		t.Fatalf("parseUTC(%q) = %v; UnmarshalJSON rejects it: %v", s, got, err)
	}
	if got != want {
		t.Fatalf("parseUTC(%q) = %#v, UnmarshalJSON %#v", s, got, want)
	}
	return true
}
