package gateway

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type sseEvent struct{ Name, Data string }

// parseAll feeds b to a parser in pieces cut at the given offsets and
// returns the events.
func parseAll(b []byte, cuts ...int) ([]sseEvent, error) {
	var evs []sseEvent
	p := sseParser{dispatch: func(name string, data []byte) bool {
		evs = append(evs, sseEvent{name, string(data)})
		return false
	}}
	prev := 0
	for _, c := range append(cuts, len(b)) {
		c = min(max(c, prev), len(b))
		p.feed(b[prev:c])
		prev = c
	}
	return evs, p.err
}

func TestSSEParserFollowsTheEventStreamFormat(t *testing.T) {
	t.Parallel()
	in := "event: message_start\ndata: {\"a\":1}\n\n" + // LF
		": a comment\r\ndata:no space\r\ndata:  two spaces\r\n\r\n" + // CRLF, multi-line data
		"event: x\rdata: cr\r\r" + // CR
		"data\n\n" + // a field with no colon: empty data
		"event: no-data\n\n" + // no data: no event
		"data: [DONE]\n\n" +
		"data: unterminated"
	want := []sseEvent{{"message_start", `{"a":1}`}, {"", "no space\n two spaces"}, {"x", "cr"}, {"", ""}, {"", "[DONE]"}}
	for cut := range len(in) + 1 {
		got, err := parseAll([]byte(in), cut)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("cut at %d (-want +got):\n%s", cut, d)
		}
	}
}

func TestSSEParserStopsAtTheEventThatAskedAndReportsWhere(t *testing.T) {
	t.Parallel()
	in := []byte("data: 1\n\ndata: 2\r\n\r\ndata: 3\n\n")
	n := 0
	p := sseParser{dispatch: func(string, []byte) bool { n++; return n == 2 }}
	k, stopped := p.feed(in)
	if !stopped || string(in[:k]) != "data: 1\n\ndata: 2\r\n\r\n" {
		t.Fatalf("feed = %d, %v: want a stop after the second event's blank line", k, stopped)
	}
}

func TestSSEParserGivesUpOnAnEventOverTheLimit(t *testing.T) {
	t.Parallel()
	big := "data: " + strings.Repeat("x", maxEventBytes) + "\n\ndata: after\n\n"
	evs, err := parseAll([]byte(big), 100, 5000)
	if err != errEventTooLarge || len(evs) != 0 {
		t.Fatalf("got %d events, %v; want none and errEventTooLarge", len(evs), err)
	}
}

// FuzzSSEParser: any bytes, fed whole or cut anywhere, give the same events
// (a chunk boundary never changes what is parsed), and the parser never
// panics.
func FuzzSSEParser(f *testing.F) {
	f.Add([]byte("event: a\ndata: 1\n\n"), 3)
	f.Add([]byte("data: x\r\n\r\ndata: y\r\r"), 8)
	f.Add([]byte(": c\ndata\ndata:\n\n"), 1)
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		whole, err1 := parseAll(b)
		pieces, err2 := parseAll(b, cut, cut+1, cut+7)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("errors differ: %v, %v", err1, err2)
		}
		if d := cmp.Diff(whole, pieces); d != "" {
			t.Fatalf("cut at %d changed the events (-whole +pieces):\n%s", cut, d)
		}
		for _, e := range whole {
			if strings.ContainsAny(e.Name, "\r\n") || bytes.ContainsRune([]byte(e.Data), '\r') {
				t.Fatalf("an event holds a line end: %q", e)
			}
		}
	})
}
