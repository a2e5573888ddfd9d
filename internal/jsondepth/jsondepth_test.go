package jsondepth_test

import (
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
	} {
		if got := jsondepth.Exceeds([]byte(c.v), c.max); got != c.want {
			t.Errorf("Exceeds(%.40q, %d) = %v, want %v", c.v, c.max, got, c.want)
		}
	}
}
