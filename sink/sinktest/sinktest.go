// Package sinktest is the conformance suite of [sink.Sink] implementations,
// in the style of testing/slogtest and testing/fstest: a driver's tests
// call [Run] with a [Target] that makes a fresh sink in a directory and
// reads back what it wrote, and the suite checks, case by case, the rules
// every sink keeps (each case's name and doc say the rule):
//
//	func TestConformance(t *testing.T) {
//		sinktest.Run(t, sinktest.Target{
//			New: func(dir string) (sink.Sink, error) { return parquet.New(dir, nil) },
//			Read: func(dir string) ([]sink.Record, error) {
//				var recs []sink.Record
//				for r, err := range parquet.Records(dir) {
//					if err != nil {
//						return recs, err
//					}
//					recs = append(recs, r)
//				}
//				return recs, nil
//			},
//			TimePrecision: time.Microsecond,
//		})
//	}
//
// [TestSink] runs the same cases without a *testing.T and returns the
// violations as an error, as testing/fstest.TestFS does.
//
// Where sinks may legitimately differ (timestamp precision, non-finite
// floats, invalid UTF-8, concurrency), the target declares the sink's
// documented behaviour and the suite checks that one.
package sinktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/proctor-evals/proctor/sink"
)

// Target is the sink under test: how the suite makes one and reads back
// what it stored, and the behaviour it documents where sinks may differ.
type Target struct {
	// New returns a fresh sink that writes into dir, an empty directory
	// owned by the case.
	New func(dir string) (sink.Sink, error)

	// Read returns every record the closed sink wrote into dir, in the
	// order they were stored, or the first read error.
	Read func(dir string) ([]sink.Record, error)

	// TimePrecision is the resolution at which the sink keeps StartedAt:
	// the suite expects every timestamp truncated to it (toward the past,
	// as time.Time.Truncate). 0 means exact, nanoseconds. Time zones need
	// not survive: timestamps compare as instants.
	TimePrecision time.Duration

	// NonFinite is what the sink does with NaN and ±Inf float values.
	NonFinite NonFinite

	// InvalidUTF8 is what the sink does with invalid UTF-8 in strings and
	// map keys and values.
	InvalidUTF8 InvalidUTF8

	// Concurrent says that the sink's Write and Close are safe for
	// concurrent use; the suite then checks that they are.
	Concurrent bool

	// Many is the number of records of the ManyRecords case; 0 means
	// 200,000 (10,000 with -short).
	Many int
}

// NonFinite is a sink's documented handling of NaN and ±Inf in float
// fields (Score, Scores values, Weight, DurationMS, CostUSD).
type NonFinite int

const (
	// NonFiniteExact: the values round-trip as they are (Parquet).
	NonFiniteExact NonFinite = iota
	// NonFiniteZero: the values are written as null and read back as 0
	// (JSON, which cannot carry them: the JSONL log).
	NonFiniteZero
	// NonFiniteRejected: Write returns an error and stores nothing; the
	// sink keeps working.
	NonFiniteRejected
)

// InvalidUTF8 is a sink's documented handling of invalid UTF-8 in strings.
type InvalidUTF8 int

const (
	// InvalidUTF8Replaced: each byte of an invalid sequence reads back as
	// U+FFFD, as with encoding/json (the JSONL log, Parquet).
	InvalidUTF8Replaced InvalidUTF8 = iota
	// InvalidUTF8Exact: the bytes round-trip as they are.
	InvalidUTF8Exact
)

// A testCase checks one rule.
type testCase struct {
	name string
	rule string
	run  func(t tb, h *Target)
}

// Run runs the conformance suite against the sink target makes, one
// subtest per rule. Cases run in parallel, each in its own directory.
func Run(t *testing.T, target Target) {
	t.Helper()
	if target.New == nil || target.Read == nil {
		t.Fatal("sinktest: Target.New and Target.Read are required")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			t.Log("rule:", c.rule)
			c.run(t, &target)
		})
	}
}

// TestSink runs the conformance suite outside of a test's *testing.T, one case
// after the other, and returns every violation found, each naming its
// case, joined; nil means the sink conforms. As fstest.TestFS, it serves a
// program or a test that wants the failures as a value.
func TestSink(target Target) error {
	if target.New == nil || target.Read == nil {
		return errors.New("sinktest: Target.New and Target.Read are required")
	}
	var errs []error
	for _, c := range cases {
		r := &recorder{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer r.cleanup()
			c.run(r, &target) // Fatalf and Skip end this goroutine
		}()
		<-done
		for _, msg := range r.failures() {
			errs = append(errs, fmt.Errorf("sinktest: %s: %s", c.name, msg))
		}
	}
	return errors.Join(errs...)
}

// tb is what the cases need of a *testing.T; Test supplies a recorder.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Context() context.Context
	TempDir() string
}

// recorder is a tb that collects failures.
type recorder struct {
	mu   sync.Mutex
	msgs []string
	dirs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skip(...any) { runtime.Goexit() }

func (r *recorder) Context() context.Context { return context.Background() }

func (r *recorder) TempDir() string {
	dir, err := os.MkdirTemp("", "sinktest-")
	if err != nil {
		r.Fatalf("TempDir: %v", err)
	}
	r.mu.Lock()
	r.dirs = append(r.dirs, dir)
	r.mu.Unlock()
	return dir
}

func (r *recorder) cleanup() {
	for _, d := range r.dirs {
		os.RemoveAll(d)
	}
}

func (r *recorder) failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msgs
}

var cases = []testCase{
	{
		name: "ZeroRecord",
		rule: "a record with every field at its zero value but Schema (which the engine always sets, and a reader may check) round-trips",
		run: func(t tb, h *Target) {
			roundTrip(t, h, []sink.Record{{Schema: sink.SchemaVersion}})
		},
	},
	{
		name: "AllFields",
		rule: "every field of Record round-trips",
		run: func(t tb, h *Target) {
			roundTrip(t, h, []sink.Record{full(0), full(1), full(2)})
		},
	},
	{
		name: "SparseRecords",
		rule: "optional fields (maps, input, output, error…) absent in one record and present in the next do not leak between records",
		run: func(t tb, h *Target) {
			a, b := full(0), full(1)
			b.Scores, b.Tags, b.Input, b.Output, b.Error, b.ErrorKind, b.Reason, b.Transcript = nil, nil, nil, nil, "", "", "", ""
			b.ParentRunID, b.ReusedFrom, b.Worker, b.TraceID, b.SpanID = "", "", "", "", ""
			b.JudgeStages = ""
			b.ErrorSource, b.JudgeInputTokens, b.JudgeOutputTokens, b.JudgeCostUSD, b.Model, b.JudgeModel = "", 0, 0, 0, "", ""
			b.SimulatorInputTokens, b.SimulatorOutputTokens, b.SimulatorCostUSD, b.SimulatorModel = 0, 0, 0, ""
			b.Variant, b.Resources, b.CallsReplayed, b.ReplayDivergedAt = "", "", 0, 0
			// The optional strings after seed, one at a time.
			c, d, e := full(3), full(4), full(5)
			c.ParentRunID, c.ReusedFrom, c.TraceID = "", "", ""
			d.Worker, d.SpanID = "", ""
			e.ParentRunID, e.ReusedFrom, e.Worker, e.TraceID = "", "", "", ""
			// The usage by role and the models, one at a time.
			c.JudgeInputTokens, c.Model = 0, ""
			d.JudgeOutputTokens, d.JudgeCostUSD, d.JudgeModel = 0, 0, ""
			c.SimulatorInputTokens, d.SimulatorModel, e.SimulatorCostUSD = 0, "", 0
			e.ErrorSource, c.JudgeStages = "", ""
			// The variant, the resources and the replay counts, one at a time.
			c.Variant, d.Resources, e.CallsReplayed, c.ReplayDivergedAt = "", "", 0, 0
			roundTrip(t, h, []sink.Record{a, b, full(2), c, d, e, {Schema: sink.SchemaVersion, SampleID: "only-id"}})
		},
	},
	{
		name: "Unicode",
		rule: "valid Unicode round-trips byte for byte in strings and map keys and values: CJK, emoji (incl. ZWJ sequences and flags), combining marks, RTL, control characters, NUL, <>&, quotes, backslashes, U+2028/U+2029",
		run: func(t tb, h *Target) {
			var recs []sink.Record
			for i, s := range unicodeStrings {
				r := full(i)
				r.RunID, r.Eval, r.SampleID, r.Reason, r.Error, r.Transcript, r.ParentRunID = s, s, s+strconv.Itoa(i), s, s, s, s
				r.ReusedFrom, r.Worker, r.TraceID, r.SpanID = s, s, s, s
				r.ErrorSource, r.JudgeStages, r.Model, r.JudgeModel, r.SimulatorModel = s, s, s, s, s
				r.Variant, r.Resources = s, s
				r.Scores = map[string]float64{s: 0.5, "plain": 1}
				r.Tags = map[string]string{s: s, "k": s}
				r.Output = mustJSON(t, map[string]string{"text": s})
				recs = append(recs, r)
			}
			roundTrip(t, h, recs)
		},
	},
	{
		name: "InvalidUTF8",
		rule: "invalid UTF-8 in strings and map keys and values is handled as the target declares: replaced byte by byte with U+FFFD (as encoding/json) or kept",
		run: func(t tb, h *Target) {
			bad := []string{"\xff", "a\xffb", "\xc3\x28", "\xe2\x82", "ok\xed\xa0\x80surrogate", "\xf0\x9f\x98"}
			var recs, want []sink.Record
			for i, s := range bad {
				r := full(i)
				r.SampleID = fmt.Sprintf("s%d", i)
				r.RunID, r.Reason, r.Error, r.Transcript = s, s, s, s
				r.ParentRunID, r.ReusedFrom, r.Worker, r.TraceID, r.SpanID = s, s, s, s, s
				r.Scores = map[string]float64{s: 1}
				r.Tags = map[string]string{s: s}
				recs = append(recs, r)
				if h.InvalidUTF8 == InvalidUTF8Replaced {
					v := replaced(s)
					r.RunID, r.Reason, r.Error, r.Transcript = v, v, v, v
					r.ParentRunID, r.ReusedFrom, r.Worker, r.TraceID, r.SpanID = v, v, v, v, v
					r.Scores = map[string]float64{v: 1}
					r.Tags = map[string]string{v: v}
				}
				want = append(want, r)
			}
			check(t, h, write(t, h, recs), want)
		},
	},
	{
		name: "LargePayload",
		rule: "large values round-trip whole: a 1 MB output, a 1 MB reason, a 256 KB input, a map of 1,000 keys",
		run: func(t tb, h *Target) {
			r := full(0)
			r.Output = mustJSON(t, map[string]string{"text": strings.Repeat("abcdefghij😀", 1<<20/14)})
			r.Reason = strings.Repeat("r", 1<<20)
			r.Input = mustJSON(t, slices.Repeat([]int{1, 22, 333}, 256<<10/12))
			r.Tags = map[string]string{}
			r.Scores = map[string]float64{}
			for i := range 1000 {
				r.Tags[fmt.Sprintf("tag-%04d", i)] = strings.Repeat("v", i%37)
				r.Scores[fmt.Sprintf("score-%04d", i)] = float64(i) / 1000
			}
			if len(r.Output) < 1<<20 {
				t.Fatalf("sinktest: output is %d bytes, want ≥ 1 MB", len(r.Output))
			}
			roundTrip(t, h, []sink.Record{full(1), r, full(2)})
		},
	},
	{
		name: "Maps",
		rule: "maps round-trip with every key (several keys, the empty key, unicode keys, empty values); an empty map and a nil map are equivalent",
		run: func(t tb, h *Target) {
			a := full(0)
			a.Scores = map[string]float64{"": 0, "a": 1, "b": 0.25, "é": -1, "z": 1e-300, "big": 1e300, "neg0": math.Copysign(0, -1)}
			a.Tags = map[string]string{"": "empty-key", "empty-value": "", "difficulty": "hard", "repo": "x/y", "日本": "語"}
			b := full(1)
			b.Scores, b.Tags = map[string]float64{}, map[string]string{}
			roundTrip(t, h, []sink.Record{a, b})
		},
	},
	{
		name: "Floats",
		rule: "finite floats round-trip exactly: extremes, subnormals, negative zero, integers above 2^53",
		run: func(t tb, h *Target) {
			vals := []float64{0, 1, -1, 0.1, 1.0 / 3, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1e-7, 1e21, 1e-300, 9007199254740993, 123456789.123456789}
			var recs []sink.Record
			for i, v := range vals {
				r := full(i)
				r.Score, r.Weight, r.DurationMS, r.CostUSD = v, v, v, v
				r.Scores = map[string]float64{"v": v}
				recs = append(recs, r)
			}
			roundTrip(t, h, recs)
		},
	},
	{
		name: "Integers",
		rule: "integers round-trip at their extremes: max int64 tokens, max uint64 seed, negative epochs and attempts",
		run: func(t tb, h *Target) {
			a, b := full(0), full(1)
			a.InputTokens, a.OutputTokens, a.Seed, a.Epoch, a.Attempt, a.Schema = math.MaxInt64, math.MinInt64, math.MaxUint64, math.MaxInt32, math.MaxInt32, 1
			b.InputTokens, b.OutputTokens, b.Seed, b.Epoch, b.Attempt = -1, 0, 1<<63, -1, -7
			roundTrip(t, h, []sink.Record{a, b})
		},
	},
	{
		name: "NonFinite",
		rule: "NaN and ±Inf in float fields are handled as the target declares: kept, written as null and read back as 0, or rejected by Write with an error while the sink keeps working",
		run:  testNonFinite,
	},
	{
		name: "Timestamps",
		rule: "StartedAt round-trips as an instant at the declared precision (truncated): nanoseconds, before 1970, the zero time, far future, any zone",
		run: func(t tb, h *Target) {
			times := []time.Time{
				time.Date(2025, 6, 1, 12, 34, 56, 123456789, time.UTC),
				time.Date(2025, 6, 1, 12, 34, 56, 999999999, time.UTC),
				time.Date(1969, 12, 31, 23, 59, 59, 987654321, time.UTC),
				time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC),
				{},
				time.Unix(0, 0),
				time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
				time.Date(2024, 2, 29, 1, 2, 3, 4000, time.FixedZone("UTC+5:30", 5*3600+1800)),
				time.Now(), // with a monotonic reading
			}
			var recs []sink.Record
			for i, ts := range times {
				r := full(i)
				r.StartedAt = ts
				recs = append(recs, r)
			}
			roundTrip(t, h, recs)
		},
	},
	{
		name: "RawJSON",
		rule: "input and output hold any JSON value (object, array, string, number, true, false, null) and round-trip as equal JSON; a sink may compact insignificant whitespace",
		run: func(t tb, h *Target) {
			docs := []string{`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, `[1,2.5,-3e10]`, `"just a string"`, `42`, `true`, `false`, `null`, `{}`, `[]`, `{"html":"<a href=\"x\">&</a>","u":"\u2028 é 😀"}`, "{\n  \"pretty\": [\n    1,\n    2\n  ]\n}"}
			var recs []sink.Record
			for i, d := range docs {
				r := full(i)
				r.Input, r.Output = json.RawMessage(d), json.RawMessage(d)
				recs = append(recs, r)
			}
			roundTrip(t, h, recs)
		},
	},
	{
		name: "CallerReusesMaps",
		rule: "Write does not keep the record's maps or slices: the caller may change them after Write returns",
		run: func(t tb, h *Target) {
			r := full(0)
			scores, tags, out := r.Scores, r.Tags, []byte(`{"answer":"first"}`)
			r.Output = out
			want := []sink.Record{clone(r)}
			s, dir := newSink(t, h)
			ctx := t.Context()
			if err := s.Write(ctx, r); err != nil {
				t.Fatalf("Write: %v", err)
			}
			clear(scores)
			scores["changed"] = 9
			clear(tags)
			tags["changed"] = "yes"
			copy(out, `{"answer":"XXXXX"}`)
			r.SampleID = "second"
			want = append(want, clone(r))
			if err := s.Write(ctx, r); err != nil {
				t.Fatalf("Write: %v", err)
			}
			closeSink(t, s, ctx)
			check(t, h, dir, want)
		},
	},
	{
		name: "EmptyRun",
		rule: "a sink closed without any Write leaves a valid, readable result with zero records",
		run: func(t tb, h *Target) {
			check(t, h, write(t, h, nil), nil)
		},
	},
	{
		name: "WriteAfterClose",
		rule: "Write after Close returns an error wrapping sink.ErrClosed and stores nothing",
		run: func(t tb, h *Target) {
			s, dir := newSink(t, h)
			ctx := t.Context()
			if err := s.Write(ctx, full(0)); err != nil {
				t.Fatalf("Write: %v", err)
			}
			closeSink(t, s, ctx)
			err := s.Write(ctx, full(1))
			if !errors.Is(err, sink.ErrClosed) {
				t.Fatalf("Write after Close = %v, want an error wrapping sink.ErrClosed", err)
			}
			check(t, h, dir, []sink.Record{full(0)})
		},
	},
	{
		name: "CloseCanceledContext",
		rule: "Close flushes every written record even when its context is canceled (the engine closes sinks after a cancel)",
		run: func(t tb, h *Target) {
			s, dir := newSink(t, h)
			var want []sink.Record
			for i := range 100 {
				want = append(want, full(i))
				if err := s.Write(t.Context(), want[i]); err != nil {
					t.Fatalf("Write: %v", err)
				}
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if err := s.Close(ctx); err != nil {
				t.Fatalf("Close with a canceled context: %v", err)
			}
			check(t, h, dir, want)
		},
	},
	{
		name: "CloseTwice",
		rule: "closing twice is safe: the second Close returns nil and changes nothing",
		run: func(t tb, h *Target) {
			s, dir := newSink(t, h)
			ctx := t.Context()
			if err := s.Write(ctx, full(0)); err != nil {
				t.Fatalf("Write: %v", err)
			}
			closeSink(t, s, ctx)
			if err := s.Close(ctx); err != nil {
				t.Fatalf("second Close = %v, want nil", err)
			}
			check(t, h, dir, []sink.Record{full(0)})
		},
	},
	{
		name: "ManyRecords",
		rule: "many records (200,000 by default) are all stored, once each, in write order",
		run: func(t tb, h *Target) {
			n := h.Many
			if n == 0 {
				n = 200_000
				if testing.Testing() && testing.Short() {
					n = 10_000
				}
			}
			s, dir := newSink(t, h)
			ctx := t.Context()
			for i := range n {
				if err := s.Write(ctx, many(i)); err != nil {
					t.Fatalf("Write %d: %v", i, err)
				}
			}
			closeSink(t, s, ctx)
			got := read(t, h, dir)
			if len(got) != n {
				t.Fatalf("read %d records, want %d", len(got), n)
			}
			opts := h.cmpOptions()
			for i := range got {
				want := h.normalize(many(i))
				if quickEqual(&want, &got[i]) {
					continue // cmp is exact but too slow for 200,000 records
				}
				if diff := cmp.Diff(want, got[i], opts...); diff != "" {
					t.Fatalf("record %d mismatch (-want +got):\n%s", i, diff)
				}
			}
		},
	},
	{
		name: "ConcurrentWrites",
		rule: "a sink documented as safe for concurrent use stores every record written from many goroutines, once each (skipped unless Target.Concurrent)",
		run: func(t tb, h *Target) {
			if !h.Concurrent {
				t.Skip("the sink is not documented as safe for concurrent use")
			}
			s, dir := newSink(t, h)
			const writers, each = 8, 500
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						if err := s.Write(t.Context(), many(w*each+i)); err != nil {
							t.Errorf("Write: %v", err)
							return
						}
					}
				})
			}
			wg.Wait()
			closeSink(t, s, t.Context())
			got := read(t, h, dir)
			slices.SortFunc(got, func(a, b sink.Record) int { return strings.Compare(a.SampleID, b.SampleID) })
			var want []sink.Record
			for i := range writers * each {
				want = append(want, h.normalize(many(i)))
			}
			slices.SortFunc(want, func(a, b sink.Record) int { return strings.Compare(a.SampleID, b.SampleID) })
			if diff := cmp.Diff(want, got, h.cmpOptions()...); diff != "" {
				t.Fatalf("records mismatch (-want +got):\n%s", diff)
			}
		},
	},
}

func testNonFinite(t tb, h *Target) {
	nonFinite := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	var recs []sink.Record
	for i, v := range nonFinite {
		r := full(i)
		r.Score, r.Weight, r.DurationMS, r.CostUSD = v, v, v, v
		r.Scores = map[string]float64{"bad": v, "good": 0.5}
		recs = append(recs, r)
	}
	s, dir := newSink(t, h)
	ctx := t.Context()
	var want []sink.Record
	ok := full(10)
	for _, r := range recs {
		err := s.Write(ctx, r)
		switch h.NonFinite {
		case NonFiniteRejected:
			if err == nil {
				t.Errorf("Write(score %v) = nil, want an error (the target declares NonFiniteRejected)", r.Score)
			}
		default:
			if err != nil {
				t.Errorf("Write(score %v): %v", r.Score, err)
			}
			if h.NonFinite == NonFiniteZero {
				r = clone(r)
				r.Score, r.Weight, r.DurationMS, r.CostUSD = 0, 0, 0, 0
				r.Scores["bad"] = 0
			}
			want = append(want, r)
		}
		// The sink keeps working after each of them.
		if err := s.Write(ctx, ok); err != nil {
			t.Fatalf("Write of a finite record after a non-finite one: %v", err)
		}
		want = append(want, ok)
	}
	closeSink(t, s, ctx)
	check(t, h, dir, want)
}

// unicodeStrings are valid UTF-8 strings that a sink must keep exactly.
var unicodeStrings = []string{
	"héllo wörld",
	"日本語のテキスト",
	"emoji 😀🎉 family 👨‍👩‍👧‍👦 flag 🇫🇷 skin 👍🏽",
	"combining e\u0301 a\u0308",
	"RTL עברית العربية",
	"control \x00 \x01 \b \f \n \r \t \x1f \x7f end",
	`<script>alert("&amp;")</script>`,
	`quotes " and \ backslash \\ and \u0041`,
	"separators \u2028 \u2029 end",
	"BOM \ufeff and U+FFFD \ufffd and max \U0010FFFF",
	"",
}

// full returns a record with every field set, distinct for each i.
func full(i int) sink.Record {
	return sink.Record{
		Schema:                sink.SchemaVersion,
		RunID:                 "run-2025-06-01",
		Eval:                  "swe-mini",
		Variant:               []string{"gpt-4o/plain", "claude-sonnet-4/react"}[i%2],
		SampleID:              fmt.Sprintf("sample-%06d", i),
		Epoch:                 i % 3,
		Attempt:               i % 2,
		Status:                []sink.Status{sink.Pass, sink.Fail, sink.Error, sink.Unscored}[i%4],
		Score:                 float64(i%10) / 10,
		Scores:                map[string]float64{"correct": float64(i % 2), "style": 0.75},
		Weight:                1.5,
		Reason:                "the answer matches the reference",
		Error:                 fmt.Sprintf("error %d", i),
		ErrorKind:             []sink.ErrorKind{sink.KindTimeout, sink.KindPanic, sink.KindSandbox, sink.KindHarness, sink.KindJudge, sink.KindCancelled, sink.KindLimit}[i%7],
		ErrorSource:           []string{"judge/cascade.expensive/rubric", "harness", "sandbox"}[i%3],
		JudgeStages:           fmt.Sprintf("judge/cascade.cheap=1/1,judge/cascade.expensive/rubric=%d/%d", 1+i%3, i%2),
		Input:                 json.RawMessage(fmt.Sprintf(`{"question":"what is %d+%d?","answer":%d}`, i, i, 2*i)),
		Output:                json.RawMessage(fmt.Sprintf(`{"answer":%d,"steps":["think","answer"]}`, 2*i)),
		Tags:                  map[string]string{"difficulty": []string{"easy", "medium", "hard"}[i%3], "repo": "proctor-evals/proctor"},
		StartedAt:             time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * 1234567891 * time.Nanosecond),
		DurationMS:            1234.5 + float64(i),
		InputTokens:           int64(1000 + i),
		OutputTokens:          int64(200 + i),
		CostUSD:               0.0123 * float64(i+1),
		JudgeInputTokens:      int64(300 + i),
		JudgeOutputTokens:     int64(40 + i),
		JudgeCostUSD:          0.0021 * float64(i+1),
		Model:                 []string{"gpt-4o-2024-08-06", "claude-sonnet-4"}[i%2],
		JudgeModel:            "gpt-4o-mini",
		SimulatorInputTokens:  int64(150 + i),
		SimulatorOutputTokens: int64(30 + i),
		SimulatorCostUSD:      0.0007 * float64(i+1),
		SimulatorModel:        "claude-haiku-4",
		Resources:             fmt.Sprintf("cpus=2 memory=%dMiB image=swe:%d@sha256:%064x", 512*(1+i%4), i%3, i),
		CallsReplayed:         i % 5,
		ReplayDivergedAt:      (i % 3) * (1 + i%5),
		Seed:                  uint64(i)*0x9E3779B97F4A7C15 + 1,
		Transcript:            fmt.Sprintf("file:///traces/run-2025-06-01/sample-%06d.jsonl", i),
		ParentRunID:           []string{"", "run-2025-05-01"}[i%2],
		ReusedFrom:            fmt.Sprintf("run-2025-05-%02d", 1+i%28),
		Worker:                fmt.Sprintf("worker-%d.cluster.local:%d", i%4, 40000+i),
		TraceID:               fmt.Sprintf("%032x", uint64(i)*0x9E3779B97F4A7C15+1),
		SpanID:                fmt.Sprintf("%016x", uint64(i)*0xBF58476D1CE4E5B9+1),
	}
}

// many returns a small realistic record for the bulk cases.
func many(i int) sink.Record {
	r := sink.Record{
		Schema:       sink.SchemaVersion,
		RunID:        "run-many",
		Eval:         "bulk",
		SampleID:     fmt.Sprintf("s%09d", i),
		Epoch:        i % 5,
		Status:       sink.Pass,
		Score:        1,
		Tags:         map[string]string{"k": strconv.Itoa(i % 7)},
		Output:       json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`),
		StartedAt:    time.Unix(1_750_000_000, int64(i)*1001),
		DurationMS:   float64(i) / 8,
		InputTokens:  int64(i),
		OutputTokens: int64(2 * i),
		Seed:         uint64(i),
	}
	if i%10 == 9 {
		r.Status, r.Score, r.Error, r.ErrorKind = sink.Error, 0, "boom", sink.KindHarness
	}
	// The fields of a distributed, traced run, on some records only.
	if i%3 == 0 {
		r.Worker = "w" + strconv.Itoa(i%4) + ":1"
		r.TraceID, r.SpanID = fmt.Sprintf("%032x", i), fmt.Sprintf("%016x", i)
	}
	if i%7 == 0 {
		r.ReusedFrom = "run-before"
	}
	return r
}

// clone returns a deep copy of r.
func clone(r sink.Record) sink.Record {
	r.Scores = cloneMap(r.Scores)
	r.Tags = cloneMap(r.Tags)
	r.Input = bytes.Clone(r.Input)
	r.Output = bytes.Clone(r.Output)
	return r
}

func cloneMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return nil
	}
	c := make(map[string]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// replaced is s with each byte of an invalid UTF-8 sequence replaced by
// U+FFFD, as encoding/json does.
func replaced(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

func mustJSON(t tb, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return b
}

func newSink(t tb, h *Target) (sink.Sink, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := h.New(dir)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if s == nil {
		t.Fatalf("sinktest: Target.New returned nil")
	}
	return s, dir
}

func closeSink(t tb, s sink.Sink, ctx context.Context) {
	t.Helper()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// read reads back what the closed sink wrote into dir.
func read(t tb, h *Target, dir string) []sink.Record {
	t.Helper()
	recs, err := h.Read(dir)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return recs
}

// write writes recs to a fresh sink, closes it and returns its directory.
func write(t tb, h *Target, recs []sink.Record) string {
	t.Helper()
	s, dir := newSink(t, h)
	ctx := t.Context()
	for i, r := range recs {
		if err := s.Write(ctx, r); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	closeSink(t, s, ctx)
	return dir
}

// roundTrip writes recs and checks that they read back as written (at the
// target's declared precision).
func roundTrip(t tb, h *Target, recs []sink.Record) {
	t.Helper()
	check(t, h, write(t, h, recs), recs)
}

// check reads dir back and compares it with want.
func check(t tb, h *Target, dir string, want []sink.Record) {
	t.Helper()
	got := read(t, h, dir)
	if len(want) == 0 && len(got) == 0 {
		return
	}
	norm := make([]sink.Record, len(want))
	for i, r := range want {
		norm[i] = h.normalize(r)
	}
	if diff := cmp.Diff(norm, got, h.cmpOptions()...); diff != "" {
		t.Errorf("records read back differ from those written (-want +got):\n%s", diff)
	}
}

// normalize returns what a conforming sink reads back for r: its timestamp
// truncated to the declared precision.
func (h *Target) normalize(r sink.Record) sink.Record {
	if h.TimePrecision > 0 {
		r.StartedAt = r.StartedAt.Truncate(h.TimePrecision)
	}
	return r
}

// cmpOptions compare records as a conforming sink keeps them: empty and nil
// maps and raw messages alike, NaN equal to NaN, timestamps as instants
// (time.Time.Equal, which cmp uses), JSON documents by their value (so
// that a sink may compact or re-escape them; numbers keep their text).
func (h *Target) cmpOptions() []cmp.Option {
	return []cmp.Option{
		// Only the record's maps: raw messages go through jsonValue.
		cmp.FilterPath(func(p cmp.Path) bool {
			t := p.Last().Type()
			return t == reflect.TypeFor[map[string]float64]() || t == reflect.TypeFor[map[string]string]()
		}, cmpopts.EquateEmpty()),
		cmpopts.EquateNaNs(),
		cmp.Transformer("jsonValue", jsonValue),
	}
}

// quickEqual reports whether a and b are certainly equal under cmpOptions;
// false means "compare them with cmp".
func quickEqual(a, b *sink.Record) bool {
	return a.Schema == b.Schema && a.RunID == b.RunID && a.Eval == b.Eval && a.SampleID == b.SampleID &&
		a.Epoch == b.Epoch && a.Attempt == b.Attempt && a.Status == b.Status && a.Score == b.Score &&
		maps.Equal(a.Scores, b.Scores) && a.Weight == b.Weight && a.Reason == b.Reason && a.Error == b.Error &&
		a.ErrorKind == b.ErrorKind && bytes.Equal(a.Input, b.Input) && bytes.Equal(a.Output, b.Output) &&
		maps.Equal(a.Tags, b.Tags) && a.StartedAt.Equal(b.StartedAt) && a.DurationMS == b.DurationMS &&
		a.InputTokens == b.InputTokens && a.OutputTokens == b.OutputTokens && a.CostUSD == b.CostUSD &&
		a.Seed == b.Seed && a.Transcript == b.Transcript && a.ParentRunID == b.ParentRunID &&
		a.ReusedFrom == b.ReusedFrom && a.Worker == b.Worker && a.TraceID == b.TraceID && a.SpanID == b.SpanID &&
		a.ErrorSource == b.ErrorSource && a.JudgeStages == b.JudgeStages && a.JudgeInputTokens == b.JudgeInputTokens && a.JudgeOutputTokens == b.JudgeOutputTokens &&
		a.JudgeCostUSD == b.JudgeCostUSD && a.Model == b.Model && a.JudgeModel == b.JudgeModel &&
		a.SimulatorInputTokens == b.SimulatorInputTokens && a.SimulatorOutputTokens == b.SimulatorOutputTokens &&
		a.SimulatorCostUSD == b.SimulatorCostUSD && a.SimulatorModel == b.SimulatorModel &&
		a.Variant == b.Variant && a.Resources == b.Resources && a.CallsReplayed == b.CallsReplayed &&
		a.ReplayDivergedAt == b.ReplayDivergedAt
}

// absentJSON is the value of an empty raw message, distinct from null.
type absentJSON struct{}

// jsonValue decodes a JSON document for comparison; an invalid one
// compares as its bytes.
func jsonValue(m json.RawMessage) any {
	if len(m) == 0 {
		return absentJSON{}
	}
	dec := json.NewDecoder(bytes.NewReader(m))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return "invalid JSON: " + string(m)
	}
	return v
}
