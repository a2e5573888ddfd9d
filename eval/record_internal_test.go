package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"testing"
)

// ptrMarshaler encodes differently when encoding/json can address it.
type ptrMarshaler struct{ N int }

func (p *ptrMarshaler) MarshalJSON() ([]byte, error) { return []byte(`"by pointer"`), nil }

type valueText struct{ S string }

func (v valueText) MarshalText() ([]byte, error) { return []byte("text:" + v.S), nil }

type plain struct {
	Prompt string            `json:"prompt"`
	N      float64           `json:"n"`
	Tags   map[string]string `json:"tags,omitempty"`
}

type nested struct {
	A   plain
	Arr [2]ptrMarshaler
}

type named string

// checkEncodeValue checks that encodeValue encodes v exactly as encodeJSON
// does, twice in a row into one buffer (the second time after another
// encoding, as input and output share it), and that the encoding is not
// overwritten by the one after it.
func checkEncodeValue[V any](t *testing.T, name string, v V) {
	t.Helper()
	want := encodeJSON(any(v))
	var buf recordBuf
	for i := range 2 {
		got := encodeValue(&buf, &v, marshalsByPointer[V]())
		after := append([]byte(nil), got...)
		encodeValue(&buf, &v, marshalsByPointer[V]()) // appends after got
		if !bytes.Equal(got, want) || (got == nil) != (want == nil) || !bytes.Equal(got, after) {
			t.Errorf("%s (pass %d): encodeValue = %q (nil %v), encodeJSON = %q (nil %v)", name, i, got, got == nil, want, want == nil)
		}
		buf.b = buf.b[:0]
	}
}

func TestEncodeValueMatchesEncodeJSON(t *testing.T) {
	checkEncodeValue(t, "string", "a <b> & \"c\"\n\xff")
	checkEncodeValue(t, "named string", named("<x>"))
	checkEncodeValue(t, "raw", json.RawMessage(`{"a": 1,  "b":"<"}`))
	checkEncodeValue(t, "invalid raw", json.RawMessage(`{"a":`))
	checkEncodeValue(t, "nil raw", json.RawMessage(nil))
	checkEncodeValue(t, "nil any", any(nil))
	checkEncodeValue(t, "any string", any("<s>"))
	checkEncodeValue(t, "any raw", any(json.RawMessage(`[1, 2]`)))
	checkEncodeValue(t, "any struct", any(plain{Prompt: "p"}))
	checkEncodeValue(t, "nil Stringer", fmt.Stringer(nil))
	checkEncodeValue(t, "struct", plain{Prompt: "what is <1>+1?", N: 2.5, Tags: map[string]string{"b": "2", "a": "1"}})
	checkEncodeValue(t, "pointer-receiver marshaler", ptrMarshaler{N: 1})
	checkEncodeValue(t, "nested pointer-receiver marshaler", nested{Arr: [2]ptrMarshaler{{1}, {2}}})
	checkEncodeValue(t, "slice of pointer-receiver marshalers", []ptrMarshaler{{1}})
	checkEncodeValue(t, "value text marshaler", valueText{"x"})
	checkEncodeValue(t, "map", map[valueText]int{{"k"}: 1})
	checkEncodeValue(t, "nil pointer", (*plain)(nil))
	checkEncodeValue(t, "pointer", &plain{Prompt: "p"})
	checkEncodeValue(t, "NaN", math.NaN())
	checkEncodeValue(t, "struct with NaN", plain{N: math.Inf(1)})
	checkEncodeValue(t, "func", func() {})
	checkEncodeValue(t, "int", 42)
	checkEncodeValue(t, "large", plain{Prompt: string(bytes.Repeat([]byte("x"), 100<<10))})
}

func TestMarshalsByPointer(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want bool
	}{
		{"plain struct", marshalsByPointer[plain](), true},
		{"interface", marshalsByPointer[any](), false},
		{"pointer-receiver marshaler", marshalsByPointer[ptrMarshaler](), false},
		{"nested in a field and an array", marshalsByPointer[nested](), false},
		{"slice of them: elements are addressable either way", marshalsByPointer[[]ptrMarshaler](), true},
		{"value receiver", marshalsByPointer[valueText](), true},
	} {
		if c.got != c.want {
			t.Errorf("marshalsByPointer for %s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// The common inputs and outputs are encoded into a record without
// allocating: no boxing of a copy, no buffer per record.
func TestEncodeValueAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not checked under the race detector")
	}
	var buf recordBuf
	in, out := plain{Prompt: "what is 1+1?"}, "2"
	byPtr := marshalsByPointer[plain]()
	encode := func() {
		buf.b = buf.b[:0]
		encodeValue(&buf, &in, byPtr)
		encodeValue(&buf, &out, false)
	}
	encode()
	if n := testing.AllocsPerRun(100, encode); n != 0 {
		t.Errorf("encoding an input and an output: %v allocations, want 0", n)
	}
}
