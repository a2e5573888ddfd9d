package sink_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
)

// recorder is a sink that keeps what it is given and fails on demand.
type recorder struct {
	got      []sink.Record
	closed   int
	writeErr error
	closeErr error
}

func (r *recorder) Write(_ context.Context, rec sink.Record) error {
	if r.writeErr != nil {
		return r.writeErr
	}
	r.got = append(r.got, rec)
	return nil
}

func (r *recorder) Close(context.Context) error {
	r.closed++
	return r.closeErr
}

func TestMulti(t *testing.T) {
	t.Parallel()
	errA, errB := errors.New("a failed"), errors.New("b failed")
	ok1, bad1, ok2, bad2 := &recorder{}, &recorder{writeErr: errA, closeErr: errA}, &recorder{}, &recorder{writeErr: errB, closeErr: errB}
	sinks := []sink.Sink{ok1, bad1, ok2, bad2}
	m := sink.Multi(sinks...)
	sinks[0] = sink.Discard // Multi keeps its own copy of the list

	ctx := t.Context()
	r1, r2 := sink.Record{SampleID: "1"}, sink.Record{SampleID: "2"}
	err := m.Write(ctx, r1)
	require.ErrorIs(t, err, errA)
	require.ErrorIs(t, err, errB)
	require.Error(t, m.Write(ctx, r2))

	// A failing sink does not stop the ones after it.
	require.Equal(t, []sink.Record{r1, r2}, ok1.got)
	require.Equal(t, []sink.Record{r1, r2}, ok2.got)

	err = m.Close(ctx)
	require.ErrorIs(t, err, errA)
	require.ErrorIs(t, err, errB)
	for _, r := range []*recorder{ok1, bad1, ok2, bad2} {
		require.Equal(t, 1, r.closed)
	}
}

func TestMultiAllOK(t *testing.T) {
	t.Parallel()
	a, b := &recorder{}, &recorder{}
	m := sink.Multi(a, b)
	require.NoError(t, m.Write(t.Context(), sink.Record{SampleID: "x"}))
	require.NoError(t, m.Close(t.Context()))
	require.Len(t, a.got, 1)
	require.Len(t, b.got, 1)

	empty := sink.Multi()
	require.NoError(t, empty.Write(t.Context(), sink.Record{}))
	require.NoError(t, empty.Close(t.Context()))
}

func TestDiscard(t *testing.T) {
	t.Parallel()
	require.NoError(t, sink.Discard.Write(t.Context(), sink.Record{SampleID: "x"}))
	require.NoError(t, sink.Discard.Close(t.Context()))
	require.NoError(t, sink.Discard.Close(t.Context()))
}

// plainRecord is sink.Record without its MarshalJSON method: what
// encoding/json writes for the same fields and tags.
type plainRecord struct {
	Schema                int                `json:"schema"`
	RunID                 string             `json:"run_id"`
	Eval                  string             `json:"eval"`
	Variant               string             `json:"variant,omitempty"`
	SampleID              string             `json:"sample_id"`
	Epoch                 int                `json:"epoch"`
	Attempt               int                `json:"attempt"`
	Status                sink.Status        `json:"status"`
	Score                 float64            `json:"score"`
	Scores                map[string]float64 `json:"scores,omitempty"`
	Weight                float64            `json:"weight,omitempty"`
	Reason                string             `json:"reason,omitempty"`
	Error                 string             `json:"error,omitempty"`
	ErrorKind             sink.ErrorKind     `json:"error_kind,omitempty"`
	ErrorSource           string             `json:"error_source,omitempty"`
	JudgeStages           string             `json:"judge_stages,omitempty"`
	Input                 json.RawMessage    `json:"input,omitempty"`
	Output                json.RawMessage    `json:"output,omitempty"`
	Tags                  map[string]string  `json:"tags,omitempty"`
	StartedAt             time.Time          `json:"started_at"`
	DurationMS            float64            `json:"duration_ms"`
	InputTokens           int64              `json:"input_tokens"`
	OutputTokens          int64              `json:"output_tokens"`
	CostUSD               float64            `json:"cost_usd"`
	JudgeInputTokens      int64              `json:"judge_input_tokens,omitempty"`
	JudgeOutputTokens     int64              `json:"judge_output_tokens,omitempty"`
	JudgeCostUSD          float64            `json:"judge_cost_usd,omitempty"`
	Model                 string             `json:"model,omitempty"`
	JudgeModel            string             `json:"judge_model,omitempty"`
	SimulatorInputTokens  int64              `json:"simulator_input_tokens,omitempty"`
	SimulatorOutputTokens int64              `json:"simulator_output_tokens,omitempty"`
	SimulatorCostUSD      float64            `json:"simulator_cost_usd,omitempty"`
	SimulatorModel        string             `json:"simulator_model,omitempty"`
	Resources             string             `json:"resources,omitempty"`
	CallsReplayed         int                `json:"calls_replayed,omitempty"`
	ReplayDivergedAt      int                `json:"replay_diverged_at,omitempty"`
	Seed                  uint64             `json:"seed"`
	Transcript            string             `json:"trace,omitempty"`
	ParentRunID           string             `json:"parent_run_id,omitempty"`
	ReusedFrom            string             `json:"reused_from,omitempty"`
	Worker                string             `json:"worker,omitempty"`
	TraceID               string             `json:"trace_id,omitempty"`
	SpanID                string             `json:"span_id,omitempty"`
}

// TestPlainRecordMirrorsRecord guards the mirror: the same fields, in the
// same order, with the same tags.
func TestPlainRecordMirrorsRecord(t *testing.T) {
	t.Parallel()
	var r sink.Record
	require.True(t, json.Valid(r.AppendJSON(nil)))
	require.Equal(t, sink.Record(plainRecord{}), r) // a conversion: identical field lists
}

func fullRecord() sink.Record {
	return sink.Record{
		Schema: sink.SchemaVersion, RunID: "run-1", Eval: "e", SampleID: "s-1", Epoch: 2, Attempt: 1,
		Status: sink.Fail, Score: 0.25, Scores: map[string]float64{"b": 2, "a": 1, "c": 0.5},
		Weight: 3, Reason: "because", Error: "boom", ErrorKind: sink.KindJudge,
		Input: json.RawMessage(`{"q":1}`), Output: json.RawMessage(`[1,"two",null]`),
		Tags:      map[string]string{"z": "last", "a": "first", "m": ""},
		StartedAt: time.Date(2025, 6, 1, 12, 34, 56, 789012345, time.UTC), DurationMS: 1234.5,
		ErrorSource: "judge/cascade.expensive/rubric", JudgeInputTokens: 30, JudgeOutputTokens: 5, JudgeCostUSD: 0.0011,
		Model: "gpt-4o", JudgeModel: "gpt-4o-mini",
		SimulatorInputTokens: 40, SimulatorOutputTokens: 9, SimulatorCostUSD: 0.0007, SimulatorModel: "claude-haiku",
		Variant: "v", Resources: "cpus=1", CallsReplayed: 3, ReplayDivergedAt: 4,
		InputTokens: 100, OutputTokens: 20, CostUSD: 0.0042, Seed: math.MaxUint64, Transcript: "file:///t/1",
		ParentRunID: "run-0", ReusedFrom: "run-prev", Worker: "host-a:4242",
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
	}
}

// TestAppendJSON checks that AppendJSON writes the very document
// encoding/json writes for the same fields, and that it decodes back into
// an equal Record.
func TestAppendJSON(t *testing.T) {
	t.Parallel()
	str := func(s string) func(*sink.Record) {
		return func(r *sink.Record) {
			r.RunID, r.Reason, r.Error, r.Transcript = s, s, s, s
			r.ParentRunID, r.ReusedFrom, r.Worker, r.TraceID, r.SpanID = s, s, s, s, s
			r.Tags = map[string]string{s: s}
			r.Scores = map[string]float64{s: 1}
		}
	}
	flt := func(f float64) func(*sink.Record) {
		return func(r *sink.Record) {
			r.Score, r.Weight, r.DurationMS, r.CostUSD = f, f, f, f
			r.Scores = map[string]float64{"f": f}
		}
	}
	cases := []struct {
		name string
		edit func(*sink.Record)
		// lossy: the decoded record differs from the written one in a
		// documented way (invalid UTF-8 replaced, location dropped…).
		lossy bool
	}{
		{name: "Zero", edit: func(r *sink.Record) { *r = sink.Record{} }},
		{name: "Full", edit: func(*sink.Record) {}},
		{name: "Unicode", edit: str("héllo 日本語 emoji 😀 👨‍👩‍👧 flag 🇫🇷 e\u0301")},
		{name: "ControlChars", edit: str("nul\x00 soh\x01 tab\t nl\n cr\r us\x1f del\x7f")},
		{name: "BackspaceFormFeed", edit: str("bs\b ff\f")},
		{name: "HTML", edit: str(`<script>"x" & 'y'</script>`)},
		{name: "QuotesBackslashes", edit: str(`"q" \ \\ \u0041 /`)},
		{name: "LineSeparators", edit: str("ls\u2028 ps\u2029")},
		{name: "InvalidUTF8", edit: str("bad\xff \xc3\x28 \xe2\x82 \xed\xa0\x80 end\xf0"), lossy: true},
		{name: "RuneErrorItself", edit: str("\ufffd")},
		{name: "EmptyStrings", edit: str("")},
		{name: "BigFloat", edit: flt(1e300)},
		{name: "AtE21", edit: flt(1e21)},
		{name: "BelowE21", edit: flt(999999999999999999999.0 / 10)},
		{name: "SmallFloat", edit: flt(1e-300)},
		{name: "E-7", edit: flt(1e-7)},
		{name: "E-6", edit: flt(1e-6)},
		{name: "Subnormal", edit: flt(math.SmallestNonzeroFloat64)},
		{name: "MaxFloat", edit: flt(-math.MaxFloat64)},
		{name: "NegativeZero", edit: flt(math.Copysign(0, -1))},
		{name: "Third", edit: flt(1.0 / 3)},
		{name: "Integral", edit: flt(42)},
		{name: "EmptyMaps", edit: func(r *sink.Record) { r.Scores, r.Tags = map[string]float64{}, map[string]string{} }},
		{name: "NilMaps", edit: func(r *sink.Record) { r.Scores, r.Tags = nil, nil }},
		{name: "NilRaw", edit: func(r *sink.Record) { r.Input, r.Output = nil, nil }},
		{name: "EmptyRaw", edit: func(r *sink.Record) { r.Input, r.Output = json.RawMessage{}, json.RawMessage{} }},
		{name: "RawScalars", edit: func(r *sink.Record) { r.Input, r.Output = json.RawMessage(`"s"`), json.RawMessage(`-1.5e3`) }},
		{name: "RawWithHTML", edit: func(r *sink.Record) { r.Output = json.RawMessage(`{"a":"<b>&"}`) }},
		{name: "RawWithWhitespace", edit: func(r *sink.Record) { r.Output = json.RawMessage("{\n  \"a\": [1, 2]\n}") }},
		{name: "ZeroTime", edit: func(r *sink.Record) { r.StartedAt = time.Time{} }},
		{name: "Zone", edit: func(r *sink.Record) {
			r.StartedAt = time.Date(2025, 1, 2, 3, 4, 5, 6, time.FixedZone("", -7*3600))
		}, lossy: true},
		{name: "Extremes", edit: func(r *sink.Record) {
			r.InputTokens, r.OutputTokens, r.Epoch, r.Attempt = math.MaxInt64, math.MinInt64, -1, math.MaxInt32
		}},
		{name: "Statuses", edit: func(r *sink.Record) { r.Status, r.ErrorKind = sink.Unscored, sink.KindCancelled }},
		// The optional fields after seed, each alone: none leaks into
		// another's place.
		{name: "OnlyParentRunID", edit: onlyTail(func(r *sink.Record) { r.ParentRunID = "run-0" })},
		{name: "OnlyReusedFrom", edit: onlyTail(func(r *sink.Record) { r.ReusedFrom = "run-prev" })},
		{name: "OnlyWorker", edit: onlyTail(func(r *sink.Record) { r.Worker = "host-a:4242" })},
		{name: "OnlyTraceID", edit: onlyTail(func(r *sink.Record) { r.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736" })},
		{name: "OnlySpanID", edit: onlyTail(func(r *sink.Record) { r.SpanID = "00f067aa0ba902b7" })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := fullRecord()
			c.edit(&r)
			got := r.AppendJSON(nil)
			want, err := json.Marshal(plainRecord(r))
			require.NoError(t, err)
			if string(got) != string(want) {
				t.Errorf("AppendJSON differs from encoding/json\n got: %s\nwant: %s", got, want)
			}
			// MarshalJSON is AppendJSON, for values and pointers.
			viaMarshal, err := json.Marshal(r)
			require.NoError(t, err)
			require.Equal(t, string(got), string(viaMarshal))
			require.Equal(t, "prefix"+string(got), string(r.AppendJSON([]byte("prefix"))))

			require.True(t, json.Valid(got), "%s", got)
			var back sink.Record
			require.NoError(t, json.Unmarshal(got, &back))
			if c.lossy {
				// Decoding what encoding/json wrote gives the same record.
				var ref sink.Record
				require.NoError(t, json.Unmarshal(want, &ref))
				r = ref
			}
			mapsOnly := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().Type().Kind() == reflect.Map }, cmpopts.EquateEmpty())
			opts := cmp.Options{mapsOnly, cmp.Transformer("compact", func(m json.RawMessage) string {
				var v any
				if json.Unmarshal(m, &v) != nil {
					return string(m)
				}
				b, _ := json.Marshal(v)
				return string(b)
			})}
			if diff := cmp.Diff(r, back, opts); diff != "" {
				t.Errorf("round trip through json.Unmarshal (-want +got):\n%s", diff)
			}
		})
	}
}

// onlyTail clears the optional fields written after seed, then applies
// set.
func onlyTail(set func(*sink.Record)) func(*sink.Record) {
	return func(r *sink.Record) {
		r.Transcript, r.ParentRunID, r.ReusedFrom, r.Worker, r.TraceID, r.SpanID = "", "", "", "", "", ""
		set(r)
	}
}

// TestAppendJSONNonFinite: JSON cannot carry NaN or ±Inf; AppendJSON
// writes null (encoding/json would fail), which decodes as 0.
func TestAppendJSONNonFinite(t *testing.T) {
	t.Parallel()
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		r := fullRecord()
		r.Score, r.Weight, r.DurationMS, r.CostUSD = f, f, f, f
		r.Scores = map[string]float64{"x": f}
		_, err := json.Marshal(plainRecord(r))
		require.Error(t, err)
		got := r.AppendJSON(nil)
		require.True(t, json.Valid(got), "%s", got)
		var back sink.Record
		require.NoError(t, json.Unmarshal(got, &back))
		require.Zero(t, back.Score)
		require.Zero(t, back.DurationMS)
		require.Zero(t, back.CostUSD)
		require.Equal(t, map[string]float64{"x": 0}, back.Scores)
	}
}
