package trajectory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
)

// Args matches a call's arguments: the event's Input, JSON. The zero
// value matches any arguments.
type Args struct {
	desc  string
	match func(input json.RawMessage) bool
}

// Match reports whether input matches.
func (a Args) Match(input json.RawMessage) bool { return a.match == nil || a.match(input) }

func (a Args) String() string { return a.desc }

// Exact matches arguments equal to v as JSON values: v is encoded as
// JSON, and key order, spacing and the spelling of numbers (1, 1.0, 1e0)
// do not count (numbers compare as float64, integers exactly).
func Exact(v any) Args {
	want := mustValue(v)
	return Args{desc: "= " + compact(mustJSON(v)), match: func(in json.RawMessage) bool {
		got, ok := decode(in)
		return ok && equal(want, got)
	}}
}

// Contains matches arguments of which v is a JSON subset: each member of
// an object of v is in the arguments' object with a matching value, more
// members allowed; arrays match element by element, of equal length;
// anything else as in [Exact].
func Contains(v any) Args {
	want := mustValue(v)
	return Args{desc: "⊇ " + compact(mustJSON(v)), match: func(in json.RawMessage) bool {
		got, ok := decode(in)
		return ok && subset(want, got)
	}}
}

// Matches matches arguments whose text matches the regular expression
// expr (package regexp, unanchored): a JSON string's value, anything else
// its compact JSON. It panics on an invalid expression.
func Matches(expr string) Args {
	re := regexp.MustCompile(expr)
	return Args{desc: "~ /" + expr + "/", match: func(in json.RawMessage) bool {
		var s string
		if json.Unmarshal(in, &s) == nil {
			return re.MatchString(s)
		}
		return re.MatchString(compact(in))
	}}
}

// Where matches arguments that decode into an A for which f is true;
// arguments that do not decode do not match. desc says what f checks, in
// failure messages.
func Where[A any](desc string, f func(A) bool) Args {
	return Args{desc: ": " + desc, match: func(in json.RawMessage) bool {
		var a A
		return json.Unmarshal(nullIfEmpty(in), &a) == nil && f(a)
	}}
}

func nullIfEmpty(in json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(in)) == 0 {
		return json.RawMessage("null")
	}
	return in
}

// decode reads a JSON value with its numbers kept as text, exactly; no
// arguments are null.
func decode(in json.RawMessage) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(nullIfEmpty(in)))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	if _, err := d.Token(); err == nil {
		return nil, false // more than one value
	}
	return v, true
}

func mustJSON(v any) json.RawMessage {
	if raw, ok := v.(json.RawMessage); ok {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("trajectory: arguments %v: %v", v, err))
	}
	return b
}

func mustValue(v any) any {
	val, ok := decode(mustJSON(v))
	if !ok {
		panic(fmt.Sprintf("trajectory: arguments %v are not one JSON value", v))
	}
	return val
}

// equal compares decoded JSON values, numbers by their exact value.
func equal(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !equal(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equal(a[i], b[i]) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := b.(json.Number)
		return ok && sameNumber(a, b)
	default:
		return a == b // string, bool, nil
	}
}

// subset is Contains's order: each member of want's objects is in got.
func subset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !subset(wv, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(w) != len(g) {
			return false
		}
		for i := range w {
			if !subset(w[i], g[i]) {
				return false
			}
		}
		return true
	default:
		return equal(want, got)
	}
}

// sameNumber compares numbers by value: as float64, and integers written
// without a fraction or exponent exactly (an ID past 2⁵³ stays itself).
// big.Rat would be exact throughout, but an exponent like 1e999999999 in
// an agent's arguments would cost it gigabytes.
func sameNumber(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, errx := strconv.ParseFloat(string(a), 64)
	y, erry := strconv.ParseFloat(string(b), 64)
	if errx != nil || erry != nil || x != y {
		return false
	}
	i, oki := new(big.Int).SetString(string(a), 10)
	j, okj := new(big.Int).SetString(string(b), 10)
	return !oki || !okj || i.Cmp(j) == 0
}

// compact is the JSON text in, on one line.
func compact(in json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, in) != nil {
		return string(in)
	}
	return b.String()
}
