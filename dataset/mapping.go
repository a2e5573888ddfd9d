package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
)

// Row is one flat record of a dataset file: field name → JSON value. A JSONL
// line is one; dataset/parquetdataset turns each Parquet row into one.
type Row map[string]json.RawMessage

// Mapping says which fields of a flat row make a [Sample], so that a file
// not in proctor's {"id","input","tags"} shape (a Hugging Face dataset, a
// benchmark's own JSONL) loads without rewriting it. For a row
//
//	{"instance_id": "django-1", "repo": "django", "problem": "…", "patch": "…"}
//
// the mapping
//
//	Mapping{ID: "instance_id", Input: []string{"problem", "patch"}, Tags: []string{"repo"}}
//
// yields Sample{ID: "django-1", Input: T decoded from {"problem":…,"patch":…},
// Tags: {"repo": "django"}}.
//
// No field is dropped silently: a field named by the mapping that a row
// lacks is an error, and so is a field of Input that T has no place for.
type Mapping struct {
	// ID is the field holding the sample ID, a JSON string or number. Empty
	// means the row's 1-based number in the file ("1", "2"…); such IDs
	// change when the file is reordered, so prefer a field when there is one.
	ID string
	// Input lists the fields that form the input: a JSON object of just
	// those fields, decoded into T. When T is neither a struct nor a map
	// and Input names one field, that field's value is decoded into T
	// (Input: []string{"question"} for a T of string). Nil means every field
	// not named by ID or Tags; those that T has no place for are an error
	// unless the loader allows unknown fields.
	Input []string
	// Tags lists the fields copied into the sample's tags under their own
	// name: strings as they are, numbers and booleans as their JSON text,
	// objects and arrays as compact JSON. A null field is no tag.
	Tags []string
}

// FromRow makes a sample of row, the n-th (1-based) row of its file, by the
// mapping m. Fields of the input that T has no place for are an error
// unless allowUnknown is set and Input is nil (fields listed in Input must
// land in T). It checks the ID with [CheckID].
//
// Its errors are *RowError with Field set and the position left for the
// loader to fill in; loaders of other formats can use it as this package's
// do.
func FromRow[T any](m Mapping, row Row, n int, allowUnknown bool) (Sample[T], error) {
	var s Sample[T]
	fail := func(field string, err error) (Sample[T], error) {
		return Sample[T]{}, &RowError{Field: field, Err: err}
	}
	if m.ID == "" {
		s.ID = strconv.Itoa(n)
	} else {
		raw, ok := row[m.ID]
		if !ok {
			return fail(m.ID, errMissing)
		}
		id, err := idValue(raw)
		if err != nil {
			return fail(m.ID, err)
		}
		s.ID = id
	}
	for _, name := range m.Tags {
		raw, ok := row[name]
		if !ok {
			return fail(name, errMissing)
		}
		if v, ok := tagValue(raw); ok {
			if s.Tags == nil {
				s.Tags = make(map[string]string, len(m.Tags))
			}
			s.Tags[name] = v
		}
	}
	in := row
	strict := !allowUnknown
	if m.Input != nil {
		strict = true
		in = make(Row, len(m.Input))
		for _, name := range m.Input {
			raw, ok := row[name]
			if !ok {
				return fail(name, errMissing)
			}
			in[name] = raw
		}
		if len(m.Input) == 1 && !objectLike(reflect.TypeFor[T]()) {
			if err := decode(in[m.Input[0]], &s.Input, false); err != nil {
				return fail(m.Input[0], err)
			}
			return s, checkMapped(s)
		}
	} else {
		in = make(Row, len(row))
		for k, v := range row {
			if k != m.ID && !slices.Contains(m.Tags, k) {
				in[k] = v
			}
		}
	}
	b, err := json.Marshal(in)
	if err != nil {
		return fail("", err)
	}
	if err := decode(b, &s.Input, strict); err != nil {
		var ue *json.UnmarshalTypeError
		if errors.As(err, &ue) && ue.Field != "" {
			return fail(ue.Field, err)
		}
		return fail("", fmt.Errorf("input: %w", err))
	}
	return s, checkMapped(s)
}

var errMissing = errors.New("missing")

func checkMapped[T any](s Sample[T]) error {
	if err := checkSample(s); err != nil {
		return &RowError{Err: err}
	}
	return nil
}

// objectLike reports whether a JSON object decodes into t field by field.
func objectLike(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Interface:
		return true
	}
	return false
}

// idValue reads an ID from a JSON string or number, as written.
func idValue(raw json.RawMessage) (string, error) {
	if c := firstByte(raw); c == '-' || c >= '0' && c <= '9' {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", err
		}
		return n.String(), nil
	}
	var id string
	if firstByte(raw) != '"' || json.Unmarshal(raw, &id) != nil {
		return "", fmt.Errorf("want a string or a number, got %s", kind(raw))
	}
	return id, nil
}

// tagValue renders a JSON value as a tag; ok is false for null.
func tagValue(raw json.RawMessage) (v string, ok bool) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", false
	case raw[0] == '"':
		if json.Unmarshal(raw, &v) == nil {
			return v, true
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw), true
	}
	return b.String(), true
}

func kind(raw json.RawMessage) string {
	switch c := firstByte(raw); {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	default:
		return "invalid JSON"
	}
}

func firstByte(b []byte) byte {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// decode unmarshals one JSON value into v, refusing unknown object fields
// when strict, and anything after the value.
func decode(b []byte, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("unexpected data after the JSON value (which ends at byte %d)", end)
	}
	return nil
}
