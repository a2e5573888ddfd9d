package jsondepth_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/proctor-evals/proctor/internal/jsondepth"
)

func TestExceeds(t *testing.T) {
	t.Parallel()
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		v    string
		max  int
		want bool
	}{
		{`"ok"`, 0, false},
		{`{}`, 1, false},
		{`{}`, 0, true},
		{nest(512), 512, false},
		{nest(513), 512, true},
		{`[{"a":[1]}]`, 3, false},
		{`[{"a":[1]}]`, 2, true},
		{`["[[[[", "\"[[["]`, 1, false}, // brackets in strings, an escaped quote
		{`[[],[],[]]`, 2, false},
		{" \n\t[[[[]]]]", 3, true}, // whitespace first (found by FuzzExceeds: it read as a scalar)
	} {
		if got := jsondepth.Exceeds([]byte(c.v), c.max); got != c.want {
			t.Errorf("Exceeds(%.40q, %d) = %v, want %v", c.v, c.max, got, c.want)
		}
	}
}

// FuzzExceeds: on valid JSON, Exceeds agrees with the nesting
// encoding/json's tokenizer sees; on any input it does not panic.
func FuzzExceeds(f *testing.F) {
	for _, s := range []string{`"ok"`, `[]`, `{"a":[1,{"b":"]"}]}`, `["\\"[["]`, strings.Repeat("[", 600) + strings.Repeat("]", 600), `[`, `]]]`} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, v []byte, max int) {
		max = max & 1023
		got := jsondepth.Exceeds(v, max)
		if !json.Valid(v) {
			return
		}
		if want := depth(v) > max; got != want {
			t.Fatalf("Exceeds(%.60q, %d) = %v, the tokenizer's depth %d", v, max, got, depth(v))
		}
	})
}

func depth(v []byte) int {
	dec := json.NewDecoder(bytes.NewReader(v))
	d, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			d++
			deepest = max(deepest, d)
		case json.Delim(']'), json.Delim('}'):
			d--
		}
	}
}
