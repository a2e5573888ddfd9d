package dataset

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxIDBytes is the longest sample ID [CheckID] accepts, in bytes. An ID is a
// name, not a payload: it is written in every record, log line and report.
const MaxIDBytes = 1024

// ErrInvalidID is wrapped by the errors of [CheckID].
var ErrInvalidID = errors.New("invalid sample ID")

// CheckID reports whether id can be a sample ID: IDs that are empty, not
// valid UTF-8, longer than [MaxIDBytes] or that contain a control character
// (NUL, tab, newline, DEL, C1 controls: Unicode category Cc) are rejected,
// with an error that names the ID and wraps [ErrInvalidID]. Every other ID
// is carried byte for byte through logs, resume and reports.
//
// The loaders of this package apply it with the file and line; call it for
// samples from other sources.
func CheckID(id string) error {
	if err := checkID(id); err != nil {
		return fmt.Errorf("dataset: %w", err)
	}
	return nil
}

func checkID(id string) error {
	var reason string
	switch {
	case id == "":
		reason = "empty"
	case len(id) > MaxIDBytes:
		reason = fmt.Sprintf("%d bytes, longer than the limit of %d", len(id), MaxIDBytes)
	case !utf8.ValidString(id):
		reason = fmt.Sprintf("invalid UTF-8 at byte %d", invalidUTF8At(id))
	default:
		for i, r := range id {
			if unicode.IsControl(r) {
				reason = fmt.Sprintf("control character %U at byte %d", r, i)
				break
			}
		}
	}
	if reason == "" {
		return nil
	}
	return fmt.Errorf("%w %s: %s", ErrInvalidID, quoteID(id), reason)
}

// quoteID quotes an ID for an error message, eliding the middle of a long
// one: the message names the sample without repeating 10 KB of it.
func quoteID(id string) string {
	const keep = 64
	if len(id) <= 2*keep {
		return fmt.Sprintf("%q", id)
	}
	return fmt.Sprintf("%q…%q", id[:keep], id[len(id)-keep:])
}

// invalidUTF8At returns the byte offset of the first invalid UTF-8 sequence
// of s, or -1.
func invalidUTF8At[S string | []byte](s S) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(string(s[i:min(len(s), i+utf8.UTFMax)]))
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// checkSample checks what every loader promises of a sample: a valid ID
// and tags that are valid UTF-8 (JSON output would silently rewrite them).
func checkSample[T any](s Sample[T]) error {
	if err := checkID(s.ID); err != nil {
		return err
	}
	for k, v := range s.Tags {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("tag %q: invalid UTF-8", k)
		}
	}
	return nil
}
