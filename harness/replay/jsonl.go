package replay

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/proctor-evals/proctor/dataset"
)

// JSONLOptions tune [JSONL]. The zero value (or nil) means the defaults.
type JSONLOptions struct {
	// AllowUnknownFields ignores fields of a line other than those JSONL
	// reads, instead of failing on them.
	AllowUnknownFields bool
	// MaxLineBytes bounds the length of a line; a longer one is a
	// *dataset.RowError. Zero means dataset.DefaultMaxLineBytes.
	MaxLineBytes int
}

// JSONL returns the dataset of recorded conversations in the JSON Lines
// file at path, one operation per non-blank line:
//
//	{"id": "c-1", "input": [...], "output": [...], "trace_id": "4bf9…", "span_id": "00f0…",
//	 "time": "2026-11-23T10:04:05Z", "tags": {"model": "m-1"}, "attrs": {"finish_reason": "stop"}}
//
// input and output (any JSON) are required; output may be null. id is
// optional: without it the sample ID is "TRACE_ID-SPAN_ID" (as
// dataset/otlp names spans), so a line needs an id or a trace_id. trace_id
// and span_id, when given, are hex (32 and 16 digits, read in any case,
// kept in lowercase); time is RFC 3339. tags become the sample's tags:
// breakdown keys with few values (model, route, customer tier), never IDs.
// An unknown field is an error unless AllowUnknownFields is set, so a typo
// does not silently drop a field.
//
// A malformed line ends the dataset with a *dataset.RowError naming the
// file, the line and, where known, the field. A byte-order mark at the
// start of the file is skipped.
//
// This loader lives here, not in dataset/otlp, so that a program that
// judges recorded conversations links no protobuf.
func JSONL(path string, opts *JSONLOptions) dataset.Dataset[Case] {
	var o JSONLOptions
	if opts != nil {
		o = *opts
	}
	return dataset.Func[Case](func(ctx context.Context) iter.Seq2[dataset.Sample[Case], error] {
		return func(yield func(dataset.Sample[Case], error) bool) {
			for l, err := range dataset.Lines(ctx, path, o.MaxLineBytes) {
				if err != nil {
					yield(dataset.Sample[Case]{}, err)
					return
				}
				s, re := decodeConversation(l.Bytes, !o.AllowUnknownFields)
				if re != nil {
					re.File, re.Line = path, l.Number
					if re.Column > 0 {
						re.Column += l.Skip
					}
					yield(dataset.Sample[Case]{}, re)
					return
				}
				if !yield(s, nil) {
					return
				}
			}
		}
	})
}

type conversationLine struct {
	ID      *string           `json:"id"`
	Input   json.RawMessage   `json:"input"`
	Output  json.RawMessage   `json:"output"`
	TraceID string            `json:"trace_id"`
	SpanID  string            `json:"span_id"`
	Time    *time.Time        `json:"time"`
	Tags    map[string]string `json:"tags"`
	Attrs   map[string]string `json:"attrs"`
}

// decodeConversation decodes one line; the error has no position.
func decodeConversation(b []byte, strict bool) (dataset.Sample[Case], *dataset.RowError) {
	fail := func(field string, err error) (dataset.Sample[Case], *dataset.RowError) {
		return dataset.Sample[Case]{}, &dataset.RowError{Field: field, Err: err}
	}
	if !utf8.Valid(b) {
		return fail("", errors.New("invalid UTF-8"))
	}
	var l conversationLine
	dec := json.NewDecoder(bytes.NewReader(b))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(&l); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return dataset.Sample[Case]{}, &dataset.RowError{Column: int(se.Offset), Err: err}
		case errors.As(err, &te):
			return dataset.Sample[Case]{}, &dataset.RowError{Column: int(te.Offset), Field: te.Field, Err: err}
		}
		return fail("", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail("", errors.New("unexpected data after the JSON object"))
	}
	switch {
	case l.Input == nil || string(l.Input) == "null":
		return fail("input", errors.New("missing"))
	case l.Output == nil:
		return fail("output", errors.New("missing (null if the operation answered nothing)"))
	}
	c := Case{Input: l.Input, Output: l.Output, Attrs: l.Attrs}
	if string(c.Output) == "null" {
		c.Output = nil // Harness returns null for it; nil keeps one form
	}
	var err error
	if c.TraceID, err = hexID(l.TraceID, 16); err != nil {
		return fail("trace_id", err)
	}
	if c.SpanID, err = hexID(l.SpanID, 8); err != nil {
		return fail("span_id", err)
	}
	if c.SpanID != "" && c.TraceID == "" {
		return fail("trace_id", errors.New("missing, but span_id is given"))
	}
	if l.Time != nil {
		c.Time = l.Time.UTC()
	}
	s := dataset.Sample[Case]{Input: c, Tags: l.Tags}
	switch {
	case l.ID != nil:
		s.ID = *l.ID
	case c.TraceID != "":
		s.ID = c.SampleID()
	default:
		return fail("id", errors.New("missing, and there is no trace_id to name the sample by"))
	}
	if err := dataset.CheckID(s.ID); err != nil {
		return fail("id", err)
	}
	return s, nil
}

// hexID checks an optional hex ID of n bytes and returns it in lowercase.
func hexID(s string, n int) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != n {
		return "", fmt.Errorf("%q is not %d hex digits", s, 2*n)
	}
	if bytes.Count(b, []byte{0}) == n {
		return "", fmt.Errorf("%q is all zeros: not a valid ID", s)
	}
	return strings.ToLower(s), nil
}

// bom is the UTF-8 byte-order mark some editors write at the start of a file.
