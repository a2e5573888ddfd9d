package eval

import (
	"reflect"
	"strings"
	"unsafe"

	"github.com/proctor-evals/proctor/internal/jsontext"
)

// stringStruct writes a struct whose encoded fields are all plain strings
// (a prompt and its expected answer: the common input) as encoding/json
// does, byte for byte, without reflection per value: encoding/json's
// reflection cost a no-op episode more than a tenth of its CPU. It is
// built once per type, by newStringStruct, for the types it is sure of.
type stringStruct struct {
	fields []stringField
}

type stringField struct {
	key       string  // `"name":`
	offset    uintptr // of the string in the struct
	omitEmpty bool
}

var stringType = reflect.TypeFor[string]()

// newStringStruct returns the writer of t, or nil when t is not a struct
// whose every field encoding/json writes is a plain string under a simple
// name: anything else (an embedded field, a tag option but omitempty, a
// named string type, a marshaler, a name two fields share) is left to
// encoding/json.
func newStringStruct(t reflect.Type) *stringStruct {
	if t.Kind() != reflect.Struct {
		return nil
	}
	for _, m := range []reflect.Type{marshalerType, textMarshalerType} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return nil
		}
	}
	w := &stringStruct{}
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil
		}
		if !f.IsExported() {
			continue
		}
		tag, ok := f.Tag.Lookup("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if ok && opts != "" && opts != "omitempty" {
			return nil
		}
		if name == "" {
			name = f.Name
		}
		if f.Type != stringType || !simpleName(name) || names[name] {
			return nil
		}
		names[name] = true
		w.fields = append(w.fields, stringField{key: `"` + name + `":`, offset: f.Offset, omitEmpty: opts == "omitempty"})
	}
	return w
}

// simpleName reports whether encoding/json takes name as a key as it is
// and writes it unescaped: ASCII letters, digits, '_' and '-'.
func simpleName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// append appends the struct at p, of the type w was built for.
func (w *stringStruct) append(b []byte, p unsafe.Pointer) []byte {
	b = append(b, '{')
	first := true
	for i := range w.fields {
		f := &w.fields[i]
		s := *(*string)(unsafe.Add(p, f.offset))
		if f.omitEmpty && s == "" {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, f.key...)
		b = jsontext.AppendString(b, s)
	}
	return append(b, '}')
}
