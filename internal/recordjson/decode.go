// Package recordjson decodes record lines and reads logs: the log's
// reader and its resume scan call it, and its Fold is the one reader of a
// report, which `proctor report` and the viewer share. sink.Record.AppendJSON writes one
// canonical form; DecodeLine reads that form with a strict hand-written
// decoder and hands any other document to encoding/json. There is no
// third parser: the log's resume scan, ScanLine, is the strict decoder
// stopped short of building values.
//
// The strict decoder accepts only what it can decode exactly as
// encoding/json would: the fields in AppendJSON's order (optional ones may
// be absent), no white space, strings of valid UTF-8 whose escapes are not
// surrogates, numbers that fit their fields. Anything else (another key
// order, pretty-printing, unknown or duplicate keys, null where AppendJSON
// never writes it) is not an error there, only a reason to fall back.
package recordjson

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/proctor-evals/proctor/internal/jsontext"
	"github.com/proctor-evals/proctor/sink"
)

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
	// Alias makes the record's string fields (not the maps' keys and
	// values) share line's memory when they hold no escapes, instead of
	// copying them: a fold that keeps few of them allocates nothing per
	// record. They are valid only as long as line is unchanged; whoever
	// keeps one copies it (strings.Clone).
	Alias bool
}

// DecodeLine decodes a record line into r as json.Unmarshal(line, r) does,
// but for the fields opts leaves out. It validates the line all the same,
// every field included: it accepts and rejects exactly what json.Unmarshal
// does, with the same error, so a line is committed or not whoever reads
// it. A nil opts decodes every field.
func DecodeLine(line []byte, r *sink.Record, opts *DecodeOptions) error {
	var o DecodeOptions
	if opts != nil {
		o = *opts
	}
	var l canonLine
	if l.scan(line) {
		l.alias = o.Alias
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
	err := json.Unmarshal(line, r)
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
	Schema     int
	RunID      []byte // aliases the line unless it held escapes
	Variant    []byte // aliases the line unless it held escapes
	SampleID   []byte // aliases the line unless it held escapes
	Epoch      int
	Status     sink.Status
	Transcript []byte // the transcript link; aliases the line unless it held escapes
	ErrorKind  sink.ErrorKind
}

// ScanLine reports whether json.Unmarshal accepts line, with the error it
// would return, and returns the key fields of the record it would decode
// (into a zero Record). On the canonical form it validates every field
// but builds only the key ones, without allocating: a log of a million
// records is scanned in a fraction of the time decoding it takes.
func ScanLine(line []byte) (LineKey, error) {
	var l canonLine
	if l.scan(line) {
		k := LineKey{
			Schema:     l.ints[fSchema],
			RunID:      l.bytes(line, fRunID),
			Variant:    l.bytes(line, fVariant),
			SampleID:   l.bytes(line, fSampleID),
			Epoch:      l.ints[fEpoch],
			Status:     sink.Status(l.constOr(line, fStatus, statuses[:], nil)),
			Transcript: l.bytes(line, fTranscript),
		}
		if l.has&(1<<fErrorKind) != 0 {
			k.ErrorKind = sink.ErrorKind(l.constOr(line, fErrorKind, kinds[:], nil))
		}
		return k, nil
	}
	var r sink.Record
	if err := json.Unmarshal(line, &r); err != nil {
		return LineKey{}, err
	}
	return LineKey{r.Schema, []byte(r.RunID), []byte(r.Variant), []byte(r.SampleID), r.Epoch, r.Status, []byte(r.Transcript), r.ErrorKind}, nil
}

// The fields, in AppendJSON's order.
const (
	fSchema = iota
	fRunID
	fEval
	fVariant
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
	fErrorSource
	fJudgeStages
	fInput
	fOutput
	fTags
	fStartedAt
	fDurationMS
	fInputTokens
	fOutputTokens
	fCostUSD
	fJudgeInputTokens
	fJudgeOutputTokens
	fJudgeCostUSD
	fModel
	fJudgeModel
	fSimulatorInputTokens
	fSimulatorOutputTokens
	fSimulatorCostUSD
	fSimulatorModel
	fResources
	fCallsReplayed
	fReplayDivergedAt
	fSeed
	fTranscript
	fParentRunID
	fReusedFrom
	fWorker
	fTraceID
	fSpanID
	nFields
)

// canonLine keeps a bit per field in a uint64: this fails to compile when
// the record outgrows it.
const _ = uint64(1 << (nFields - 1))

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
	fSchema:                {`"schema":`, kInt, false},
	fRunID:                 {`,"run_id":`, kString, false},
	fEval:                  {`,"eval":`, kString, false},
	fVariant:               {`,"variant":`, kString, true},
	fSampleID:              {`,"sample_id":`, kString, false},
	fEpoch:                 {`,"epoch":`, kInt, false},
	fAttempt:               {`,"attempt":`, kInt, false},
	fStatus:                {`,"status":`, kString, false},
	fScore:                 {`,"score":`, kFloat, false},
	fScores:                {`,"scores":`, kScores, true},
	fWeight:                {`,"weight":`, kFloat, true},
	fReason:                {`,"reason":`, kString, true},
	fError:                 {`,"error":`, kString, true},
	fErrorKind:             {`,"error_kind":`, kString, true},
	fErrorSource:           {`,"error_source":`, kString, true},
	fJudgeStages:           {`,"judge_stages":`, kString, true},
	fInput:                 {`,"input":`, kRaw, true},
	fOutput:                {`,"output":`, kRaw, true},
	fTags:                  {`,"tags":`, kTags, true},
	fStartedAt:             {`,"started_at":`, kTime, false},
	fDurationMS:            {`,"duration_ms":`, kFloat, false},
	fInputTokens:           {`,"input_tokens":`, kInt, false},
	fOutputTokens:          {`,"output_tokens":`, kInt, false},
	fCostUSD:               {`,"cost_usd":`, kFloat, false},
	fJudgeInputTokens:      {`,"judge_input_tokens":`, kInt, true},
	fJudgeOutputTokens:     {`,"judge_output_tokens":`, kInt, true},
	fJudgeCostUSD:          {`,"judge_cost_usd":`, kFloat, true},
	fModel:                 {`,"model":`, kString, true},
	fJudgeModel:            {`,"judge_model":`, kString, true},
	fSimulatorInputTokens:  {`,"simulator_input_tokens":`, kInt, true},
	fSimulatorOutputTokens: {`,"simulator_output_tokens":`, kInt, true},
	fSimulatorCostUSD:      {`,"simulator_cost_usd":`, kFloat, true},
	fSimulatorModel:        {`,"simulator_model":`, kString, true},
	fResources:             {`,"resources":`, kString, true},
	fCallsReplayed:         {`,"calls_replayed":`, kInt, true},
	fReplayDivergedAt:      {`,"replay_diverged_at":`, kInt, true},
	fSeed:                  {`,"seed":`, kUint, false},
	fTranscript:            {`,"trace":`, kString, true},
	fParentRunID:           {`,"parent_run_id":`, kString, true},
	fReusedFrom:            {`,"reused_from":`, kString, true},
	fWorker:                {`,"worker":`, kString, true},
	fTraceID:               {`,"trace_id":`, kString, true},
	fSpanID:                {`,"span_id":`, kString, true},
}

// keyHeads holds the first eight bytes of each field's key (every key has
// eight or more), compared as one word: most lines lack most optional
// fields, and that is then seen in one comparison.
var keyHeads = func() (h [nFields]uint64) {
	for f := range fields {
		h[f] = binary.LittleEndian.Uint64([]byte(fields[f].key))
	}
	return h
}()

// canonLine is a canonical record line, validated: where each field's
// value is and the numbers and time, parsed.
type canonLine struct {
	has   uint64 // fields present
	null  uint64 // float fields written as null (non-finite values)
	esc   uint64 // string fields holding escapes
	spans [nFields][2]int
	ints  [nFields]int // int fields; for maps, their number of members
	i64   [nFields]int64
	seed  uint64
	flts  [nFields]float64
	time  time.Time
	alias bool // decode: strings share the line's memory (DecodeOptions.Alias)
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
		if len(b)-i < len(d.key) || binary.LittleEndian.Uint64(b[i:]) != keyHeads[f] || string(b[i+8:i+len(d.key)]) != d.key[8:] {
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
			i, n, ok = jsontext.ScanInt(b, i)
			if f == fInputTokens || f == fOutputTokens || f == fJudgeInputTokens || f == fJudgeOutputTokens ||
				f == fSimulatorInputTokens || f == fSimulatorOutputTokens {
				l.i64[f] = n
			} else {
				l.ints[f] = int(n)
				ok = ok && int64(int(n)) == n
			}
		case kUint:
			i, l.seed, ok = jsontext.ScanUint(b, i)
		case kFloat:
			if jsontext.HasLit(b, i, "null") {
				l.null |= 1 << f
				i, ok = i+4, true
				break
			}
			i, l.flts[f], ok = jsontext.ScanFloat(b, i)
		case kString, kTime:
			var esc bool
			i, esc, ok = jsontext.ScanString(b, i, false)
			start++ // the content, without its quotes
			if esc {
				l.esc |= 1 << f
			}
			if ok && d.kind == kTime {
				ok = !esc && (parseUTC(&l.time, b[start:i-1]) || l.time.UnmarshalJSON(b[start-1:i]) == nil)
			}
			if !ok {
				return false
			}
			l.spans[f] = [2]int{start, i - 1}
			l.has |= 1 << f
			continue
		case kRaw:
			i, ok = jsontext.ScanValue(b, i, jsontext.MaxDepth, false)
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

// decode sets r's fields from the validated line b, as encoding/json would,
// but those o leaves out.
func (l *canonLine) decode(b []byte, r *sink.Record, o DecodeOptions) {
	// One allocation for the short strings (IDs, kinds, links, worker,
	// trace and span IDs, map keys and tag values); the sample ID, which
	// indexes keep, has its own, and so have reason and error, which may
	// be long.
	var short strings.Builder
	n := 0
	if !l.alias {
		for _, f := range [...]int{fRunID, fEval, fVariant, fStatus, fErrorKind, fErrorSource, fJudgeStages, fModel, fJudgeModel, fSimulatorModel, fResources, fTranscript, fParentRunID, fReusedFrom, fWorker, fTraceID, fSpanID} {
			n += l.spans[f][1] - l.spans[f][0]
		}
	}
	if !o.NoMaps {
		n += l.spans[fScores][1] - l.spans[fScores][0] + l.spans[fTags][1] - l.spans[fTags][0]
	}
	short.Grow(n)

	r.Schema = l.ints[fSchema]
	r.RunID = l.str(b, fRunID, &short)
	r.Eval = l.str(b, fEval, &short)
	l.optStr(b, fVariant, &r.Variant, &short)
	r.SampleID = l.str(b, fSampleID, nil)
	r.Epoch = l.ints[fEpoch]
	r.Attempt = l.ints[fAttempt]
	r.Status = sink.Status(l.constOr(b, fStatus, statuses[:], &short))
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
		r.ErrorKind = sink.ErrorKind(l.constOr(b, fErrorKind, kinds[:], &short))
	}
	l.optStr(b, fErrorSource, &r.ErrorSource, &short)
	l.optStr(b, fJudgeStages, &r.JudgeStages, &short)
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
	l.optInt64(fJudgeInputTokens, &r.JudgeInputTokens)
	l.optInt64(fJudgeOutputTokens, &r.JudgeOutputTokens)
	l.float(fJudgeCostUSD, &r.JudgeCostUSD)
	l.optStr(b, fModel, &r.Model, &short)
	l.optStr(b, fJudgeModel, &r.JudgeModel, &short)
	l.optInt64(fSimulatorInputTokens, &r.SimulatorInputTokens)
	l.optInt64(fSimulatorOutputTokens, &r.SimulatorOutputTokens)
	l.float(fSimulatorCostUSD, &r.SimulatorCostUSD)
	l.optStr(b, fSimulatorModel, &r.SimulatorModel, &short)
	l.optStr(b, fResources, &r.Resources, &short)
	if l.has&(1<<fCallsReplayed) != 0 {
		r.CallsReplayed = l.ints[fCallsReplayed]
	}
	if l.has&(1<<fReplayDivergedAt) != 0 {
		r.ReplayDivergedAt = l.ints[fReplayDivergedAt]
	}
	r.Seed = l.seed
	l.optStr(b, fTranscript, &r.Transcript, &short)
	l.optStr(b, fParentRunID, &r.ParentRunID, &short)
	l.optStr(b, fReusedFrom, &r.ReusedFrom, &short)
	l.optStr(b, fWorker, &r.Worker, &short)
	l.optStr(b, fTraceID, &r.TraceID, &short)
	l.optStr(b, fSpanID, &r.SpanID, &short)
}

var (
	statuses = [...]string{string(sink.Pass), string(sink.Fail), string(sink.Error), string(sink.Unscored)}
	kinds    = [...]string{string(sink.KindTimeout), string(sink.KindPanic), string(sink.KindSandbox), string(sink.KindHarness),
		string(sink.KindJudge), string(sink.KindCancelled), string(sink.KindNotSampled), string(sink.KindLimit)}
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

// str returns the content of string field f: b's own bytes when aliasing
// (and it holds no escapes), else in buf when it is not nil.
func (l *canonLine) str(b []byte, f int, buf *strings.Builder) string {
	s := b[l.spans[f][0]:l.spans[f][1]]
	if l.alias && l.esc&(1<<f) == 0 {
		if len(s) == 0 {
			return ""
		}
		return unsafe.String(&s[0], len(s))
	}
	if buf != nil {
		return addString(buf, s)
	}
	if l.esc&(1<<f) != 0 {
		return string(unescape(nil, s))
	}
	return string(s)
}

// optInt64 sets *dst to int field f when the line has the field.
func (l *canonLine) optInt64(f int, dst *int64) {
	if l.has&(1<<f) != 0 {
		*dst = l.i64[f]
	}
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
// jsontext.ScanString (so not a surrogate).
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
		r, _ := jsontext.Hex4(s[2:6])
		return r, 6
	}
	return rune(s[1]), 2 // " \ /
}

// eachMember calls fn with each key and raw value of the validated object
// of field f.
func (l *canonLine) eachMember(b []byte, f int, buf *strings.Builder, fn func(k string, v []byte)) {
	i, end := l.spans[f][0]+1, l.spans[f][1]-1
	for i < end {
		j, _, _ := jsontext.ScanString(b, i, false)
		k := addString(buf, b[i+1:j-1])
		i = j + 1 // ':'
		s := i
		if b[i] == '"' {
			i, _, _ = jsontext.ScanString(b, i, false)
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
		if i, _, ok = jsontext.ScanString(b, i, false); !ok || i >= len(b) || b[i] != ':' {
			return i, n, false
		}
		i++
		switch {
		case tags:
			i, _, ok = jsontext.ScanString(b, i, false)
		case jsontext.HasLit(b, i, "null"):
			i, ok = i+4, true
		default:
			i, _, ok = jsontext.ScanFloat(b, i)
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

// parseUTC reads the form AppendTime writes for a UTC time,
// YYYY-MM-DDTHH:MM:SS[.F]Z with one to nine digits of fraction, as
// time.Time.UnmarshalJSON does (into time.Date); it reports false for
// anything else, which is left to UnmarshalJSON.
func parseUTC(t *time.Time, s []byte) bool {
	if len(s) < 20 || len(s) == 21 || len(s) > 30 || s[len(s)-1] != 'Z' ||
		s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return false
	}
	num := func(i, n int) (v int, ok bool) {
		for _, c := range s[i : i+n] {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return false
	}
	nsec := 0
	if len(s) > 20 {
		n := len(s) - 21 // digits of fraction
		frac, ok := num(20, n)
		if s[19] != '.' || !ok {
			return false
		}
		for range 9 - n {
			frac *= 10
		}
		nsec = frac
	}
	*t = time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	return true
}

// daysIn is the number of days of month in year, as the time package
// counts them (proleptic Gregorian).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
