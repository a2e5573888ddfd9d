package sink

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// The record codec. AppendJSON writes one canonical form; UnmarshalJSON
// reads that form with a strict hand-written decoder and hands any other
// document to encoding/json. There is no third parser: the log's resume
// scan, ScanLine, is the strict decoder stopped short of building values.
//
// The strict decoder accepts only what it can decode exactly as
// encoding/json would: the fields in AppendJSON's order (optional ones may
// be absent), no white space, strings of valid UTF-8 whose escapes are not
// surrogates, numbers that fit their fields. Anything else (another key
// order, pretty-printing, unknown or duplicate keys, null where AppendJSON
// never writes it) is not an error there, only a reason to fall back.

// reflectRecord is Record without its methods: encoding/json decodes it by
// reflection, the fallback for documents not in the canonical form.
type reflectRecord Record

// UnmarshalJSON implements json.Unmarshaler. The result, and the error, are
// those of encoding/json decoding into the same struct without this method:
// fields absent from b keep their values and maps already in r are added
// to. The canonical form (what AppendJSON writes) is decoded without
// reflection; any other JSON goes through encoding/json.
func (r *Record) UnmarshalJSON(b []byte) error {
	return DecodeLine(b, r, nil)
}

// DecodeOptions leave out of a decoded record the fields a caller does not
// need, which are then neither copied nor built. The zero value decodes
// every field.
type DecodeOptions struct {
	// NoRaw leaves r.Input and r.Output as they were: a fold over a log
	// that never shows them saves a copy of them per record.
	NoRaw bool
	// NoMaps leaves r.Scores and r.Tags as they were (neither replaced
	// nor added to): a caller that needs a sample's tags once, not once
	// per record, decodes them apart.
	NoMaps bool
}

// DecodeLine decodes a record line into r as r.UnmarshalJSON(line) does,
// but for the fields opts leaves out. It validates the line all the same,
// every field included: it accepts and rejects exactly what UnmarshalJSON
// does, with the same error, so a line is committed or not whoever reads
// it. A nil opts decodes every field.
func DecodeLine(line []byte, r *Record, opts *DecodeOptions) error {
	var o DecodeOptions
	if opts != nil {
		o = *opts
	}
	var l canonLine
	if l.scan(line) {
		l.decode(line, r, o)
		return nil
	}
	// encoding/json would overwrite the fields left out (and reuse the
	// RawMessages' memory, add to the maps): it decodes them into nothing,
	// and r gets back its own.
	in, out, scores, tags := r.Input, r.Output, r.Scores, r.Tags
	if o.NoRaw {
		r.Input, r.Output = nil, nil
	}
	if o.NoMaps {
		r.Scores, r.Tags = nil, nil
	}
	err := json.Unmarshal(line, (*reflectRecord)(r))
	if o.NoRaw {
		r.Input, r.Output = in, out
	}
	if o.NoMaps {
		r.Scores, r.Tags = scores, tags
	}
	return err
}

// LineKey holds the fields of a record line that resuming a run needs:
// which episode it records and how that ended.
type LineKey struct {
	Schema   int
	RunID    []byte // aliases the line unless it held escapes
	SampleID []byte // aliases the line unless it held escapes
	Epoch    int
	Status   Status
}

// ScanLine reports whether UnmarshalJSON accepts line, with the error it
// would return, and returns the key fields of the record it would decode
// (into a zero Record). On the canonical form it validates every field
// but builds only the key ones, without allocating: a log of a million
// records is scanned in a fraction of the time decoding it takes.
func ScanLine(line []byte) (LineKey, error) {
	var l canonLine
	if l.scan(line) {
		return LineKey{
			Schema:   l.ints[fSchema],
			RunID:    l.bytes(line, fRunID),
			SampleID: l.bytes(line, fSampleID),
			Epoch:    l.ints[fEpoch],
			Status:   Status(l.constOr(line, fStatus, statuses[:], nil)),
		}, nil
	}
	var r Record
	if err := json.Unmarshal(line, (*reflectRecord)(&r)); err != nil {
		return LineKey{}, err
	}
	return LineKey{r.Schema, []byte(r.RunID), []byte(r.SampleID), r.Epoch, r.Status}, nil
}

// The fields, in AppendJSON's order.
const (
	fSchema = iota
	fRunID
	fEval
	fSampleID
	fEpoch
	fAttempt
	fStatus
	fScore
	fScores
	fWeight
	fReason
	fError
	fErrorKind
	fInput
	fOutput
	fTags
	fStartedAt
	fDurationMS
	fInputTokens
	fOutputTokens
	fCostUSD
	fSeed
	fTranscript
	fParentRunID
	fReusedFrom
	fWorker
	fTraceID
	fSpanID
	nFields
)

// canonLine keeps a bit per field in a uint32: this fails to compile when
// the record outgrows it.
const _ = uint32(1 << (nFields - 1))

type kind uint8

const (
	kInt kind = iota
	kUint
	kFloat
	kString
	kRaw
	kScores
	kTags
	kTime
)

var fields = [nFields]struct {
	key      string // with the comma before it, as AppendJSON writes it
	kind     kind
	optional bool // omitempty: AppendJSON may leave it out
}{
	fSchema:       {`"schema":`, kInt, false},
	fRunID:        {`,"run_id":`, kString, false},
	fEval:         {`,"eval":`, kString, false},
	fSampleID:     {`,"sample_id":`, kString, false},
	fEpoch:        {`,"epoch":`, kInt, false},
	fAttempt:      {`,"attempt":`, kInt, false},
	fStatus:       {`,"status":`, kString, false},
	fScore:        {`,"score":`, kFloat, false},
	fScores:       {`,"scores":`, kScores, true},
	fWeight:       {`,"weight":`, kFloat, true},
	fReason:       {`,"reason":`, kString, true},
	fError:        {`,"error":`, kString, true},
	fErrorKind:    {`,"error_kind":`, kString, true},
	fInput:        {`,"input":`, kRaw, true},
	fOutput:       {`,"output":`, kRaw, true},
	fTags:         {`,"tags":`, kTags, true},
	fStartedAt:    {`,"started_at":`, kTime, false},
	fDurationMS:   {`,"duration_ms":`, kFloat, false},
	fInputTokens:  {`,"input_tokens":`, kInt, false},
	fOutputTokens: {`,"output_tokens":`, kInt, false},
	fCostUSD:      {`,"cost_usd":`, kFloat, false},
	fSeed:         {`,"seed":`, kUint, false},
	fTranscript:   {`,"trace":`, kString, true},
	fParentRunID:  {`,"parent_run_id":`, kString, true},
	fReusedFrom:   {`,"reused_from":`, kString, true},
	fWorker:       {`,"worker":`, kString, true},
	fTraceID:      {`,"trace_id":`, kString, true},
	fSpanID:       {`,"span_id":`, kString, true},
}

// maxRawDepth bounds the nesting of input and output the strict decoder
// follows; deeper documents go to encoding/json, which allows 10,000.
const maxRawDepth = 512

// canonLine is a canonical record line, validated: where each field's
// value is and the numbers and time, parsed.
type canonLine struct {
	has   uint32 // fields present
	null  uint32 // float fields written as null (non-finite values)
	esc   uint32 // string fields holding escapes
	spans [nFields][2]int
	ints  [nFields]int // int fields; for maps, their number of members
	i64   [nFields]int64
	seed  uint64
	flts  [nFields]float64
	time  time.Time
}

// scan validates b as the canonical form and fills l; false means "not
// canonical", not "invalid": the caller falls back to encoding/json.
func (l *canonLine) scan(b []byte) bool {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	i := 1
	for f := range nFields {
		d := &fields[f]
		if len(b)-i < len(d.key) || string(b[i:i+len(d.key)]) != d.key {
			if d.optional {
				continue
			}
			return false
		}
		i += len(d.key)
		start := i
		var ok bool
		switch d.kind {
		case kInt:
			var n int64
			i, n, ok = scanInt(b, i)
			if f == fInputTokens || f == fOutputTokens {
				l.i64[f] = n
			} else {
				l.ints[f] = int(n)
				ok = ok && int64(int(n)) == n
			}
		case kUint:
			i, l.seed, ok = scanUint(b, i)
		case kFloat:
			if hasLit(b, i, "null") {
				l.null |= 1 << f
				i, ok = i+4, true
				break
			}
			i, l.flts[f], ok = scanFloat(b, i)
		case kString, kTime:
			var esc bool
			i, esc, ok = scanString(b, i, false)
			start++ // the content, without its quotes
			if esc {
				l.esc |= 1 << f
			}
			if ok && d.kind == kTime {
				ok = !esc && l.time.UnmarshalJSON(b[start-1:i]) == nil
			}
			if !ok {
				return false
			}
			l.spans[f] = [2]int{start, i - 1}
			l.has |= 1 << f
			continue
		case kRaw:
			i, ok = scanValue(b, i, maxRawDepth, false)
		case kScores, kTags:
			i, l.ints[f], ok = scanMap(b, i, d.kind == kTags)
		}
		if !ok {
			return false
		}
		l.spans[f] = [2]int{start, i}
		l.has |= 1 << f
	}
	return i == len(b)-1
}

func hasLit(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// decode sets r's fields from the validated line b, as encoding/json would,
// but those o leaves out.
func (l *canonLine) decode(b []byte, r *Record, o DecodeOptions) {
	// One allocation for the short strings (IDs, kinds, links, worker,
	// trace and span IDs, map keys and tag values); the sample ID, which
	// indexes keep, has its own, and so have reason and error, which may
	// be long.
	var short strings.Builder
	n := 0
	for _, f := range [...]int{fRunID, fEval, fStatus, fErrorKind, fTranscript, fParentRunID, fReusedFrom, fWorker, fTraceID, fSpanID} {
		n += l.spans[f][1] - l.spans[f][0]
	}
	if !o.NoMaps {
		n += l.spans[fScores][1] - l.spans[fScores][0] + l.spans[fTags][1] - l.spans[fTags][0]
	}
	short.Grow(n)

	r.Schema = l.ints[fSchema]
	r.RunID = l.str(b, fRunID, &short)
	r.Eval = l.str(b, fEval, &short)
	r.SampleID = l.str(b, fSampleID, nil)
	r.Epoch = l.ints[fEpoch]
	r.Attempt = l.ints[fAttempt]
	r.Status = Status(l.constOr(b, fStatus, statuses[:], &short))
	l.float(fScore, &r.Score)
	if l.has&(1<<fScores) != 0 && !o.NoMaps {
		if r.Scores == nil {
			r.Scores = make(map[string]float64, l.ints[fScores])
		}
		l.eachMember(b, fScores, &short, func(k string, v []byte) {
			f := 0.0
			if v[0] != 'n' {
				f, _ = strconv.ParseFloat(string(v), 64)
			}
			r.Scores[k] = f
		})
	}
	l.float(fWeight, &r.Weight)
	l.optStr(b, fReason, &r.Reason, nil)
	l.optStr(b, fError, &r.Error, nil)
	if l.has&(1<<fErrorKind) != 0 {
		r.ErrorKind = ErrorKind(l.constOr(b, fErrorKind, kinds[:], &short))
	}
	if in, out := l.has&(1<<fInput) != 0, l.has&(1<<fOutput) != 0; (in || out) && !o.NoRaw {
		ni, no := l.spans[fInput][1]-l.spans[fInput][0], l.spans[fOutput][1]-l.spans[fOutput][0]
		buf := make([]byte, 0, ni+no)
		if in {
			buf = append(buf, b[l.spans[fInput][0]:l.spans[fInput][1]]...)
			r.Input = buf[:ni:ni]
		}
		if out {
			buf = append(buf, b[l.spans[fOutput][0]:l.spans[fOutput][1]]...)
			r.Output = buf[len(buf)-no:]
		}
	}
	if l.has&(1<<fTags) != 0 && !o.NoMaps {
		if r.Tags == nil {
			r.Tags = make(map[string]string, l.ints[fTags])
		}
		l.eachMember(b, fTags, &short, func(k string, v []byte) {
			r.Tags[k] = addString(&short, v[1:len(v)-1])
		})
	}
	r.StartedAt = l.time
	l.float(fDurationMS, &r.DurationMS)
	r.InputTokens = l.i64[fInputTokens]
	r.OutputTokens = l.i64[fOutputTokens]
	l.float(fCostUSD, &r.CostUSD)
	r.Seed = l.seed
	l.optStr(b, fTranscript, &r.Transcript, &short)
	l.optStr(b, fParentRunID, &r.ParentRunID, &short)
	l.optStr(b, fReusedFrom, &r.ReusedFrom, &short)
	l.optStr(b, fWorker, &r.Worker, &short)
	l.optStr(b, fTraceID, &r.TraceID, &short)
	l.optStr(b, fSpanID, &r.SpanID, &short)
}

var (
	statuses = [...]string{string(Pass), string(Fail), string(Error), string(Unscored)}
	kinds    = [...]string{string(KindTimeout), string(KindPanic), string(KindSandbox), string(KindHarness),
		string(KindJudge), string(KindCancelled), string(KindNotSampled)}
)

// constOr returns string field f as one of consts when it is one, without
// allocating, else in buf.
func (l *canonLine) constOr(b []byte, f int, consts []string, buf *strings.Builder) string {
	if l.esc&(1<<f) == 0 {
		s := b[l.spans[f][0]:l.spans[f][1]]
		for _, c := range consts {
			if string(s) == c {
				return c
			}
		}
	}
	return l.str(b, f, buf)
}

// float sets *p unless the field is absent or null (which encoding/json
// skips).
func (l *canonLine) float(f int, p *float64) {
	if l.has&(1<<f) != 0 && l.null&(1<<f) == 0 {
		*p = l.flts[f]
	}
}

// bytes returns the content of string field f: the line's own bytes, or
// a copy unescaped.
func (l *canonLine) bytes(b []byte, f int) []byte {
	s := b[l.spans[f][0]:l.spans[f][1]]
	if l.esc&(1<<f) != 0 {
		return unescape(nil, s)
	}
	return s
}

// str returns the content of string field f, in buf when it is not nil.
func (l *canonLine) str(b []byte, f int, buf *strings.Builder) string {
	s := b[l.spans[f][0]:l.spans[f][1]]
	if buf != nil {
		return addString(buf, s)
	}
	if l.esc&(1<<f) != 0 {
		return string(unescape(nil, s))
	}
	return string(s)
}

// optStr sets *dst to field f's string when the line has the field.
func (l *canonLine) optStr(b []byte, f int, dst *string, buf *strings.Builder) {
	if l.has&(1<<f) != 0 {
		*dst = l.str(b, f, buf)
	}
}

// addString appends the content of a validated string to buf and returns
// it: a slice of buf's memory, which Grow sized for every short string.
func addString(buf *strings.Builder, s []byte) string {
	start := buf.Len()
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\\' {
			i++
		}
		buf.Write(s[:i])
		if i == len(s) {
			break
		}
		r, n := unescapeOne(s[i:])
		buf.WriteRune(r)
		s = s[i+n:]
	}
	return buf.String()[start:]
}

// unescape appends the content of a validated string to dst.
func unescape(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			dst = append(dst, s[i])
			i++
			continue
		}
		r, n := unescapeOne(s[i:])
		dst = utf8.AppendRune(dst, r)
		i += n
	}
	return dst
}

// unescapeOne decodes the escape at the start of s, validated by
// scanString (so not a surrogate).
func unescapeOne(s []byte) (rune, int) {
	switch s[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, _ := hex4(s[2:6])
		return r, 6
	}
	return rune(s[1]), 2 // " \ /
}

// eachMember calls fn with each key and raw value of the validated object
// of field f.
func (l *canonLine) eachMember(b []byte, f int, buf *strings.Builder, fn func(k string, v []byte)) {
	i, end := l.spans[f][0]+1, l.spans[f][1]-1
	for i < end {
		j, _, _ := scanString(b, i, false)
		k := addString(buf, b[i+1:j-1])
		i = j + 1 // ':'
		s := i
		if b[i] == '"' {
			i, _, _ = scanString(b, i, false)
		} else {
			for i < end && b[i] != ',' {
				i++
			}
		}
		fn(k, b[s:i])
		i++ // ','
	}
}

// scanMap validates an object of string keys and, for tags, string
// values, else numbers or null (a non-finite score).
func scanMap(b []byte, i int, tags bool) (end, n int, ok bool) {
	if i >= len(b) || b[i] != '{' {
		return i, 0, false
	}
	i++
	if i < len(b) && b[i] == '}' {
		return i + 1, 0, true
	}
	for n = 1; ; n++ {
		if i, _, ok = scanString(b, i, false); !ok || i >= len(b) || b[i] != ':' {
			return i, n, false
		}
		i++
		switch {
		case tags:
			i, _, ok = scanString(b, i, false)
		case hasLit(b, i, "null"):
			i, ok = i+4, true
		default:
			i, _, ok = scanFloat(b, i)
		}
		if !ok || i >= len(b) {
			return i, n, false
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return i + 1, n, true
		default:
			return i, n, false
		}
	}
}

// hasSpecialByte reports whether one of x's bytes may need a closer look
// in a string: a quote, a backslash, a control character or non-ASCII.
func hasSpecialByte(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return ((x-ones*0x20)|(q-ones)|(bs-ones)|x)&highs != 0
}

// scanString validates the JSON string at b[i] and returns the index after
// its closing quote, and whether it holds escapes. Strict (a field's
// value) means valid UTF-8 and no surrogate escapes, which the strict
// decoder does not decode; raw (inside input or output, kept as bytes)
// accepts what encoding/json's scanner accepts.
func scanString(b []byte, i int, raw bool) (end int, esc, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false, false
	}
	i++
	start, ascii := i, true
	for i < len(b) {
		for i+8 <= len(b) && !hasSpecialByte(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			if !raw && !ascii && !utf8.Valid(b[start:i]) {
				return i, esc, false
			}
			return i + 1, esc, true
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return i, esc, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return i, esc, false
				}
				r, ok := hex4(b[i+2 : i+6])
				if !ok || !raw && utf16.IsSurrogate(r) {
					return i, esc, false
				}
				i += 6
			default:
				return i, esc, false
			}
		case c < 0x20:
			return i, esc, false
		case c >= utf8.RuneSelf:
			ascii = false
			i++
		default:
			i++
		}
	}
	return i, esc, false
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// scanNumber validates the JSON number at b[i] and returns its end and
// whether it has a fraction or an exponent.
func scanNumber(b []byte, i int) (end int, frac, ok bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
	default:
		return i, false, false
	}
	if i < len(b) && b[i] == '.' {
		frac = true
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, frac, false
		}
		for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		frac = true
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, frac, false
		}
		for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
	}
	return i, frac, true
}

// scanInt reads an integer as encoding/json does into an int64 field.
func scanInt(b []byte, i int) (int, int64, bool) {
	end, frac, ok := scanNumber(b, i)
	if !ok || frac {
		return end, 0, false
	}
	n, err := strconv.ParseInt(string(b[i:end]), 10, 64)
	return end, n, err == nil
}

// scanUint reads an integer as encoding/json does into a uint64 field.
func scanUint(b []byte, i int) (int, uint64, bool) {
	end, frac, ok := scanNumber(b, i)
	if !ok || frac || b[i] == '-' {
		return end, 0, false
	}
	n, err := strconv.ParseUint(string(b[i:end]), 10, 64)
	return end, n, err == nil
}

// scanFloat reads a number as encoding/json does into a float64 field.
func scanFloat(b []byte, i int) (int, float64, bool) {
	end, _, ok := scanNumber(b, i)
	if !ok {
		return end, 0, false
	}
	f, err := strconv.ParseFloat(string(b[i:end]), 64)
	return end, f, err == nil
}

// scanValue validates the compact JSON value at b[i] (input or output)
// and returns its end. With clean, it also fails on what HTMLEscape would
// change, so that one pass tells the encoder whether a value is written as
// it is: outside strings, valid compact JSON has no white space nor any
// byte HTMLEscape changes, so only strings need the extra checks.
func scanValue(b []byte, i, depth int, clean bool) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	var ok bool
	switch b[i] {
	case '"':
		if clean {
			return scanCleanString(b, i)
		}
		i, _, ok = scanString(b, i, true)
		return i, ok
	case 't':
		return i + 4, hasLit(b, i, "true")
	case 'f':
		return i + 5, hasLit(b, i, "false")
	case 'n':
		return i + 4, hasLit(b, i, "null")
	case '{', '[':
		if depth == 0 {
			return i, false
		}
		obj := b[i] == '{'
		closing := byte(']')
		if obj {
			closing = '}'
		}
		i++
		if i < len(b) && b[i] == closing {
			return i + 1, true
		}
		for {
			if obj {
				if clean {
					i, ok = scanCleanString(b, i) // keys are escaped as values are
				} else {
					i, _, ok = scanString(b, i, true)
				}
				if !ok || i >= len(b) || b[i] != ':' {
					return i, false
				}
				i++
			}
			if i, ok = scanValue(b, i, depth-1, clean); !ok || i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i++
			case closing:
				return i + 1, true
			default:
				return i, false
			}
		}
	}
	i, _, ok = scanNumber(b, i)
	return i, ok
}
