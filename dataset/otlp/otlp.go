// Package otlp turns OpenTelemetry traces into a dataset of recorded
// operations: [Traces] reads the OTLP JSON files that the OpenTelemetry
// Collector's file exporter writes and yields one [recorded.Case] per GenAI
// operation span, with the span's trace and span IDs kept, ready for the
// replay harness (harness/replay).
//
// # The file format
//
// Each non-blank line is one ExportTraceServiceRequest (or TracesData: the
// same JSON) in the OTLP JSON encoding: the protobuf JSON mapping, with
// trace and span IDs as hex strings instead of base64, enums as integers
// or names, 64-bit integers as strings or numbers, and field names in
// lowerCamelCase or as in the .proto file. Unknown fields are ignored, as
// the OTLP specification asks of receivers. [UnmarshalJSON] decodes one
// line.
//
// # Which spans, and what they held
//
// By default a span is an operation when it has the attribute
// gen_ai.operation.name (chat, invoke_agent, execute_tool…) and its
// content was recorded (see [Content]); instrumentations record content
// only when asked to, so spans without it are skipped. [Options.Select]
// chooses other spans, and [Options.Extract] reads their content another
// way.
//
// The sample ID is "TRACE_ID-SPAN_ID" in lowercase hex. A span exported
// twice (a retried export) yields one sample. Tags come from a few
// attributes with few values (model, provider, service: [DefaultTags]);
// never trace IDs.
//
// # Malformed files
//
// A loader never panics on its input. A line that is not OTLP JSON, an ID
// that is not hex of the right length, or a selected span whose content
// cannot be read ends the dataset with a *dataset.RowError naming the
// file, the line and, for a span, its place in the line.
//
// This package links protobuf; eval and harness/replay do not.
package otlp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/dataset/recorded"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// DefaultTags are the attributes copied into a sample's tags when
// Options.Tags is nil: the operation, the provider and model, the service.
var DefaultTags = []string{
	"gen_ai.operation.name",
	"gen_ai.provider.name",
	"gen_ai.system", // the provider's attribute before gen_ai.provider.name
	"gen_ai.request.model",
	"service.name",
}

// Options tune [Traces]. The zero value (or nil) means the defaults.
type Options struct {
	// Select reports whether a span becomes a sample. Nil selects spans
	// with a gen_ai.operation.name attribute whose content [Content] finds;
	// a span Select selects must have content (Extract must not fail).
	Select func(*Span) bool
	// Extract returns a selected span's input and output. Nil means
	// [Content]. An error is a *dataset.RowError for the span.
	Extract func(*Span) (input, output json.RawMessage, err error)
	// Tags lists the attributes copied into each sample's tags, looked up
	// on the span, then on its resource; a missing one is no tag. Nil
	// means DefaultTags; empty means none. Choose attributes with few
	// values: tags are breakdown keys.
	Tags []string
	// MaxLineBytes bounds the length of a line (one export request); a
	// longer one is a *dataset.RowError. Zero means
	// dataset.DefaultMaxLineBytes.
	MaxLineBytes int
}

// Span is a span as the options see it, decoded from OTLP: IDs in
// lowercase hex, times in UTC, attribute values as Go values (string,
// bool, int64, float64, []byte, []any or map[string]any).
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          string // "client", "internal", "server", "producer", "consumer" or ""
	Start, End                    time.Time
	Attrs                         map[string]any
	Events                        []Event
	StatusCode                    string // "ok", "error" or "" (unset)
	StatusMessage                 string
	Resource                      map[string]any // the attributes of the span's resource
	Scope                         string         // the instrumentation scope's name
}

// Event is a span event.
type Event struct {
	Name  string
	Time  time.Time
	Attrs map[string]any
}

// Attr returns the attribute key of the span, or else of its resource.
func (s *Span) Attr(key string) (any, bool) {
	if v, ok := s.Attrs[key]; ok {
		return v, true
	}
	v, ok := s.Resource[key]
	return v, ok
}

// Traces returns the dataset of the operations in the OTLP JSON file at
// path (see the package doc). It reads the file lazily, line by line, on
// each call of Samples.
func Traces(path string, opts *Options) dataset.Dataset[recorded.Case] {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Tags == nil {
		o.Tags = DefaultTags
	}
	return dataset.Func[recorded.Case](func(ctx context.Context) iter.Seq2[dataset.Sample[recorded.Case], error] {
		return func(yield func(dataset.Sample[recorded.Case], error) bool) {
			seen := make(map[string]struct{})
			for l, err := range dataset.Lines(ctx, path, o.MaxLineBytes) {
				if err != nil {
					yield(dataset.Sample[recorded.Case]{}, err)
					return
				}
				for s, re := range o.samples(l.Bytes) {
					if re != nil {
						re.File, re.Line = path, l.Number
						yield(dataset.Sample[recorded.Case]{}, re)
						return
					}
					if _, dup := seen[s.ID]; dup {
						continue
					}
					seen[s.ID] = struct{}{}
					if !yield(s, nil) {
						return
					}
				}
			}
		}
	})
}

// samples yields the samples of one line; its errors have no position but
// the field (the span's place in the line).
func (o *Options) samples(b []byte) iter.Seq2[dataset.Sample[recorded.Case], *dataset.RowError] {
	return func(yield func(dataset.Sample[recorded.Case], *dataset.RowError) bool) {
		req, err := UnmarshalJSON(b)
		if err != nil {
			yield(dataset.Sample[recorded.Case]{}, &dataset.RowError{Err: err})
			return
		}
		for i, rs := range req.GetResourceSpans() {
			resource := attrMap(rs.GetResource().GetAttributes())
			for j, ss := range rs.GetScopeSpans() {
				scope := ss.GetScope().GetName()
				for k, ps := range ss.GetSpans() {
					field := fmt.Sprintf("resourceSpans[%d].scopeSpans[%d].spans[%d]", i, j, k)
					s, ok, err := o.sample(ps, resource, scope)
					if err != nil {
						yield(dataset.Sample[recorded.Case]{}, &dataset.RowError{Field: field, Err: err})
						return
					}
					if ok && !yield(s, nil) {
						return
					}
				}
			}
		}
	}
}

// sample makes the sample of span ps, if it is selected.
func (o *Options) sample(ps *tracepb.Span, resource map[string]any, scope string) (dataset.Sample[recorded.Case], bool, error) {
	var none dataset.Sample[recorded.Case]
	sp, err := view(ps, resource, scope)
	if err != nil {
		return none, false, err
	}
	extract := o.Extract
	if extract == nil {
		extract = Content
	}
	var in, out json.RawMessage
	if o.Select == nil {
		if _, ok := sp.Attrs["gen_ai.operation.name"]; !ok {
			return none, false, nil
		}
		in, out, err = extract(sp)
		if errors.Is(err, ErrNoContent) {
			return none, false, nil
		}
	} else {
		if !o.Select(sp) {
			return none, false, nil
		}
		in, out, err = extract(sp)
	}
	if err != nil {
		return none, false, fmt.Errorf("span %s %q: %w", sp.SpanID, sp.Name, err)
	}
	c := recorded.Case{Input: in, Output: out, TraceID: sp.TraceID, SpanID: sp.SpanID, Time: sp.Start}
	for k, v := range sp.Attrs {
		if isContent(k) {
			continue
		}
		if c.Attrs == nil {
			c.Attrs = make(map[string]string, len(sp.Attrs))
		}
		c.Attrs[k] = String(v)
	}
	s := dataset.Sample[recorded.Case]{ID: c.SampleID(), Input: c}
	for _, key := range o.Tags {
		if v, ok := sp.Attr(key); ok {
			if s.Tags == nil {
				s.Tags = make(map[string]string, len(o.Tags))
			}
			s.Tags[key] = String(v)
		}
	}
	return s, true, nil
}

// view converts a decoded span to a Span, checking its IDs.
func view(ps *tracepb.Span, resource map[string]any, scope string) (*Span, error) {
	if n := len(ps.GetTraceId()); n != 16 || allZero(ps.GetTraceId()) {
		return nil, fmt.Errorf("traceId: want 16 bytes, not all zero (32 hex digits), got %d bytes", n)
	}
	if n := len(ps.GetSpanId()); n != 8 || allZero(ps.GetSpanId()) {
		return nil, fmt.Errorf("spanId: want 8 bytes, not all zero (16 hex digits), got %d bytes", n)
	}
	if n := len(ps.GetParentSpanId()); n != 0 && n != 8 {
		return nil, fmt.Errorf("parentSpanId: want 8 bytes or none, got %d bytes", n)
	}
	sp := &Span{
		TraceID:       hex.EncodeToString(ps.GetTraceId()),
		SpanID:        hex.EncodeToString(ps.GetSpanId()),
		ParentSpanID:  hex.EncodeToString(ps.GetParentSpanId()),
		Name:          ps.GetName(),
		Start:         unixNano(ps.GetStartTimeUnixNano()),
		End:           unixNano(ps.GetEndTimeUnixNano()),
		Attrs:         attrMap(ps.GetAttributes()),
		StatusMessage: ps.GetStatus().GetMessage(),
		Resource:      resource,
		Scope:         scope,
	}
	switch ps.GetKind() {
	case tracepb.Span_SPAN_KIND_INTERNAL:
		sp.Kind = "internal"
	case tracepb.Span_SPAN_KIND_SERVER:
		sp.Kind = "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		sp.Kind = "client"
	case tracepb.Span_SPAN_KIND_PRODUCER:
		sp.Kind = "producer"
	case tracepb.Span_SPAN_KIND_CONSUMER:
		sp.Kind = "consumer"
	}
	switch ps.GetStatus().GetCode() {
	case tracepb.Status_STATUS_CODE_OK:
		sp.StatusCode = "ok"
	case tracepb.Status_STATUS_CODE_ERROR:
		sp.StatusCode = "error"
	}
	for _, e := range ps.GetEvents() {
		sp.Events = append(sp.Events, Event{Name: e.GetName(), Time: unixNano(e.GetTimeUnixNano()), Attrs: attrMap(e.GetAttributes())})
	}
	return sp, nil
}

func allZero(b []byte) bool { return !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) }

func unixNano(ns uint64) time.Time {
	if ns == 0 || ns > 1<<63-1 {
		return time.Time{}
	}
	return time.Unix(0, int64(ns)).UTC()
}

func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

// value converts an AnyValue to a Go value; an empty one is nil.
func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		a := make([]any, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			a = append(a, value(e))
		}
		return a
	case *commonpb.AnyValue_KvlistValue:
		m := attrMap(x.KvlistValue.GetValues())
		if m == nil {
			m = map[string]any{}
		}
		return m
	}
	return nil
}

// String renders an attribute value as a tag or Case.Attrs value: a
// string as it is, anything else as compact JSON (bytes in base64).
func String(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(jsonSafe(v))
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// jsonSafe replaces the float values JSON cannot hold (NaN, ±Inf) by
// their names.
func jsonSafe(v any) any {
	switch x := v.(type) {
	case float64:
		if x != x || x > 1.7976931348623157e308 || x < -1.7976931348623157e308 {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonSafe(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonSafe(e)
		}
		return out
	}
	return v
}

// UnmarshalJSON decodes one line of OTLP JSON: an ExportTraceServiceRequest
// or a TracesData, which have the same form ({"resourceSpans": [...]}).
// Trace and span IDs are read as hex, as OTLP JSON writes them, where the
// plain protobuf JSON mapping would read base64; unknown fields are
// ignored. It decodes into TracesData, whose package, unlike the
// collector's, does not link gRPC.
func UnmarshalJSON(b []byte) (*tracepb.TracesData, error) {
	if i := invalidUTF8At(b); i >= 0 {
		return nil, fmt.Errorf("otlp: invalid UTF-8 at byte %d", i)
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("otlp: unexpected data after the JSON object")
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, fmt.Errorf("otlp: want a JSON object (an export request), got %s", jsonKind(doc))
	}
	if err := hexToBase64(doc); err != nil {
		return nil, err
	}
	rewritten, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	var req tracepb.TracesData
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(rewritten, &req); err != nil {
		// protojson's positions are in the rewritten JSON, not the line.
		return nil, fmt.Errorf("otlp: not an OTLP export request: %s", protoPosition.ReplaceAllString(err.Error(), ""))
	}
	return &req, nil
}

var protoPosition = regexp.MustCompile(` ?\(line \d+:\d+\)`)

// idFields are the fields that OTLP JSON writes in hex, in both spellings.
var idFields = map[string]bool{
	"traceId": true, "spanId": true, "parentSpanId": true,
	"trace_id": true, "span_id": true, "parent_span_id": true,
}

// hexToBase64 rewrites the hex IDs in doc as base64, which protojson
// reads. Attributes cannot hold such a key: their keys are values.
func hexToBase64(doc any) error {
	switch x := doc.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) { // sorted: the error names the same field every time
			v := x[k]
			if s, ok := v.(string); ok && idFields[k] {
				b, err := hex.DecodeString(s)
				if err != nil {
					return fmt.Errorf("otlp: %s %q is not hex", k, s)
				}
				x[k] = base64.StdEncoding.EncodeToString(b)
				continue
			}
			if err := hexToBase64(v); err != nil {
				return err
			}
		}
	case []any:
		for _, v := range x {
			if err := hexToBase64(v); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "an object"
}

// invalidUTF8At returns the byte offset of the first invalid UTF-8
// sequence of b, or -1.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// bom is the UTF-8 byte-order mark some editors write at the start of a file.
