package sink

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/maphash"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// reflectRecord is Record without its methods: encoding/json decodes it by
// reflection. UnmarshalJSON falls back on it for input it rejects.
type reflectRecord Record

// UnmarshalJSON implements json.Unmarshaler without reflection: resuming a
// run and reading a report decode every line of the log.
//
// It decodes exactly what encoding/json decodes into the same struct without
// this method: any key order and whitespace, unknown keys skipped,
// duplicate keys (last wins; maps merge), null leaving a field as it was (or
// setting a map to nil), case-insensitive key matching as a fallback, every
// string escape, and invalid UTF-8 replaced by U+FFFD. Like encoding/json it
// does not zero r first: fields absent from b keep their values, and maps
// already in r are added to.
//
// Input that is not a JSON object (or null), or whose values do not fit the
// fields, is handed to encoding/json, so the error is the one encoding/json
// returns. When called directly (rather than through json.Unmarshal, which
// validates the whole document first) on invalid JSON, r may be partly
// written when the error is returned.
func (r *Record) UnmarshalJSON(b []byte) error {
	if decodeRecord(b, r) == nil {
		return nil
	}
	return json.Unmarshal(b, (*reflectRecord)(r))
}

// errDecode is decodeRecord's only error: the caller re-decodes with
// encoding/json for the real one.
var errDecode = errors.New("sink: record JSON not decodable without reflection")

// maxJSONDepth is encoding/json's nesting limit (the record's object counts).
const maxJSONDepth = 10000

type recField uint8

const (
	fUnknown recField = iota
	fSchema
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
	fTrace
	fParentRunID
)

// lookupRecField maps an (unescaped) key to its field as encoding/json does:
// exact name first, then case-insensitively by its folding rules.
func lookupRecField(key []byte) recField {
	switch string(key) {
	case "schema":
		return fSchema
	case "run_id":
		return fRunID
	case "eval":
		return fEval
	case "sample_id":
		return fSampleID
	case "epoch":
		return fEpoch
	case "attempt":
		return fAttempt
	case "status":
		return fStatus
	case "score":
		return fScore
	case "scores":
		return fScores
	case "weight":
		return fWeight
	case "reason":
		return fReason
	case "error":
		return fError
	case "error_kind":
		return fErrorKind
	case "input":
		return fInput
	case "output":
		return fOutput
	case "tags":
		return fTags
	case "started_at":
		return fStartedAt
	case "duration_ms":
		return fDurationMS
	case "input_tokens":
		return fInputTokens
	case "output_tokens":
		return fOutputTokens
	case "cost_usd":
		return fCostUSD
	case "seed":
		return fSeed
	case "trace":
		return fTrace
	case "parent_run_id":
		return fParentRunID
	}
	// A key that folds to a field name (at most 13 ASCII bytes) is made of
	// runes that fold to ASCII, none longer than 3 bytes.
	if len(key) > 3*len("parent_run_id") {
		return fUnknown
	}
	var buf [64]byte
	switch string(appendFoldedKey(buf[:0], key)) {
	case "SCHEMA":
		return fSchema
	case "RUN_ID":
		return fRunID
	case "EVAL":
		return fEval
	case "SAMPLE_ID":
		return fSampleID
	case "EPOCH":
		return fEpoch
	case "ATTEMPT":
		return fAttempt
	case "STATUS":
		return fStatus
	case "SCORE":
		return fScore
	case "SCORES":
		return fScores
	case "WEIGHT":
		return fWeight
	case "REASON":
		return fReason
	case "ERROR":
		return fError
	case "ERROR_KIND":
		return fErrorKind
	case "INPUT":
		return fInput
	case "OUTPUT":
		return fOutput
	case "TAGS":
		return fTags
	case "STARTED_AT":
		return fStartedAt
	case "DURATION_MS":
		return fDurationMS
	case "INPUT_TOKENS":
		return fInputTokens
	case "OUTPUT_TOKENS":
		return fOutputTokens
	case "COST_USD":
		return fCostUSD
	case "SEED":
		return fSeed
	case "TRACE":
		return fTrace
	case "PARENT_RUN_ID":
		return fParentRunID
	}
	return fUnknown
}

// appendFoldedKey is encoding/json's appendFoldedName: ASCII letters upper
// cased, other runes replaced by the smallest rune of their fold set.
func appendFoldedKey(out, in []byte) []byte {
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		out = utf8.AppendRune(out, r)
		i += n
	}
	return out
}

// recDecoder is a cursor over one JSON document.
type recDecoder struct {
	b    []byte
	i    int
	strs *internTable // from internPool, on first use
}

// decodeRecord decodes b into r. It fails with errDecode on invalid JSON
// and on values that do not fit their field, leaving r partly written.
func decodeRecord(b []byte, r *Record) error {
	d := recDecoder{b: b}
	defer func() {
		if d.strs != nil {
			internPool.Put(d.strs)
		}
	}()
	d.ws()
	if d.isNull() {
		return d.end() // a no-op, as for encoding/json
	}
	empty, ok := d.openObject()
	if !ok {
		return errDecode
	}
	var kbuf [64]byte
	for more := !empty; more; {
		key, ok := d.memberKey(kbuf[:0])
		if !ok || !d.field(r, lookupRecField(key)) {
			return errDecode
		}
		if more, ok = d.nextMember(); !ok {
			return errDecode
		}
	}
	return d.end()
}

func (d *recDecoder) end() error {
	d.ws()
	if d.i != len(d.b) {
		return errDecode
	}
	return nil
}

func (d *recDecoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *recDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// lit consumes the literal s (true, false or null) at the cursor.
func (d *recDecoder) lit(s string) bool {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// field decodes the value at the cursor into r's field f.
func (d *recDecoder) field(r *Record, f recField) bool {
	switch f {
	case fSchema:
		return d.int(&r.Schema)
	case fRunID:
		return d.internedString(&r.RunID)
	case fEval:
		return d.internedString(&r.Eval)
	case fSampleID:
		return d.string(&r.SampleID)
	case fEpoch:
		return d.int(&r.Epoch)
	case fAttempt:
		return d.int(&r.Attempt)
	case fStatus:
		return d.status(&r.Status)
	case fScore:
		return d.float(&r.Score)
	case fScores:
		return d.scores(&r.Scores)
	case fWeight:
		return d.float(&r.Weight)
	case fReason:
		return d.string(&r.Reason)
	case fError:
		return d.string(&r.Error)
	case fErrorKind:
		return d.errorKind(&r.ErrorKind)
	case fInput:
		return d.raw(&r.Input)
	case fOutput:
		return d.raw(&r.Output)
	case fTags:
		return d.tags(&r.Tags)
	case fStartedAt:
		s := d.i
		if !d.skip(1) {
			return false
		}
		return r.StartedAt.UnmarshalJSON(d.b[s:d.i]) == nil
	case fDurationMS:
		return d.float(&r.DurationMS)
	case fInputTokens:
		return d.int64(&r.InputTokens)
	case fOutputTokens:
		return d.int64(&r.OutputTokens)
	case fCostUSD:
		return d.float(&r.CostUSD)
	case fSeed:
		return d.uint64(&r.Seed)
	case fTrace:
		return d.string(&r.Trace)
	case fParentRunID:
		return d.string(&r.ParentRunID)
	}
	return d.skip(1)
}

// strSpecial marks the bytes that end the fast scan of a string.
var strSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	t['"'] = true
	t['\\'] = true
	return t
}()

// hasSpecialByte reports whether one of x's bytes is special in a string.
func hasSpecialByte(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return ((x-ones*0x20)|(q-ones)|(bs-ones)|x)&highs != 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// str scans the string at the cursor (an opening quote), validating it.
// [s, e) is its content; slow reports escapes or invalid UTF-8, which
// unquoteJSON must handle.
func (d *recDecoder) str() (s, e int, slow, ok bool) {
	b := d.b
	i := d.i + 1
	s = i
	nonASCII := false
	for i < len(b) {
		// Eight plain bytes at a time (none is '"', '\\', a control
		// character or non-ASCII), then byte by byte.
		for i+8 <= len(b) && !hasSpecialByte(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		if !strSpecial[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			d.i = i + 1
			if nonASCII && !slow && !utf8.Valid(b[s:i]) {
				slow = true
			}
			return s, i, slow, true
		case c == '\\':
			slow = true
			if i+1 >= len(b) {
				return
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return
				}
				i += 6
			default:
				return
			}
		case c < 0x20:
			return
		default:
			nonASCII = true
			i++
		}
	}
	return
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unquoteJSON appends the content of a validated JSON string (without its
// quotes) to dst, unescaped as encoding/json does: surrogate pairs joined,
// lone surrogates and invalid UTF-8 bytes replaced by U+FFFD.
func unquoteJSON(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\\':
			switch src[i+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := hex4(src[i+2:])
				i += 6
				if utf16.IsSurrogate(rr) {
					if i+6 <= len(src) && src[i] == '\\' && src[i+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(src[i+2:])); dec != unicode.ReplacementChar {
							i += 6
							dst = utf8.AppendRune(dst, dec)
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // " \ /
				dst = append(dst, src[i+1])
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			rr, n := utf8.DecodeRune(src[i:])
			dst = utf8.AppendRune(dst, rr)
			i += n
		}
	}
	return dst
}

// stringContent scans a string value and returns its unescaped content as
// a byte slice: b's own bytes when there is nothing to unescape, else buf.
func (d *recDecoder) stringContent(buf []byte) ([]byte, bool) {
	s, e, slow, ok := d.str()
	if !ok {
		return nil, false
	}
	if slow {
		return unquoteJSON(buf, d.b[s:e]), true
	}
	return d.b[s:e], true
}

// isNull consumes a null at the cursor.
func (d *recDecoder) isNull() bool {
	return d.peek() == 'n' && d.lit("null")
}

func (d *recDecoder) string(p *string) bool {
	if d.peek() != '"' {
		return d.isNull()
	}
	var buf [128]byte
	v, ok := d.stringContent(buf[:0])
	if ok {
		*p = string(v)
	}
	return ok
}

// internedString is string for the fields whose values repeat from line to
// line (run ID, eval name, tag keys and values, score names): a repeated
// value costs no allocation, and the records share one copy.
func (d *recDecoder) internedString(p *string) bool {
	if d.peek() != '"' {
		return d.isNull()
	}
	var buf [128]byte
	v, ok := d.stringContent(buf[:0])
	if ok {
		*p = d.intern(v)
	}
	return ok
}

// internTable caches short strings by hash, one table per P (sync.Pool).
type internTable [256]string

var (
	internPool = sync.Pool{New: func() any { return new(internTable) }}
	internSeed = maphash.MakeSeed()
)

const maxInterned = 64

func (d *recDecoder) intern(b []byte) string {
	if len(b) > maxInterned {
		return string(b)
	}
	if d.strs == nil {
		d.strs = internPool.Get().(*internTable)
	}
	e := &d.strs[maphash.Bytes(internSeed, b)%uint64(len(d.strs))]
	if *e != string(b) {
		*e = string(b)
	}
	return *e
}

func (d *recDecoder) status(p *Status) bool {
	if d.peek() != '"' {
		return d.isNull()
	}
	var buf [32]byte
	v, ok := d.stringContent(buf[:0])
	if !ok {
		return false
	}
	switch Status(v) {
	case Pass, Fail, Error, Unscored:
		*p = Status(v) // no allocation for the constants
	default:
		*p = Status(string(v))
	}
	return true
}

func (d *recDecoder) errorKind(p *ErrorKind) bool {
	if d.peek() != '"' {
		return d.isNull()
	}
	var buf [32]byte
	v, ok := d.stringContent(buf[:0])
	if !ok {
		return false
	}
	switch k := ErrorKind(v); k {
	case KindTimeout, KindPanic, KindSandbox, KindHarness, KindJudge, KindCancelled:
		*p = k
	default:
		*p = ErrorKind(string(v))
	}
	return true
}

// number scans the number at the cursor, validating JSON's grammar. frac
// reports a fraction or an exponent.
func (d *recDecoder) number() (num []byte, frac, ok bool) {
	b := d.b
	s, i := d.i, d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return nil, false, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i++
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return nil, false, false
	}
	if i < len(b) && b[i] == '.' {
		frac = true
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil, false, false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		frac = true
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil, false, false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	d.i = i
	return b[s:i], frac, true
}

// parseInt parses a JSON number as encoding/json does into a signed field
// of the given size: integers only, in range.
func parseInt(num []byte, frac bool, bits int) (int64, bool) {
	if frac {
		return 0, false
	}
	digits := num
	if num[0] == '-' {
		digits = num[1:]
	}
	if len(digits) > 18 || bits < 64 {
		n, err := strconv.ParseInt(string(num), 10, bits)
		return n, err == nil
	}
	var n int64
	for _, c := range digits {
		n = n*10 + int64(c-'0')
	}
	if num[0] == '-' {
		n = -n
	}
	return n, true
}

func (d *recDecoder) int(p *int) bool {
	if d.isNull() {
		return true
	}
	num, frac, ok := d.number()
	if !ok {
		return false
	}
	n, ok := parseInt(num, frac, strconv.IntSize)
	if ok {
		*p = int(n)
	}
	return ok
}

func (d *recDecoder) int64(p *int64) bool {
	if d.isNull() {
		return true
	}
	num, frac, ok := d.number()
	if !ok {
		return false
	}
	n, ok := parseInt(num, frac, 64)
	if ok {
		*p = n
	}
	return ok
}

func (d *recDecoder) uint64(p *uint64) bool {
	if d.isNull() {
		return true
	}
	num, frac, ok := d.number()
	if !ok || frac || num[0] == '-' {
		return false
	}
	if len(num) > 19 {
		n, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return false
		}
		*p = n
		return true
	}
	var n uint64
	for _, c := range num {
		n = n*10 + uint64(c-'0')
	}
	*p = n
	return true
}

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// floatValue parses the number at the cursor as strconv.ParseFloat does.
func (d *recDecoder) floatValue() (float64, bool) {
	num, _, ok := d.number()
	if !ok {
		return 0, false
	}
	// Fast path (Clinger's): at most 15 digits and no exponent. The
	// mantissa and the power of ten are exact float64s, so one division,
	// correctly rounded, gives the correctly rounded value, as ParseFloat.
	digits := num
	if num[0] == '-' {
		digits = num[1:]
	}
	var mant uint64
	nd, nfrac := 0, -1
	for _, c := range digits {
		switch {
		case c == '.':
			nfrac = 0
			continue
		case c < '0' || c > '9' || nd == 15: // an exponent, or too long
			f, err := strconv.ParseFloat(string(num), 64)
			return f, err == nil
		}
		mant = mant*10 + uint64(c-'0')
		nd++
		if nfrac >= 0 {
			nfrac++
		}
	}
	f := float64(mant)
	if nfrac > 0 {
		f /= pow10[nfrac]
	}
	if num[0] == '-' {
		f = -f // -0 stays negative zero, as ParseFloat makes it
	}
	return f, true
}

func (d *recDecoder) float(p *float64) bool {
	if d.isNull() {
		return true
	}
	f, ok := d.floatValue()
	if ok {
		*p = f
	}
	return ok
}

// raw copies the value's exact bytes, as json.RawMessage.UnmarshalJSON
// does (null included).
func (d *recDecoder) raw(p *json.RawMessage) bool {
	s := d.i
	if !d.skip(1) {
		return false
	}
	*p = append((*p)[:0], d.b[s:d.i]...)
	return true
}

// openObject consumes the '{' at the cursor, and the '}' of an empty
// object.
func (d *recDecoder) openObject() (empty, ok bool) {
	if d.peek() != '{' {
		return false, false
	}
	d.i++
	d.ws()
	if d.peek() == '}' {
		d.i++
		return true, true
	}
	return false, true
}

// memberKey reads a member's key (unescaped into buf when needed) and the
// colon after it, leaving the cursor on the value.
func (d *recDecoder) memberKey(buf []byte) ([]byte, bool) {
	if d.peek() != '"' {
		return nil, false
	}
	key, ok := d.stringContent(buf)
	if !ok {
		return nil, false
	}
	d.ws()
	if d.peek() != ':' {
		return nil, false
	}
	d.i++
	d.ws()
	return key, true
}

// nextMember consumes what follows a member's value: a comma (more) or the
// closing brace.
func (d *recDecoder) nextMember() (more, ok bool) {
	d.ws()
	switch d.peek() {
	case ',':
		d.i++
		d.ws()
		return true, true
	case '}':
		d.i++
		return false, true
	}
	return false, false
}

func (d *recDecoder) scores(p *map[string]float64) bool {
	if d.isNull() {
		*p = nil
		return true
	}
	empty, ok := d.openObject()
	if !ok {
		return false
	}
	if *p == nil {
		*p = make(map[string]float64) // {} makes an empty map, as encoding/json does
	}
	var kbuf [64]byte
	for more := !empty; more; {
		key, ok := d.memberKey(kbuf[:0])
		if !ok {
			return false
		}
		var v float64 // null stores the zero value, as encoding/json does
		if !d.isNull() {
			if v, ok = d.floatValue(); !ok {
				return false
			}
		}
		(*p)[d.intern(key)] = v
		if more, ok = d.nextMember(); !ok {
			return false
		}
	}
	return true
}

func (d *recDecoder) tags(p *map[string]string) bool {
	if d.isNull() {
		*p = nil
		return true
	}
	empty, ok := d.openObject()
	if !ok {
		return false
	}
	if *p == nil {
		*p = make(map[string]string)
	}
	var kbuf [64]byte
	for more := !empty; more; {
		key, ok := d.memberKey(kbuf[:0])
		if !ok {
			return false
		}
		var v string
		if !d.internedString(&v) {
			return false
		}
		(*p)[d.intern(key)] = v
		if more, ok = d.nextMember(); !ok {
			return false
		}
	}
	return true
}

// skip validates and steps over the value at the cursor, inside depth
// enclosing containers.
func (d *recDecoder) skip(depth int) bool {
	switch c := d.peek(); {
	case c == '"':
		_, _, _, ok := d.str()
		return ok
	case c == '{', c == '[':
		depth++
		if depth > maxJSONDepth {
			return false
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.i++
		d.ws()
		if d.peek() == end {
			d.i++
			return true
		}
		for {
			if c == '{' {
				if d.peek() != '"' {
					return false
				}
				if _, _, _, ok := d.str(); !ok {
					return false
				}
				d.ws()
				if d.peek() != ':' {
					return false
				}
				d.i++
				d.ws()
			}
			if !d.skip(depth) {
				return false
			}
			d.ws()
			switch d.peek() {
			case ',':
				d.i++
				d.ws()
				continue
			case end:
				d.i++
				return true
			}
			return false
		}
	case c == 't':
		return d.lit("true")
	case c == 'f':
		return d.lit("false")
	case c == 'n':
		return d.lit("null")
	case c == '-' || '0' <= c && c <= '9':
		_, _, ok := d.number()
		return ok
	}
	return false
}
