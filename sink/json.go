package sink

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends r's JSON form (one object, no newline) to b. It writes
// the same document encoding/json would (fields in declaration order, map
// keys sorted) without reflection: the log is on every episode's hot path.
// Non-finite floats, which JSON cannot carry, are written as null.
func (r *Record) AppendJSON(b []byte) []byte {
	b = append(b, `{"schema":`...)
	b = strconv.AppendInt(b, int64(r.Schema), 10)
	b = appendStringField(b, "run_id", r.RunID)
	b = appendStringField(b, "eval", r.Eval)
	b = appendStringField(b, "sample_id", r.SampleID)
	b = append(b, `,"epoch":`...)
	b = strconv.AppendInt(b, int64(r.Epoch), 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	b = appendStringField(b, "status", string(r.Status))
	b = append(b, `,"score":`...)
	b = appendFloat(b, r.Score)
	if len(r.Scores) > 0 {
		b = append(b, `,"scores":{`...)
		for i, k := range sortedKeys(r.Scores) {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, k)
			b = append(b, ':')
			b = appendFloat(b, r.Scores[k])
		}
		b = append(b, '}')
	}
	if r.Weight != 0 {
		b = append(b, `,"weight":`...)
		b = appendFloat(b, r.Weight)
	}
	b = appendOptString(b, "reason", r.Reason)
	b = appendOptString(b, "error", r.Error)
	b = appendOptString(b, "error_kind", string(r.ErrorKind))
	b = appendRaw(b, "input", r.Input)
	b = appendRaw(b, "output", r.Output)
	if len(r.Tags) > 0 {
		b = append(b, `,"tags":{`...)
		for i, k := range sortedKeys(r.Tags) {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, k)
			b = append(b, ':')
			b = AppendString(b, r.Tags[k])
		}
		b = append(b, '}')
	}
	b = append(b, `,"started_at":"`...)
	b = r.StartedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","duration_ms":`...)
	b = appendFloat(b, r.DurationMS)
	b = append(b, `,"input_tokens":`...)
	b = strconv.AppendInt(b, r.InputTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, r.OutputTokens, 10)
	b = append(b, `,"cost_usd":`...)
	b = appendFloat(b, r.CostUSD)
	b = append(b, `,"seed":`...)
	b = strconv.AppendUint(b, r.Seed, 10)
	b = appendOptString(b, "trace", r.Trace)
	b = appendOptString(b, "parent_run_id", r.ParentRunID)
	b = appendOptString(b, "reused_from", r.ReusedFrom)
	b = appendOptString(b, "worker", r.Worker)
	b = appendOptString(b, "trace_id", r.TraceID)
	b = appendOptString(b, "span_id", r.SpanID)
	return append(b, '}')
}

// MarshalJSON implements json.Marshaler with AppendJSON.
func (r Record) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func appendStringField(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return AppendString(b, v)
}

func appendOptString(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return appendStringField(b, name, v)
}

func appendRaw(b []byte, name string, v json.RawMessage) []byte {
	if len(v) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return AppendRawJSON(b, v)
}

// AppendRawJSON appends the JSON value v as encoding/json writes a
// json.RawMessage: compacted (so that a record stays on one line) and with
// <, >, & and U+2028/2029 escaped. A value that is not valid JSON cannot be
// written as it is; it is written as a JSON string holding its text, so the
// record stays readable.
func AppendRawJSON(b []byte, v []byte) []byte {
	if len(v) == 0 {
		return b // the absent value: appendRaw leaves the field out
	}
	if end, ok := scanValue(v, 0, maxRawDepth); ok && end == len(v) && rawIsClean(v) {
		return append(b, v...)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return AppendString(b, string(v))
	}
	var out bytes.Buffer
	json.HTMLEscape(&out, buf.Bytes())
	return append(b, out.Bytes()...)
}

// rawIsClean reports whether v, valid JSON, needs neither compacting nor
// escaping: no white space outside strings and nothing encoding/json would
// escape.
func rawIsClean(v []byte) bool {
	inString, escaped := false, false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			return false
		case c == 0xE2 && i+2 < len(v) && v[i+1] == 0x80 && (v[i+2] == 0xA8 || v[i+2] == 0xA9):
			return false // U+2028, U+2029
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return true
}

func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	// encoding/json's format: 'f' for ordinary magnitudes, 'e' beyond.
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// As encoding/json: e-07 becomes e-7.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped as encoding/json does
// (including <, > and & and invalid UTF-8 replaced by U+FFFD).
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
