// Package jsontext writes and scans JSON text as encoding/json does, without
// reflection: the primitives of the record codec (sink.Record.AppendJSON,
// internal/recordjson) and of the engine's encoding of inputs and outputs.
// The scanners validate; they build nothing.
package jsontext

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/proctor-evals/proctor/internal/jsondepth"
)

// AppendInt is strconv.AppendInt in base 10, with a one-digit number
// (a schema, an epoch, an attempt) written without a call.
func AppendInt(b []byte, n int64) []byte {
	if uint64(n) < 10 {
		return append(b, byte('0'+n))
	}
	return strconv.AppendInt(b, n, 10)
}

// AppendRawJSON appends the JSON value v as encoding/json writes a
// json.RawMessage: compacted (so that a record stays on one line) and with
// <, >, & and U+2028/2029 escaped. A value that is not valid JSON, or that
// nests deeper than MaxDepth, cannot be written as it is; it is written as
// a JSON string holding its text, so the record stays readable.
func AppendRawJSON(b []byte, v []byte) []byte {
	if len(v) == 0 {
		return b // the absent value: appendRaw leaves the field out
	}
	if end, ok := ScanValue(v, 0, MaxDepth, true); ok && end == len(v) {
		return append(b, v...) // already in its written form: the usual case
	}
	var buf bytes.Buffer
	if jsondepth.Exceeds(v, MaxDepth) || json.Compact(&buf, v) != nil {
		return AppendString(b, string(v))
	}
	var out bytes.Buffer
	json.HTMLEscape(&out, buf.Bytes())
	return append(b, out.Bytes()...)
}

// hasRawSpecialByte reports whether one of x's bytes is one specialBytes
// flags or <, > or &.
func hasRawSpecialByte(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	lg := (x | ones*2) ^ (ones * '>') // '<' is '>' with bit 1 clear
	amp := x ^ (ones * '&')
	return ((x-ones*0x20)|(q-ones)|(bs-ones)|(lg-ones)|(amp-ones)|x)&highs != 0
}

// scanCleanString is ScanString(b, i, true) failing also on <, >, & and
// U+2028/2029.
func scanCleanString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i++
	for i < len(b) {
		for i+8 <= len(b) && !hasRawSpecialByte(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && rawPlain[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return i, false
				}
				if _, ok := Hex4(b[i+2 : i+6]); !ok {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		case c < 0x20, c == '<', c == '>', c == '&':
			return i, false
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
			return i, false // U+2028, U+2029
		default:
			i++
		}
	}
	return i, false
}

// rawPlain holds the bytes scanCleanString passes without a second look:
// those of jsonSafe and the non-ASCII bytes but 0xE2, which starts
// U+2028 and U+2029.
var rawPlain = func() (set [256]bool) {
	for c := range set {
		set[c] = c < utf8.RuneSelf && jsonSafe[c] || c >= utf8.RuneSelf && c != 0xE2
	}
	return set
}()

// AppendFloat writes f as encoding/json does; non-finite as null.
func AppendFloat(b []byte, f float64) []byte {
	// Scores, durations (µs/1000) and small integers are exact thousandths:
	// below 1e9 such a value's decimal m/1000 has at most 12 significant
	// digits, and distinct decimals of at most 15 digits are distinct
	// float64s, so m/1000 with trailing zeros trimmed is the shortest
	// decimal that reads back as f, which is what strconv writes.
	if math.Abs(f) < 1e9 { // false for NaN and ±Inf
		if f == 0 {
			if math.Signbit(f) {
				return append(b, '-', '0')
			}
			return append(b, '0')
		}
		if m := math.Round(f * 1000); m/1000 == f {
			return appendMilli(b, int64(m))
		}
	}
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

// appendMilli writes m/1000 in decimal, without trailing zeros.
func appendMilli(b []byte, m int64) []byte {
	u := uint64(m)
	if m < 0 {
		b = append(b, '-')
		u = uint64(-m)
	}
	b = strconv.AppendUint(b, u/1000, 10)
	frac := u % 1000
	switch {
	case frac == 0:
		return b
	case frac%100 == 0:
		return append(b, '.', byte('0'+frac/100))
	case frac%10 == 0:
		return append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10))
	}
	return append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
}

// Bounds of the instants AppendTime writes itself: years 0 to 9999, which
// time writes as four digits.
const (
	minFastUnix = -62167219200 // 0000-01-01T00:00:00Z
	maxFastUnix = 253402300799 // 9999-12-31T23:59:59Z
	// daysBefore shifts days since 1970 to days since 0000-03-01 (the
	// civil-from-days algorithm's epoch) plus one 400-year era, so that
	// every day in range counts from 0 up.
	daysBefore = 719468 + 146097
)

// AppendTime writes t as t.AppendFormat(b, time.RFC3339Nano) does; UTC
// times of years 0..9999 without the time package's general layout code.
func AppendTime(b []byte, t time.Time) []byte {
	sec := t.Unix()
	if t.Location() != time.UTC || sec < minFastUnix || sec > maxFastUnix {
		return t.AppendFormat(b, time.RFC3339Nano)
	}
	u := uint64(sec + daysBefore*86400)
	days, secOfDay := uint32(u/86400), uint32(u%86400)
	// Howard Hinnant's civil_from_days, on unsigned days (32 bits: they
	// stay below 2^22).
	era, doe := days/146097, days%146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	day := doy - (153*mp+2)/5 + 1
	month := mp + 3
	year := yoe + era*400 - 400
	if month > 12 {
		month -= 12
		year++
	}
	var buf [30]byte
	buf[0], buf[1] = digits2[year/100*2], digits2[year/100*2+1]
	buf[2], buf[3] = digits2[year%100*2], digits2[year%100*2+1]
	buf[4] = '-'
	buf[5], buf[6] = digits2[month*2], digits2[month*2+1]
	buf[7] = '-'
	buf[8], buf[9] = digits2[day*2], digits2[day*2+1]
	buf[10] = 'T'
	h, m, s := secOfDay/3600, secOfDay/60%60, secOfDay%60
	buf[11], buf[12] = digits2[h*2], digits2[h*2+1]
	buf[13] = ':'
	buf[14], buf[15] = digits2[m*2], digits2[m*2+1]
	buf[16] = ':'
	buf[17], buf[18] = digits2[s*2], digits2[s*2+1]
	n := 19
	if ns := uint32(t.Nanosecond()); ns != 0 {
		// Nine digits, trailing zeros trimmed, as RFC3339Nano's .999999999.
		buf[19], buf[20] = '.', byte('0'+ns/1e8)
		for i, rest := 21, ns%1e8; i < 29; i += 2 {
			d := rest / 1e6 * 2
			buf[i], buf[i+1] = digits2[d], digits2[d+1]
			rest = rest % 1e6 * 100
		}
		n = 29
		for buf[n-1] == '0' {
			n--
		}
	}
	buf[n] = 'Z'
	return append(b, buf[:n+1]...)
}

// digits2 holds 00 to 99, two bytes each.
const digits2 = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

const hexDigits = "0123456789abcdef"

// jsonSafe holds the ASCII bytes encoding/json writes as they are in a
// string (its htmlSafeSet): one lookup per byte in the common case.
var jsonSafe = func() (set [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		set[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return set
}()

// load64 reads s[i:i+8] little-endian; the compiler makes it one load.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// AppendString appends s as a JSON string, escaped as encoding/json does
// (including <, > and & and invalid UTF-8 replaced by U+FFFD).
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && !hasRawSpecialByte(load64(s, i)) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
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

// MaxDepth bounds the nesting of a value (a record's input and output)
// that AppendRawJSON writes as it is and the scanners follow; logs of
// older versions may hold deeper ones, which go to encoding/json (it
// allows 10,000).
const MaxDepth = jsondepth.Max

func HasLit(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// specialBytes flags the bytes of x (little-endian) that need a closer
// look in a string: a quote, a backslash, a control character or
// non-ASCII. A subtraction's borrow may flag a byte above a flagged one,
// never below: the lowest flag is exact.
func specialBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return ((x - ones*0x20) | (q - ones) | (bs - ones) | x) & highs
}

// ScanString validates the JSON string at b[i] and returns the index after
// its closing quote, and whether it holds escapes. Strict (a field's
// value) means valid UTF-8 and no surrogate escapes, which the strict
// decoder does not decode; raw (inside input or output, kept as bytes)
// accepts what encoding/json's scanner accepts.
func ScanString(b []byte, i int, raw bool) (end int, esc, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false, false
	}
	i++
	start, ascii := i, true
	for i < len(b) {
		if i+8 <= len(b) {
			// Eight bytes at a time, to the first that needs a look.
			m := specialBytes(binary.LittleEndian.Uint64(b[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
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
				r, ok := Hex4(b[i+2 : i+6])
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
		default: // the last few bytes, one at a time
			i++
		}
	}
	return i, esc, false
}

func Hex4(b []byte) (rune, bool) {
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

// ScanNumber validates the JSON number at b[i] and returns its end and
// whether it has a fraction or an exponent.
func ScanNumber(b []byte, i int) (end int, frac, ok bool) {
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

// scanDigits reads the whole number at b[i], without a sign, when it fits
// a uint64 and has no leading zero, fraction or exponent; ok is false for
// anything else, which the callers leave to strconv.
func scanDigits(b []byte, i int) (end int, n uint64, ok bool) {
	j := i
	for j < len(b) && j-i < 19 && '0' <= b[j] && b[j] <= '9' {
		n = n*10 + uint64(b[j]-'0') // 19 digits fit
		j++
	}
	if j-i == 19 && j < len(b) && '0' <= b[j] && b[j] <= '9' {
		hi, lo := bits.Mul64(n, 10)
		var carry uint64
		n, carry = bits.Add64(lo, uint64(b[j]-'0'), 0)
		if hi != 0 || carry != 0 {
			return i, 0, false
		}
		j++
	}
	if j == i || b[i] == '0' && j-i > 1 {
		return i, 0, false
	}
	if j < len(b) {
		if c := b[j]; '0' <= c && c <= '9' || c == '.' || c == 'e' || c == 'E' {
			return i, 0, false
		}
	}
	return j, n, true
}

// ScanInt reads an integer as encoding/json does into an int64 field.
func ScanInt(b []byte, i int) (int, int64, bool) {
	j, neg := i, i < len(b) && b[i] == '-'
	if neg {
		j++
	}
	if end, n, ok := scanDigits(b, j); ok && n <= math.MaxInt64 {
		if neg {
			return end, -int64(n), true
		}
		return end, int64(n), true
	}
	end, frac, ok := ScanNumber(b, i)
	if !ok || frac {
		return end, 0, false
	}
	n, err := strconv.ParseInt(string(b[i:end]), 10, 64)
	return end, n, err == nil
}

// ScanUint reads an integer as encoding/json does into a uint64 field.
func ScanUint(b []byte, i int) (int, uint64, bool) {
	if end, n, ok := scanDigits(b, i); ok {
		return end, n, true
	}
	end, frac, ok := ScanNumber(b, i)
	if !ok || frac || b[i] == '-' {
		return end, 0, false
	}
	n, err := strconv.ParseUint(string(b[i:end]), 10, 64)
	return end, n, err == nil
}

// pow10 holds the powers of ten exact as float64s.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// ScanFloat reads a number as encoding/json does into a float64 field.
func ScanFloat(b []byte, i int) (int, float64, bool) {
	// A decimal of at most 15 digits without an exponent (a score, a
	// duration, a cost) is m/10^k with m and 10^k exact as float64s: one
	// division, correctly rounded, is what strconv returns (its own exact
	// path).
	j, neg := i, i < len(b) && b[i] == '-'
	if neg {
		j++
	}
	var m uint64
	digits, k := 0, 0
	for ; j < len(b) && '0' <= b[j] && b[j] <= '9'; j++ {
		m = m*10 + uint64(b[j]-'0')
		digits++
	}
	if j < len(b) && b[j] == '.' && digits > 0 {
		for j++; j < len(b) && '0' <= b[j] && b[j] <= '9'; j++ {
			m = m*10 + uint64(b[j]-'0')
			digits++
			k++
		}
	}
	start := i
	if neg {
		start++
	}
	if digits > 0 && digits <= 15 && (b[j-1] != '.') && !(b[start] == '0' && j > start+1 && b[start+1] != '.') &&
		(j == len(b) || b[j] != 'e' && b[j] != 'E') {
		f := float64(m) / pow10[k]
		if neg {
			f = -f
		}
		return j, f, true
	}
	end, _, ok := ScanNumber(b, i)
	if !ok {
		return end, 0, false
	}
	f, err := strconv.ParseFloat(string(b[i:end]), 64)
	return end, f, err == nil
}

// ScanValue validates the compact JSON value at b[i] (input or output)
// and returns its end. With clean, it also fails on what HTMLEscape would
// change, so that one pass tells the encoder whether a value is written as
// it is: outside strings, valid compact JSON has no white space nor any
// byte HTMLEscape changes, so only strings need the extra checks.
func ScanValue(b []byte, i, depth int, clean bool) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	var ok bool
	switch b[i] {
	case '"':
		if clean {
			return scanCleanString(b, i)
		}
		i, _, ok = ScanString(b, i, true)
		return i, ok
	case 't':
		return i + 4, HasLit(b, i, "true")
	case 'f':
		return i + 5, HasLit(b, i, "false")
	case 'n':
		return i + 4, HasLit(b, i, "null")
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
					i, _, ok = ScanString(b, i, true)
				}
				if !ok || i >= len(b) || b[i] != ':' {
					return i, false
				}
				i++
			}
			if i, ok = ScanValue(b, i, depth-1, clean); !ok || i >= len(b) {
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
	i, _, ok = ScanNumber(b, i)
	return i, ok
}
