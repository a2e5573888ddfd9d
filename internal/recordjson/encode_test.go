package recordjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/proctor-evals/proctor/internal/jsontext"
	"github.com/proctor-evals/proctor/sink"
)

// The encoder as it was before its fast paths (commit 1929fed), kept as
// the reference the fast paths are compared with, byte for byte.

func appendJSONReference(r *sink.Record, b []byte) []byte {
	b = append(b, `{"schema":`...)
	b = strconv.AppendInt(b, int64(r.Schema), 10)
	b = refStringField(b, "run_id", r.RunID)
	b = refStringField(b, "eval", r.Eval)
	b = refOptString(b, "variant", r.Variant)
	b = refStringField(b, "sample_id", r.SampleID)
	b = append(b, `,"epoch":`...)
	b = strconv.AppendInt(b, int64(r.Epoch), 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	b = refStringField(b, "status", string(r.Status))
	b = append(b, `,"score":`...)
	b = refAppendFloat(b, r.Score)
	if len(r.Scores) > 0 {
		b = append(b, `,"scores":{`...)
		for i, k := range refSortedKeys(r.Scores) {
			if i > 0 {
				b = append(b, ',')
			}
			b = refAppendString(b, k)
			b = append(b, ':')
			b = refAppendFloat(b, r.Scores[k])
		}
		b = append(b, '}')
	}
	if r.Weight != 0 {
		b = append(b, `,"weight":`...)
		b = refAppendFloat(b, r.Weight)
	}
	b = refOptString(b, "reason", r.Reason)
	b = refOptString(b, "error", r.Error)
	b = refOptString(b, "error_kind", string(r.ErrorKind))
	b = refOptString(b, "error_source", r.ErrorSource)
	b = refRaw(b, "input", r.Input)
	b = refRaw(b, "output", r.Output)
	if len(r.Tags) > 0 {
		b = append(b, `,"tags":{`...)
		for i, k := range refSortedKeys(r.Tags) {
			if i > 0 {
				b = append(b, ',')
			}
			b = refAppendString(b, k)
			b = append(b, ':')
			b = refAppendString(b, r.Tags[k])
		}
		b = append(b, '}')
	}
	b = append(b, `,"started_at":"`...)
	b = r.StartedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","duration_ms":`...)
	b = refAppendFloat(b, r.DurationMS)
	b = append(b, `,"input_tokens":`...)
	b = strconv.AppendInt(b, r.InputTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, r.OutputTokens, 10)
	b = append(b, `,"cost_usd":`...)
	b = refAppendFloat(b, r.CostUSD)
	if r.JudgeInputTokens != 0 {
		b = append(b, `,"judge_input_tokens":`...)
		b = strconv.AppendInt(b, r.JudgeInputTokens, 10)
	}
	if r.JudgeOutputTokens != 0 {
		b = append(b, `,"judge_output_tokens":`...)
		b = strconv.AppendInt(b, r.JudgeOutputTokens, 10)
	}
	if r.JudgeCostUSD != 0 {
		b = append(b, `,"judge_cost_usd":`...)
		b = refAppendFloat(b, r.JudgeCostUSD)
	}
	b = refOptString(b, "model", r.Model)
	b = refOptString(b, "judge_model", r.JudgeModel)
	if r.SimulatorInputTokens != 0 {
		b = append(b, `,"simulator_input_tokens":`...)
		b = strconv.AppendInt(b, r.SimulatorInputTokens, 10)
	}
	if r.SimulatorOutputTokens != 0 {
		b = append(b, `,"simulator_output_tokens":`...)
		b = strconv.AppendInt(b, r.SimulatorOutputTokens, 10)
	}
	if r.SimulatorCostUSD != 0 {
		b = append(b, `,"simulator_cost_usd":`...)
		b = refAppendFloat(b, r.SimulatorCostUSD)
	}
	b = refOptString(b, "simulator_model", r.SimulatorModel)
	b = refOptString(b, "resources", r.Resources)
	if r.CallsReplayed != 0 {
		b = append(b, `,"calls_replayed":`...)
		b = strconv.AppendInt(b, int64(r.CallsReplayed), 10)
	}
	if r.ReplayDivergedAt != 0 {
		b = append(b, `,"replay_diverged_at":`...)
		b = strconv.AppendInt(b, int64(r.ReplayDivergedAt), 10)
	}
	b = append(b, `,"seed":`...)
	b = strconv.AppendUint(b, r.Seed, 10)
	b = refOptString(b, "trace", r.Transcript)
	b = refOptString(b, "parent_run_id", r.ParentRunID)
	b = refOptString(b, "reused_from", r.ReusedFrom)
	b = refOptString(b, "worker", r.Worker)
	b = refOptString(b, "trace_id", r.TraceID)
	b = refOptString(b, "span_id", r.SpanID)
	return append(b, '}')
}

func refSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func refStringField(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return refAppendString(b, v)
}

func refOptString(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return refStringField(b, name, v)
}

func refRaw(b []byte, name string, v json.RawMessage) []byte {
	if len(v) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return refAppendRawJSON(b, v)
}

func refAppendRawJSON(b []byte, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	if end, ok := jsontext.ScanValue(v, 0, jsontext.MaxDepth, false); ok && end == len(v) && refRawIsClean(v) {
		return append(b, v...)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil || refDepth(v) > jsontext.MaxDepth {
		return refAppendString(b, string(v))
	}
	var out bytes.Buffer
	json.HTMLEscape(&out, buf.Bytes())
	return append(b, out.Bytes()...)
}

// refDepth is the nesting of the valid JSON value v, decoded.
func refDepth(v []byte) int {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return 0
	}
	var depth func(any) int
	depth = func(x any) int {
		d := 0
		switch x := x.(type) {
		case []any:
			for _, e := range x {
				d = max(d, depth(e))
			}
		case map[string]any:
			for _, e := range x {
				d = max(d, depth(e))
			}
		default:
			return 0
		}
		return d + 1
	}
	return depth(x)
}

func refRawIsClean(v []byte) bool {
	inString, escaped := false, false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			return false
		case c == 0xE2 && i+2 < len(v) && v[i+1] == 0x80 && (v[i+2] == 0xA8 || v[i+2] == 0xA9):
			return false
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

func refAppendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func refAppendString(b []byte, s string) []byte {
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
				b = append(b, '\\', 'u', '0', '0', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
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
			b = append(b, '\\', 'u', '2', '0', '2', "0123456789abcdef"[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// loadtestRecord is a record as examples/loadtest writes it.
func loadtestRecord() sink.Record {
	return sink.Record{
		Schema: sink.SchemaVersion, RunID: "20261123T142715Z-032cf398", Eval: "loadtest", SampleID: "t12345",
		Status: sink.Pass, Score: 1,
		Input:     json.RawMessage(`{"prompt":"what is 12345+1?","expected":"12346"}`),
		Output:    json.RawMessage(`"12346"`),
		StartedAt: time.Date(2026, 11, 23, 14, 27, 37, 755109674, time.UTC), DurationMS: 0.002,
		Seed: 18229469155294269793,
	}
}

// TestAppendJSONAllocs: with a reused buffer, a record with a few tags and
// scores costs no allocation.
func TestAppendJSONAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r := benchRecord()
	r.Scores = map[string]float64{"a": 1, "b": 0.5}
	buf := r.AppendJSON(nil)
	if n := testing.AllocsPerRun(100, func() { buf = r.AppendJSON(buf[:0]) }); n != 0 {
		t.Errorf("%v allocations per AppendJSON, want 0", n)
	}
}

// BenchmarkAppendJSON: the encoder against its reference on the same
// records, so that one run gives both figures.
func BenchmarkAppendJSON(b *testing.B) {
	for _, rc := range []struct {
		name string
		rec  sink.Record
	}{{"Loadtest", loadtestRecord()}, {"Bench", benchRecord()}} {
		b.Run(rc.name+"/Reference", func(b *testing.B) {
			buf := appendJSONReference(&rc.rec, nil)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = appendJSONReference(&rc.rec, buf[:0])
			}
		})
		b.Run(rc.name+"/Fast", func(b *testing.B) {
			buf := rc.rec.AppendJSON(nil)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = rc.rec.AppendJSON(buf[:0])
			}
		})
	}
}

// TestAppendJSONMatchesReference: the encoder writes what its reference
// writes, for the records the other tests use and variations of them.
func TestAppendJSONMatchesReference(t *testing.T) {
	recs := append(roundTripRecords(), benchRecord(), loadtestRecord(), sink.Record{})
	for _, base := range slices.Clone(recs) {
		r := base
		r.StartedAt = r.StartedAt.In(time.FixedZone("X", 3600))
		r.Score, r.DurationMS, r.CostUSD = math.Copysign(0, -1), 1e-7, 1e21
		r.Input, r.Output = json.RawMessage("{\"a\" : \"<\u2028>\"}"), json.RawMessage(`{`)
		recs = append(recs, r)
	}
	many := benchRecord()
	many.Scores, many.Tags = map[string]float64{}, map[string]string{}
	for i := range 20 { // more keys than sortedKeys holds on the stack
		many.Scores[fmt.Sprint("s", i)], many.Tags[fmt.Sprint("t", i)] = float64(i)/7, fmt.Sprint(i)
	}
	recs = append(recs, many)
	for _, r := range recs {
		want := appendJSONReference(&r, []byte("prefix"))
		if got := r.AppendJSON([]byte("prefix")); !bytes.Equal(got, want) {
			t.Errorf("AppendJSON differs from its reference\n got: %s\nwant: %s", got, want)
		}
	}
}

// floatMismatch compares appendFloat with its reference and, for finite
// values when viaJSON, with encoding/json; "" when they agree. (No
// t.Helper in the loops: it costs more than the comparison.)
func floatMismatch(f float64, viaJSON bool) string {
	var buf [64]byte
	got := jsontext.AppendFloat(buf[:0], f)
	if want := refAppendFloat(buf[len(got):len(got)], f); !bytes.Equal(got, want) {
		return fmt.Sprintf("jsontext.AppendFloat(%v) (bits %#x) = %s, reference %s", f, math.Float64bits(f), got, want)
	}
	if !viaJSON || math.IsNaN(f) || math.IsInf(f, 0) {
		return ""
	}
	if want, err := json.Marshal(f); err != nil || !bytes.Equal(got, want) {
		return fmt.Sprintf("jsontext.AppendFloat(%v) = %s, encoding/json %s (%v)", f, got, want, err)
	}
	return ""
}

// thousandthsMismatch checks m/1000, the fast path's values, and its two
// neighbours, which must not be taken for it.
func thousandthsMismatch(m int64, viaJSON bool) string {
	f := float64(m) / 1000
	for _, x := range []float64{f, math.Nextafter(f, math.Inf(1)), math.Nextafter(f, math.Inf(-1))} {
		if msg := floatMismatch(x, viaJSON); msg != "" {
			return msg
		}
	}
	return ""
}

// TestAppendFloatThousandths: the fast path's claim (m/1000, trimmed, is
// strconv's shortest form below 1e9), exhaustively up to ±1000 and on
// random m across the whole range, and at its edges.
func TestAppendFloatThousandths(t *testing.T) {
	t.Parallel()
	n := int64(1_000_000)
	if raceEnabled || testing.Short() {
		n = 20_000
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for m := -n; m <= n; m++ {
		if msg := thousandthsMismatch(m, m%64 == 0); msg != "" {
			t.Fatal(msg)
		}
		if msg := thousandthsMismatch(rng.Int64N(2e12)-1e12, m%64 == 0); msg != "" {
			t.Fatal(msg)
		}
		// Durations of up to a day, from microseconds.
		if msg := floatMismatch(float64(rng.Int64N(86400e6))/1000, false); msg != "" {
			t.Fatal(msg)
		}
	}
	for _, f := range []float64{
		0, math.Copysign(0, -1), 1, -1, 0.001, -0.001, 0.1, 0.2, 0.3, 1.005, 2.675,
		1e9, -1e9, math.Nextafter(1e9, 0), math.Nextafter(-1e9, 0), 999999999.999, -999999999.999,
		1e12, 1e15, 1 << 53, 1e21, math.Nextafter(1e21, 0), 1e-6, math.Nextafter(1e-6, 0), 1e-7,
		5e-324, -5e-324, math.SmallestNonzeroFloat64, math.MaxFloat64, -math.MaxFloat64,
		1.0 / 3, 0.0005, 0.0015, 0.00342, 1834.25, 123456.789,
		math.NaN(), math.Inf(1), math.Inf(-1),
	} {
		if msg := floatMismatch(f, true); msg != "" {
			t.Error(msg)
		}
	}
}

// TestAppendFloatRandomBits: floats of every magnitude.
func TestAppendFloatRandomBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100_000 {
		if msg := floatMismatch(math.Float64frombits(rng.Uint64()), true); msg != "" {
			t.Fatal(msg)
		}
	}
}

func FuzzAppendFloat(f *testing.F) {
	for _, x := range []float64{0, math.Copysign(0, -1), 1, 0.002, 1834.25, 1e-7, 1e21, 999999999.999, math.NaN()} {
		f.Add(x, int64(2))
	}
	f.Add(0.1, int64(-999999999999))
	f.Fuzz(func(t *testing.T, x float64, m int64) {
		if msg := floatMismatch(x, true); msg != "" {
			t.Fatal(msg)
		}
		if msg := thousandthsMismatch(m%1e12, true); msg != "" {
			t.Fatal(msg)
		}
	})
}

func timeMismatch(tm time.Time) string {
	var buf [80]byte
	got := jsontext.AppendTime(buf[:0], tm)
	if want := tm.AppendFormat(buf[len(got):len(got)], time.RFC3339Nano); !bytes.Equal(got, want) {
		return fmt.Sprintf("jsontext.AppendTime(%v) = %s, time writes %s", tm, got, want)
	}
	return ""
}

func checkTime(t *testing.T, tm time.Time) {
	t.Helper()
	if msg := timeMismatch(tm); msg != "" {
		t.Fatal(msg)
	}
}

// TestAppendTime: every day of years 0 to 9999 (a stride under -race),
// each at a time of day and fraction that change from day to day, the
// edges of the fast path's range, and times it leaves to the time
// package (other zones, other years).
func TestAppendTime(t *testing.T) {
	t.Parallel()
	first := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	last := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	step := 1
	if raceEnabled || testing.Short() {
		step = 97
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for d := first; !d.After(last); d = d.AddDate(0, 0, step) {
		ns := []int{0, 1, 10, 100_000_000, 120_000_000, 999_999_999, 755_109_674, 500_000}[rng.IntN(8)]
		for _, tm := range []time.Time{d, d.Add(time.Duration(rng.Int64N(86400))*time.Second + time.Duration(ns))} {
			if msg := timeMismatch(tm); msg != "" {
				t.Fatal(msg)
			}
		}
	}
	for _, tm := range []time.Time{
		{}, time.Unix(0, 0).UTC(), time.Unix(-1, 0).UTC(), time.Unix(-1, 999_999_999).UTC(),
		first, first.Add(-1), first.Add(-time.Second), time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 12, 31, 23, 59, 59, 1, time.UTC),
		time.Date(2000, 2, 29, 23, 59, 59, 1, time.UTC), time.Date(1900, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 23, 14, 27, 37, 755109674, time.UTC), time.Unix(math.MaxInt64/2, 0).UTC(),
		time.Unix(math.MinInt64/2, 0).UTC(), time.Now(), time.Now().UTC(), time.Now().Local(),
		time.Date(2025, 1, 2, 3, 4, 5, 6, time.FixedZone("", -7*3600)),
		time.Date(2025, 1, 2, 3, 4, 5, 6, time.FixedZone("UTC", 0)),
		time.Date(2025, 1, 2, 3, 4, 5, 6, time.FixedZone("", 90)),
	} {
		checkTime(t, tm)
	}
}

func FuzzAppendTime(f *testing.F) {
	f.Add(int64(1795444057), int64(755109674), 0)
	f.Add(int64(-62167219200), int64(0), 0)
	f.Add(int64(253402300799), int64(999999999), 0)
	f.Add(int64(253402300800), int64(1), 3600)
	f.Add(int64(-62167219201), int64(1), -1)
	f.Fuzz(func(t *testing.T, sec, nsec int64, offset int) {
		tm := time.Unix(sec, nsec)
		checkTime(t, tm.UTC())
		// The same instant folded into the fast path's years, 0000 to 9999
		// (the four-digit years of RFC 3339).
		const lo, hi = -62167219200, 253402300799
		checkTime(t, time.Unix(lo+(sec%(hi-lo)+(hi-lo))%(hi-lo), nsec).UTC())
		checkTime(t, tm.In(time.FixedZone("", offset%(100*3600))))
	})
}

func checkString(t *testing.T, s string) {
	t.Helper()
	got := string(jsontext.AppendString([]byte("x"), s))
	if want := string(refAppendString([]byte("x"), s)); got != want {
		t.Fatalf("jsontext.AppendString(%q) = %s, reference %s", s, got, want)
	}
	if want, _ := json.Marshal(s); got[1:] != string(want) {
		t.Fatalf("jsontext.AppendString(%q) = %s, encoding/json %s", s, got[1:], want)
	}
}

// stringCases hold each byte AppendString may escape at each offset of an
// 8-byte word, in runs longer than a word.
func stringCases() []string {
	specials := []string{"\x00", "\x1f", "\x7f", " ", "\"", "\\", "<", ">", "&", "=", "?", "%", "\u2028", "\u2029",
		"\u2027", "\u202a", "\xe2", "\xe2\x80", "\xe2\x80\xa8"[1:], "\xff", "\xc3\x28", "\xed\xa0\x80", "é", "😀", "\ufffd", "\n\r\t\b\f"}
	var cases []string
	for _, sp := range specials {
		for pre := range 17 {
			cases = append(cases, strings.Repeat("a", pre)+sp, strings.Repeat("b", pre)+sp+strings.Repeat("c", 9))
		}
	}
	return cases
}

func TestAppendString(t *testing.T) {
	for _, s := range stringCases() {
		checkString(t, s)
	}
	for c := range 256 {
		checkString(t, string([]byte{byte(c)}))
		checkString(t, "01234567"+string([]byte{byte(c)})+"89")
	}
}

// fuzzSeeds thins cases out: the fuzzer mutates them anyway, and each
// seed lengthens its start.
func fuzzSeeds(cases []string) []string {
	var seeds []string
	for i := 0; i < len(cases); i += 7 {
		seeds = append(seeds, cases[i])
	}
	return seeds
}

func FuzzAppendString(f *testing.F) {
	for _, s := range fuzzSeeds(stringCases()) {
		f.Add(s)
	}
	f.Fuzz(checkString)
}

func checkRawJSON(t *testing.T, v []byte) {
	t.Helper()
	got := jsontext.AppendRawJSON([]byte("x"), v)
	if want := refAppendRawJSON([]byte("x"), v); !bytes.Equal(got, want) {
		t.Fatalf("jsontext.AppendRawJSON(%q) = %s, reference %s", v, got, want)
	}
	if len(v) > 0 && !json.Valid(got[1:]) {
		t.Fatalf("jsontext.AppendRawJSON(%q) wrote invalid JSON %q", v, got[1:])
	}
	// What the writer writes, every reader reads: a record holding v as
	// its input and output is committed (ScanLine, the log's rule) and
	// decodes back to what was written.
	r := sink.Record{Schema: sink.SchemaVersion, RunID: "r", SampleID: "s", Status: sink.Pass, Input: v, Output: v}
	line := r.AppendJSON(nil)
	if _, err := ScanLine(line); err != nil {
		t.Fatalf("a record of %.80q is not read back: %v", v, err)
	}
	var back sink.Record
	if err := DecodeLine(line, &back, nil); err != nil {
		t.Fatalf("a record of %.80q is not decoded: %v", v, err)
	}
	if len(v) > 0 && (!bytes.Equal(back.Output, got[1:]) || !bytes.Equal(back.Input, got[1:])) {
		t.Fatalf("a record of %.80q reads back %.80q, wrote %.80q", v, back.Output, got[1:])
	}
}

func rawCases() []string {
	cases := []string{
		`{"prompt":"what is 12345+1?","expected":"12346"}`, `"12346"`, `1`, `-0.5e+3`, `true`, `false`, `null`,
		`[]`, `{}`, `[1,"a",{"b":[null]}]`, `{"a":1,}`, `[1,]`, `{"a"}`, `{"a":}`, `{1:2}`, `[`, `]`, `{`, `}`,
		` 1`, `1 `, "[1,\n2]", "{\"a\" :1}", "\"a\tb\"", `"a\"b"`, `"\\"`, `"\u00e9\ud800\/"`, `"\u00"`, `"\x"`, `"\`,
		`"<"`, `">"`, `"&"`, `"\u003c"`, "\"\u2028\"", "\"\u2029\"", "\"\xe2\x80\"", "\"\xe2\x80\xa7\"", "\"\xe2\"",
		"\"\xff\xfe\"", "\xe2\x80\xa8", "\"é😀\"", `tru`, `nul`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`, `"open`, `{}}`, `[][]`,
		"\"abcdefgh<ijklmnop\"", "\"abcdefghijklmnop\"", "\"abcdefg\"", "\"abcdefgh\"", "\"abcdefghi\"",
		nested(jsontext.MaxDepth), nested(jsontext.MaxDepth + 1), nested(maxJSONDepth + 1), "[" + nested(jsontext.MaxDepth) + " ]",
		strings.Repeat(`{"a":`, jsontext.MaxDepth) + "1" + strings.Repeat("}", jsontext.MaxDepth),
		nested(maxJSONDepth), nested(maxJSONDepth - 1), strings.Repeat(`{"a":`, maxJSONDepth) + "1" + strings.Repeat("}", maxJSONDepth),
	}
	for _, s := range stringCases() {
		q, _ := json.Marshal(s)
		// A key alone may hold what escaping changes (the fuzzer's find).
		cases = append(cases, `"`+s+`"`, string(q), `{"`+s+`":["`+s+`"]}`, `{"`+s+`":[]}`, `{"a":1,`+string(q)+`:2}`)
	}
	return cases
}

// TestAppendRawJSON: the one-pass scan copies what the reference copies,
// and the rest goes the reference's way (compacted and escaped, or
// quoted when invalid).
func TestAppendRawJSON(t *testing.T) {
	for _, v := range rawCases() {
		checkRawJSON(t, []byte(v))
	}
	if got := jsontext.AppendRawJSON([]byte("x"), nil); string(got) != "x" {
		t.Errorf("AppendRawJSON of no value wrote %q", got[1:])
	}
}

func FuzzAppendRawJSON(f *testing.F) {
	for _, v := range fuzzSeeds(rawCases()) {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		checkRawJSON(t, v)
		// Random bytes are seldom valid JSON: the written form of a valid
		// v, compact and escaped, exercises the copy.
		var compact, escaped bytes.Buffer
		if json.Compact(&compact, v) == nil {
			checkRawJSON(t, compact.Bytes())
			json.HTMLEscape(&escaped, compact.Bytes())
			checkRawJSON(t, escaped.Bytes())
		}
	})
}
