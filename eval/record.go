package eval

// Records: what an attempt leaves, and the episode seed.

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"time"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
)

// buildRecord fills rec with an attempt's outcome. Tokens and cost are
// those of every attempt of the episode: earlier is what the attempts
// before this one used. out is nil when the harness produced no output.
// The input and the output are encoded into buf, whose bytes rec then
// holds: they belong to the record until buf is encoded into again.
func (s *scheduler[T, O]) buildRecord(rec *sink.Record, buf *recordBuf, ep *harness.Episode[T], start time.Time, status sink.Status, kind sink.ErrorKind, errMsg string, v *judge.Verdict, out *O, earlier harness.Usage) {
	u := ep.Usage().Add(earlier)
	buf.b = buf.b[:0]
	input := encodeValue(buf, &ep.Sample.Input, s.inputByPointer)
	*rec = sink.Record{
		Schema: sink.SchemaVersion, RunID: s.runID, Eval: s.e.Name,
		SampleID: ep.Sample.ID, Epoch: ep.Epoch, Attempt: ep.Attempt,
		Status: status, Score: v.Score, Scores: v.Scores, Weight: v.Weight, Reason: v.Reason,
		Error: errMsg, ErrorKind: kind,
		Input: input,
		Tags:  ep.Sample.Tags, StartedAt: start.UTC(),
		DurationMS:  float64(time.Since(start).Microseconds()) / 1000,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD,
		Seed: ep.Seed, ParentRunID: s.parentRunID,
	}
	if out != nil {
		rec.Output = encodeValue(buf, out, s.outputByPointer)
	}
	if status != sink.Pass && status != sink.Fail {
		rec.Score = 0
	}
}

// recordBuf holds the encoded input and output of a record: one buffer
// reused from record to record, so that encoding them allocates nothing
// in the common cases. A job owns one; a finished episode takes b over
// (settle), so that its record's bytes stay put until the recorder is done.
type recordBuf struct {
	b   []byte
	tmp *bytes.Buffer // scratch for enc (a pointer: a recordBuf may be copied)
	enc *json.Encoder // writes to tmp
}

// encodeValue appends the encoding of *v to buf, exactly as encodeJSON(*v)
// encodes it, and returns it (nil where encodeJSON returns nil), without
// allocating in the common cases: strings and raw JSON are appended
// directly, other values encoded by a json.Encoder reused from call to
// call. byPointer (see marshalsByPointer) says whether v may be encoded in
// place of *v, which spares boxing a copy of *v into an interface.
func encodeValue[V any](buf *recordBuf, v *V, byPointer bool) json.RawMessage {
	switch x := any(v).(type) {
	case *string:
		return buf.keep(sink.AppendString(buf.b, *x))
	case *json.RawMessage:
		if json.Valid(*x) {
			return buf.keep(append(buf.b, *x...))
		}
		return buf.encodeAny(*x)
	case *any:
		return buf.encodeAny(*x)
	}
	if !byPointer {
		return buf.encodeAny(*v)
	}
	if !buf.marshal(v) {
		return buf.keep(append(buf.b, encodeJSON(*v)...)) // its error message
	}
	return buf.keepEncoded()
}

// encodeAny is encodeValue for a value in an interface.
func (buf *recordBuf) encodeAny(v any) json.RawMessage {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return buf.keep(sink.AppendString(buf.b, x))
	case json.RawMessage:
		if json.Valid(x) {
			return buf.keep(append(buf.b, x...))
		}
	}
	if !buf.marshal(v) {
		return buf.keep(append(buf.b, encodeJSON(v)...)) // its error message
	}
	return buf.keepEncoded()
}

// marshal encodes v into buf.tmp as json.Marshal would, reporting whether
// it could.
func (buf *recordBuf) marshal(v any) bool {
	if buf.enc == nil || buf.tmp.Cap() > 64<<10 { // a huge value's buffer is not worth keeping
		buf.tmp = new(bytes.Buffer)
		buf.enc = json.NewEncoder(buf.tmp)
	}
	buf.tmp.Reset()
	return buf.enc.Encode(v) == nil
}

// keepEncoded appends what marshal encoded (without the Encoder's newline).
func (buf *recordBuf) keepEncoded() json.RawMessage {
	return buf.keep(append(buf.b, bytes.TrimSuffix(buf.tmp.Bytes(), []byte("\n"))...))
}

// marshalsByPointer reports whether encoding/json encodes a *T exactly as
// it encodes a T. It does unless T, or a struct field or array element
// held in it by value, has MarshalJSON or MarshalText on its pointer
// only: encoding/json calls those only on values it can address, which
// the T in an interface is not, and a *T's element is.
func marshalsByPointer[T any]() bool {
	t := reflect.TypeFor[T]()
	return t.Kind() != reflect.Interface && !addressSensitive(t)
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func addressSensitive(t reflect.Type) bool {
	if t.Kind() != reflect.Pointer {
		p := reflect.PointerTo(t)
		for _, m := range []reflect.Type{jsonMarshaler, textMarshaler} {
			if p.Implements(m) && !t.Implements(m) {
				return true
			}
		}
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if addressSensitive(t.Field(i).Type) {
				return true
			}
		}
	case reflect.Array:
		return addressSensitive(t.Elem())
	}
	return false
}

// keep makes b, the buffer grown by one encoding, the buffer, and returns
// that encoding: what b holds beyond the previous length, capped so that
// appending to it cannot run into the next encoding.
func (buf *recordBuf) keep(b []byte) json.RawMessage {
	start := len(buf.b)
	buf.b = b
	return b[start:len(b):len(b)]
}

// encodeJSON encodes v for a record, with a fast path for the common
// string case. A value encoding/json rejects is kept as its error message.
func encodeJSON(v any) json.RawMessage {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return sink.AppendString(nil, x)
	case json.RawMessage:
		if json.Valid(x) {
			return x
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return sink.AppendString(nil, "unencodable: "+err.Error())
	}
	return b
}

// inputEncoder encodes inputs as encodeJSON does, into one buffer reused
// from call to call: hashing a million inputs allocates nothing per input.
type inputEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
	str []byte
}

// encode returns the encoding of v, valid until the next call.
func (e *inputEncoder) encode(v any) []byte {
	switch x := v.(type) {
	case nil, json.RawMessage:
		return encodeJSON(v)
	case string:
		e.str = sink.AppendString(e.str[:0], x)
		return e.str
	}
	if e.enc == nil {
		e.enc = json.NewEncoder(&e.buf)
	}
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return encodeJSON(v) // its error message, as a record would hold it
	}
	return bytes.TrimSuffix(e.buf.Bytes(), []byte("\n"))
}

// episodeSeed derives an episode's seed from the run seed, the sample ID
// and the epoch (FNV-1a, then a SplitMix64 finaliser), so that it depends on
// nothing else: not on order, concurrency or resume.
func episodeSeed(run uint64, sampleID string, epoch int) uint64 {
	x := fnv1a(sampleID) ^ run*0x9e3779b97f4a7c15 ^ uint64(epoch)*0xbf58476d1ce4e5b9
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// fnv1a is FNV-1a 64 of s, as hash/fnv computes it, without allocating.
func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
