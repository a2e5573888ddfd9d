package eval

// What the engine learns of a type once, to encode its values with less
// work: how deep they nest as JSON (conclude measures the nesting of an
// input or output only when its type could nest deeper than a record
// holds; a struct of strings never does), and whether encoding/json
// writes a pointer to a value as it writes the value (then the value is
// encoded through its pointer, not copied into an interface first).

import (
	"encoding"
	"encoding/json"
	"reflect"
	"time"
)

// nestsWithin reports whether every value of type t, encoded by
// encoding/json, nests arrays and objects at most limit levels deep: no
// interface, no type with a MarshalJSON of its own (either may write
// anything), no recursive type, and at most limit levels of slices, arrays,
// maps and structs.
func nestsWithin(t reflect.Type, limit int) bool {
	return typeDepth(t, limit, map[reflect.Type]bool{}) <= limit
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	timeType          = reflect.TypeFor[time.Time]()
)

// typeDepth is the deepest nesting of t's values, or more than limit when
// it may be deeper; on is the types being measured around t.
func typeDepth(t reflect.Type, limit int, on map[reflect.Type]bool) int {
	unbounded := limit + 1
	if t == timeType {
		return 0 // its MarshalJSON writes a string
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return unbounded
	}
	if t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType) {
		return 0 // a string
	}
	if on[t] {
		return unbounded // recursive
	}
	on[t] = true
	defer delete(on, t)
	switch t.Kind() {
	case reflect.Interface:
		return unbounded
	case reflect.Pointer:
		return typeDepth(t.Elem(), limit, on)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return 0 // base64, as a string
		}
		return 1 + typeDepth(t.Elem(), limit, on)
	case reflect.Array, reflect.Map:
		return 1 + typeDepth(t.Elem(), limit, on)
	case reflect.Struct:
		d := 0
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() || f.Anonymous {
				d = max(d, typeDepth(f.Type, limit, on))
			}
		}
		return 1 + d // embedded structs are flattened: counted one deeper, which errs on the safe side
	}
	return 0 // a scalar, or what encoding/json refuses (a record then holds the error as a string)
}

// encodesByPointer reports whether encoding/json writes a *t exactly as
// it writes a t, which it does unless a part of t stored in t itself
// (t, its fields, its arrays' elements) has a MarshalJSON or MarshalText
// on its pointer only: reached through a pointer, that part is
// addressable and the method is called; in a value, it is not. An
// interface is not: encodeJSON writes the string or raw JSON in it its
// own way.
func encodesByPointer(t reflect.Type) bool {
	return t.Kind() != reflect.Interface && partsByPointer(t)
}

func partsByPointer(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	if p.Implements(marshalerType) && !t.Implements(marshalerType) ||
		p.Implements(textMarshalerType) && !t.Implements(textMarshalerType) {
		return false
	}
	switch t.Kind() {
	case reflect.Array:
		return partsByPointer(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); (f.IsExported() || f.Anonymous) && !partsByPointer(f.Type) {
				return false
			}
		}
	}
	return true // what lies behind a pointer, slice, map or interface is addressed alike either way
}
