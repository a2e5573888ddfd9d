package eval

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/internal/jsondepth"
	"github.com/proctor-evals/proctor/sink"
)

type (
	shallowTask struct {
		Prompt   string            `json:"prompt"`
		Tags     map[string][]int  `json:"tags"`
		When     time.Time         `json:"when"`
		Raw      []byte            `json:"raw"`
		Embedded                   // flattened
		Ptr      *Embedded         `json:"ptr"`
		Grid     [2][3]float64     `json:"grid"`
		Named    map[string]string `json:"named"`
	}
	Embedded struct{ A, B string }
	tree     struct {
		Kids []tree `json:"kids"`
	}
	withAny      struct{ V any }
	ownMarshaler struct{ N int }
	rawField     struct{ R json.RawMessage }
)

func (*ownMarshaler) MarshalJSON() ([]byte, error) { return []byte(`[[[]]]`), nil }

type (
	ptrText       struct{ N int }
	valueText     struct{ N int }
	fieldPtrText  struct{ P ptrText }
	arrayPtrText  struct{ A [2]ptrText }
	behindPointer struct {
		P *ptrText
		S []ptrText
		M map[string]ptrText
	}
)

func (*ptrText) MarshalText() ([]byte, error)  { return []byte("pointer"), nil }
func (valueText) MarshalText() ([]byte, error) { return []byte("value"), nil }

// TestNestsWithin: only a type whose every value encodes within the
// limit skips the engine's depth check; an interface, a raw or
// self-marshaling value, a recursive type, or nesting past the limit
// needs it. Each type's bound is checked against an encoded value too.
func TestNestsWithin(t *testing.T) {
	deep := reflect.TypeFor[string]()
	for range sink.MaxJSONDepth {
		deep = reflect.SliceOf(deep)
	}
	for _, c := range []struct {
		t    reflect.Type
		want bool
	}{
		{reflect.TypeFor[string](), true},
		{reflect.TypeFor[int](), true},
		{reflect.TypeFor[shallowTask](), true},
		{reflect.TypeFor[*shallowTask](), true},
		{deep, true}, // exactly the limit
		{reflect.SliceOf(deep), false},
		{reflect.TypeFor[any](), false},
		{reflect.TypeFor[withAny](), false},
		{reflect.TypeFor[json.RawMessage](), false},
		{reflect.TypeFor[rawField](), false},
		{reflect.TypeFor[ownMarshaler](), false},
		{reflect.TypeFor[tree](), false},
	} {
		if got := nestsWithin(c.t, sink.MaxJSONDepth); got != c.want {
			t.Errorf("nestsWithin(%v) = %v, want %v", c.t, got, c.want)
		}
	}
	v := shallowTask{Tags: map[string][]int{"a": {1}}, Ptr: &Embedded{}, Named: map[string]string{"x": "y"}}
	b, bound := encodeOf(&v), typeDepth(reflect.TypeFor[shallowTask](), sink.MaxJSONDepth, map[reflect.Type]bool{})
	if jsondepth.Exceeds(b, bound) || !jsondepth.Exceeds(b, bound-1) {
		t.Errorf("%s does not nest exactly its type's bound, %d", b, bound)
	}
}

// TestEncodesByPointer: a value is encoded through its pointer only when
// encoding/json writes both alike; a MarshalJSON or MarshalText on a
// pointer, in a part stored in the value itself, tells them apart.
func TestEncodesByPointer(t *testing.T) {
	check := func(v any, ptr any, want bool) {
		t.Helper()
		typ := reflect.TypeOf(v)
		if got := encodesByPointer(typ); got != want {
			t.Errorf("encodesByPointer(%v) = %v, want %v", typ, got, want)
		}
		byValue, _ := json.Marshal(v)
		byPointer, _ := json.Marshal(ptr)
		switch same := string(byValue) == string(byPointer); {
		case want && !same:
			t.Errorf("%v: %s by value, %s by pointer, but encoded by pointer", typ, byValue, byPointer)
		case !want && same:
			t.Errorf("%v: %s either way: not a case that tells them apart", typ, byValue)
		}
	}
	st := shallowTask{Tags: map[string][]int{"a": {1}}}
	check(st, &st, true)
	vt := valueText{1}
	check(vt, &vt, true)
	bp := behindPointer{P: &ptrText{}, S: []ptrText{{}}, M: map[string]ptrText{"k": {}}}
	check(bp, &bp, true)
	pt := ptrText{1}
	check(pt, &pt, false)
	fp := fieldPtrText{}
	check(fp, &fp, false)
	ap := arrayPtrText{}
	check(ap, &ap, false)
	om := ownMarshaler{}
	check(om, &om, false)
	if encodesByPointer(reflect.TypeFor[any]()) {
		t.Error("an interface is encoded by pointer")
	}
}
