package recordjson

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/proctor-evals/proctor/internal/jsontext"
	"github.com/proctor-evals/proctor/sink"
)

// exactRecord compares records bit for bit: floats by their bits (so -0
// differs from 0), times by instant, location name and offset, nil maps
// and slices apart from empty ones.
var exactRecord = cmp.Options{
	cmp.Comparer(func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }),
	cmp.Comparer(func(a, b time.Time) bool {
		an, ao := a.Zone()
		bn, bo := b.Zone()
		return a.Equal(b) && an == bn && ao == bo && a.Location().String() == b.Location().String()
	}),
}

func benchRecord() sink.Record {
	return sink.Record{
		Schema:       sink.SchemaVersion,
		RunID:        "r-1a2b3c",
		Eval:         "gsm8k",
		SampleID:     "gsm8k-00421",
		Epoch:        2,
		Attempt:      1,
		Status:       sink.Pass,
		Score:        1,
		Input:        json.RawMessage(`{"q":"What is 17 * 23?"}`),
		Output:       json.RawMessage(`{"answer":"391"}`),
		Tags:         map[string]string{"model": "claude-4", "split": "test"},
		StartedAt:    time.Date(2024, 5, 1, 12, 34, 56, 789123000, time.UTC),
		DurationMS:   1834.25,
		InputTokens:  512,
		OutputTokens: 128,
		CostUSD:      0.00342,
		Seed:         1234567890123,
	}
}

func roundTripRecords() []sink.Record {
	full := sink.Record{
		Schema:                sink.SchemaVersion,
		RunID:                 "run \"quoted\" <tag> & \u2028 é 😀",
		Eval:                  "eval\twith\ncontrol\x01chars",
		SampleID:              "s-1",
		Epoch:                 -7,
		Attempt:               3,
		Status:                sink.Fail,
		Score:                 -0.25,
		Scores:                map[string]float64{"exact": 1, "f1": 0.8333333333333334, "tiny": 1e-9, "huge": 1.5e300, "neg": -2},
		Weight:                12.5,
		Reason:                strings.Repeat("long reason \\ ", 40),
		Error:                 "boom",
		ErrorKind:             sink.KindTimeout,
		ErrorSource:           "judge/cascade.expensive/rubric \"é\" <&>",
		Input:                 json.RawMessage(`{"a": [1, 2, {"b": null}], "c": "\u00e9"}`),
		Output:                json.RawMessage(`"plain string"`),
		Tags:                  map[string]string{"model": "m", "": "empty key", "ü": "ünïcode"},
		StartedAt:             time.Date(2024, 5, 1, 12, 34, 56, 123456789, time.FixedZone("", 2*3600)),
		DurationMS:            0.001,
		InputTokens:           math.MaxInt64,
		OutputTokens:          math.MinInt64,
		CostUSD:               1e21,
		JudgeInputTokens:      math.MinInt64,
		JudgeOutputTokens:     math.MaxInt64,
		JudgeCostUSD:          1e-9,
		Model:                 "gpt-4o \u2028",
		JudgeModel:            "claude-<4>",
		SimulatorInputTokens:  math.MaxInt64,
		SimulatorOutputTokens: math.MinInt64,
		SimulatorCostUSD:      2e-9,
		SimulatorModel:        "sim \u2028",
		Variant:               "v \"1\" é",
		Resources:             "cpus=1 memory=1GiB image=x@sha256:ab",
		CallsReplayed:         math.MaxInt32,
		ReplayDivergedAt:      7,
		Seed:                  math.MaxUint64,
		Transcript:            "https://example.com/t?a=1&b=2",
		ParentRunID:           "parent \"run\" é",
		ReusedFrom:            "run-<prev>&\u2028",
		Worker:                "host-\x01:4242",
		TraceID:               "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID:                "00f067aa0ba902b7",
	}
	return []sink.Record{
		{},
		benchRecord(),
		full,
		distributedRecord(),
		{Schema: 1, Status: sink.Error, ErrorKind: "custom-kind"},
		{Schema: 1, Status: "custom", Score: math.SmallestNonzeroFloat64, Weight: math.MaxFloat64, StartedAt: time.Unix(0, 0).UTC()},
		// The optional fields after seed, alone and in gapped pairs.
		{Schema: 1, ParentRunID: "p"},
		{Schema: 1, ReusedFrom: "r"},
		{Schema: 1, Worker: "w"},
		{Schema: 1, TraceID: "t"},
		{Schema: 1, SpanID: "s"},
		{Schema: 1, Transcript: "x", Worker: "w"},
		{Schema: 1, ParentRunID: "p", SpanID: "s"},
		{Schema: 1, ReusedFrom: "r", TraceID: "t"},
		// The optional fields of cost by role and model, and the error's
		// source, alone and in gapped pairs.
		{Schema: 1, ErrorSource: "judge"},
		{Schema: 1, JudgeInputTokens: 1},
		{Schema: 1, JudgeOutputTokens: -1},
		{Schema: 1, JudgeCostUSD: 0.5},
		{Schema: 1, Model: "m"},
		{Schema: 1, JudgeModel: "j"},
		{Schema: 1, JudgeInputTokens: 3, JudgeCostUSD: 0.25},
		{Schema: 1, Model: "m", Worker: "w"},
		{Schema: 1, Status: sink.Error, ErrorKind: sink.KindLimit, ErrorSource: "harness", JudgeOutputTokens: 9, JudgeModel: "j"},
		{Schema: 1, SimulatorInputTokens: 1},
		{Schema: 1, SimulatorCostUSD: 0.125, SimulatorModel: "s"},
		{Schema: 1, JudgeModel: "j", SimulatorOutputTokens: 2, Worker: "w"},
		// The variant, the resources and the replay counts, alone and in gapped pairs.
		{Schema: 1, Variant: "a"},
		{Schema: 1, Resources: "r"},
		{Schema: 1, CallsReplayed: 3},
		{Schema: 1, ReplayDivergedAt: 2},
		{Schema: 1, Variant: "a", CallsReplayed: -1, Worker: "w"},
		{Schema: 1, Resources: "r", ReplayDivergedAt: 4},
	}
}

// distributedRecord is benchRecord as a worker of a distributed, traced
// run writes it, reusing an earlier run's result.
func distributedRecord() sink.Record {
	r := benchRecord()
	r.ReusedFrom = "r-0f9e8d"
	r.Worker = "worker-3.cluster.local:48213"
	r.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r.SpanID = "00f067aa0ba902b7"
	return r
}

func TestUnmarshalRecordRoundTrip(t *testing.T) {
	for i, want := range roundTripRecords() {
		line := want.AppendJSON(nil)
		var got sink.Record
		if err := DecodeLine(line, &got, nil); err != nil {
			t.Fatalf("%d: %s: %v", i, line, err)
		}
		// Raw JSON is written compacted, as encoding/json writes it.
		want.Input = jsontext.AppendRawJSON(nil, want.Input)
		if len(want.Output) > 0 {
			want.Output = jsontext.AppendRawJSON(nil, want.Output)
		}
		if len(want.Input) == 0 {
			want.Input = nil
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("%d: round trip (-want +got):\n%s", i, diff)
		}
		// The strict decoder, not the fallback, decodes every line
		// AppendJSON writes.
		var fast sink.Record
		if !strictDecode(line, &fast) {
			t.Errorf("%d: the strict decoder rejects %s", i, line)
		}
	}
}

// strictDecode is DecodeLine without its fallback.
func strictDecode(b []byte, r *sink.Record) bool {
	var l canonLine
	if !l.scan(b) {
		return false
	}
	l.decode(b, r, DecodeOptions{})
	return true
}

// maxJSONDepth is encoding/json's nesting limit (the record's object counts).
const maxJSONDepth = 10000

func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// equivalentInputs are valid JSON documents: both decoders accept them (or,
// for type mismatches listed in invalidInputs, both reject them).
var equivalentInputs = []string{
	`{}`,
	`null`,
	" \t\r\n null \n",
	" \t\r\n{ \"schema\" : 1 , \"run_id\"\t:\n\"r\" } \n",
	`{"seed":3,"trace":"t","cost_usd":0.5,"output_tokens":2,"input_tokens":1,"duration_ms":9.5,"started_at":"2024-05-01T12:34:56Z","tags":{"b":"2","a":"1"},"output":{},"input":[],"error_kind":"panic","error":"e","reason":"r","weight":2,"scores":{"z":1,"a":0},"score":0.5,"status":"fail","attempt":1,"epoch":4,"sample_id":"s","eval":"e","run_id":"r","schema":1}`,
	`{"x":{"a":[1,2,{"b":null}],"c":"\u00e9\ud83d"},"schema":1,"y":[[],{},[{}]],"z":true,"w":false,"v":-1.5e-3,"u":"\"}","t":null}`,
	`{"run_id":"a","run_id":"b","scores":{"a":1,"a":3},"scores":{"b":2},"tags":{"x":"1"},"tags":{"x":"2","y":"3"},"input":[1],"input":{"k":2}}`,
	`{"schema":1,"SCHEMA":2}`,
	`{"SCHEMA":1,"Run_ID":"x","` + "\u017f" + `ample_id":"s","input_to` + "\u212a" + `ens":5,"EpOcH":2,"\u0073eed":9,"stArted_AT":"2024-05-01T12:34:56Z"}`,
	`{"sch` + "\xff" + `ema":1,"s\u00e9ed":1,"input_tokens ":1,"` + "\u212a" + `":1}`,
	`{"schema":null,"run_id":null,"eval":null,"sample_id":null,"epoch":null,"attempt":null,"status":null,"score":null,"scores":null,"weight":null,"reason":null,"error":null,"error_kind":null,"input":null,"output":null,"tags":null,"started_at":null,"duration_ms":null,"input_tokens":null,"output_tokens":null,"cost_usd":null,"seed":null,"trace":null,"parent_run_id":null,"reused_from":null,"worker":null,"trace_id":null,"span_id":null}`,
	// The fields after seed: out of order, duplicated, null, empty,
	// escaped, with surrogates, in another case.
	`{"schema":1,"run_id":"r","eval":"e","sample_id":"s","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2024-05-01T12:34:56Z","duration_ms":1,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":0,"span_id":"b","trace_id":"a","worker":"w","reused_from":"r","parent_run_id":"p"}`,
	`{"schema":1,"run_id":"r","eval":"e","sample_id":"s","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2024-05-01T12:34:56Z","duration_ms":1,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":0,"worker":"a","worker":"b"}`,
	`{"schema":1,"run_id":"r","eval":"e","sample_id":"s","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2024-05-01T12:34:56Z","duration_ms":1,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":0,"trace_id":null,"span_id":""}`,
	`{"schema":1,"run_id":"r","eval":"e","sample_id":"s","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2024-05-01T12:34:56Z","duration_ms":1,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":0,"reused_from":"\u003crun\u003e \"q\"","worker":"h\u00e9:1","trace_id":"\ud83d","span_id":"\ud83d\ude00"}`,
	`{"schema":1,"run_id":"r","eval":"e","sample_id":"s","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2024-05-01T12:34:56Z","duration_ms":1,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":0,"Worker":"w","TRACE_ID":"t","Span_Id":"s","REUSED_FROM":"r"}`,
	`{"schema":1,"run_id":"r","eval":"e","sample_id":"s","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2024-05-01T12:34:56Z","duration_ms":1,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":0,"worker":"w","unknown":1,"span_id":"s"}`,
	"{\"schema\":1,\"run_id\":\"r\",\"eval\":\"e\",\"sample_id\":\"s\",\"epoch\":0,\"attempt\":0,\"status\":\"pass\",\"score\":1,\"started_at\":\"2024-05-01T12:34:56Z\",\"duration_ms\":1,\"input_tokens\":0,\"output_tokens\":0,\"cost_usd\":0,\"seed\":0,\"worker\":\"\xff\",\"trace_id\":\"a\xed\xa0\x80\"}",
	`{"schema":1,"run_id":"r","eval":"e","sample_id":"s","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2024-05-01T12:34:56Z","duration_ms":1,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":0,"worker":"w" }`,
	`{"scores":{"a":null,"b":1},"tags":{"a":null,"b":"x"}}`,
	`{"scores":{"a":1},"scores":null}`,
	`{"scores":{},"tags":{}}`,
	`{"run_id":"a\"b\\c\/d\be\ff\ng\rh\ti\u0041\u00e9\u2028\u0000","eval":"\u003c\u003e\u0026","sample_id":"\uFFFD\ufffe"}`,
	`{"run_id":"\ud83d\ude00","eval":"\uD83D\uDE00","sample_id":"\ud83d","reason":"\ude00x","error":"\ud83d\ud83d\ude00","trace":"\ud83d\n","status":"\ud83dx\ude00","error_kind":"\ud800\udc00\udbff\udfff"}`,
	`{"tags":{"\ud83d":"\ude00","\ud83d\ude00":"k"},"scores":{"\u00e9":1}}`,
	"{\"run_id\":\"\xff\",\"eval\":\"a\xed\xa0\x80b\",\"sample_id\":\"\xe2\x82\",\"reason\":\"\xc0\xaf\",\"error\":\"ok é \xf0\x9f\x98\x80\",\"tags\":{\"\xfe\":\"\xff\xfe\"},\"trace\":\"\\n\xff\"}",
	"{\"run_id\":\"\x7f\",\"input\":\"\xff\"}",
	`{"score":1e2,"weight":1.5E-3,"duration_ms":-0,"cost_usd":1e-400,"scores":{"a":2.5e+10,"b":-0.0,"c":0e0,"d":1E+0}}`,
	`{"score":123456789012345678901234567890,"weight":9007199254740993,"duration_ms":999999999999999,"cost_usd":-999999999999999}`,
	`{"score":0.1,"weight":2.2250738585072011e-308,"duration_ms":4.9e-324,"cost_usd":1.7976931348623157e308}`,
	`{"epoch":-3,"attempt":-0,"input_tokens":-9223372036854775808,"output_tokens":9223372036854775807,"schema":123456789012345678}`,
	`{"seed":18446744073709551615}`,
	`{"seed":0,"epoch":0}`,
	`{"input":{"a":[1,{"b":"c"}],"d":null},"output":[1, 2 ,"x", {"y" : [ ] } ]}`,
	`{"input":"str","output":42}`,
	`{"input":null,"output":true}`,
	`{"input":-1.5e+7,"output":"\u00e9\ud83d"}`,
	`{"status":"weird","error_kind":"other"}`,
	`{"status":"p\u0061ss","error_kind":"t\u0069meout"}`,
	`{"status":"pass","error_kind":"cancelled"}`,
	`{"started_at":"2024-05-01T12:34:56.789+02:00"}`,
	`{"started_at":"2024-05-01T12:34:56.123456789-07:30"}`,
	`{"started_at":"2024-02-29T00:00:00Z","started_at":null}`,
	`{"reason":"` + strings.Repeat(`ab\"\u00e9`, 100) + `"}`,
	`{"reason":"` + strings.Repeat("x", 1000) + `"}`,
	`{"tags":{"` + strings.Repeat(`k\n`, 50) + `":"v"}}`,
	`{"x":` + nested(maxJSONDepth-1) + `}`,
	`{"input":` + nested(maxJSONDepth-1) + `}`,
}

// invalidInputs are rejected by encoding/json: syntax errors and values
// that do not fit their field.
var invalidInputs = []string{
	``,
	` `,
	`{`,
	`}`,
	`{"schema":1`,
	`{"schema":1,}`,
	`{"schema":1}x`,
	`{"schema":1}{}`,
	`{"schema":1}}`,
	`{"schema" 1}`,
	`{"schema":}`,
	`{"schema"}`,
	`{,}`,
	`{"a":1 "b":2}`,
	`{"run_id":"abc}`,
	`{"run_id":"abc`,
	`{"run_id":"abc\`,
	"{\"run_id\":\"a\x01b\"}",
	"{\"run_id\":\"a\nb\"}",
	"{\"x\":\"a\tb\"}",
	`{"run_id":"\q"}`,
	`{"run_id":"\'"}`,
	`{"run_id":"\u12"}`,
	`{"run_id":"\u12G4"}`,
	`{"x":"\u"}`,
	`{"x":tru}`,
	`{"x":nul}`,
	`{"x":True}`,
	`{"x":nulll}`,
	`{"x":01}`,
	`{"x":-01}`,
	`{"x":1.}`,
	`{"x":.5}`,
	`{"x":1e}`,
	`{"x":1e+}`,
	`{"x":+1}`,
	`{"x":-}`,
	`{"x":0x10}`,
	`{"x":NaN}`,
	`{"x":Infinity}`,
	`{"x":[1,]}`,
	`{"x":[,1]}`,
	`{"x":[1 2]}`,
	`{"x":{"a"}}`,
	`{"x":{"a":1,}}`,
	`{"x":{1:1}}`,
	`{"x":[}`,
	`{"x":{]}`,
	`{schema:1}`,
	`{'a':1}`,
	"\xef\xbb\xbf{}",
	"{}\x00",
	"\x00{}",
	`nullx`,
	`nul`,
	`[]`,
	`[{}]`,
	`"str"`,
	`1`,
	`true`,
	`{"schema":"1"}`,
	`{"epoch":"x"}`,
	`{"epoch":1.5}`,
	`{"epoch":1e2}`,
	`{"epoch":1.0}`,
	`{"epoch":true}`,
	`{"epoch":[]}`,
	`{"epoch":99999999999999999999}`,
	`{"seed":-1}`,
	`{"seed":-0}`,
	`{"seed":1.5}`,
	`{"seed":18446744073709551616}`,
	`{"seed":99999999999999999999}`,
	`{"input_tokens":9223372036854775808}`,
	`{"output_tokens":-9223372036854775809}`,
	`{"score":"1"}`,
	`{"score":1e400}`,
	`{"score":-1e309}`,
	`{"score":true}`,
	`{"score":{}}`,
	`{"run_id":5}`,
	`{"run_id":true}`,
	`{"run_id":{}}`,
	`{"run_id":[]}`,
	`{"status":5}`,
	`{"reused_from":5}`,
	`{"worker":true}`,
	`{"trace_id":{}}`,
	`{"span_id":[]}`,
	`{"schema":1,"run_id":"r","eval":"e","sample_id":"s","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2024-05-01T12:34:56Z","duration_ms":1,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":0,"worker":"w","span_id":"s}`,
	`{"schema":1,"run_id":"r","eval":"e","sample_id":"s","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2024-05-01T12:34:56Z","duration_ms":1,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":0,"trace_id":"\x"}`,
	`{"schema":1,"run_id":"r","eval":"e","sample_id":"s","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2024-05-01T12:34:56Z","duration_ms":1,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":0,"worker":"w",}`,
	"{\"schema\":1,\"run_id\":\"r\",\"eval\":\"e\",\"sample_id\":\"s\",\"epoch\":0,\"attempt\":0,\"status\":\"pass\",\"score\":1,\"started_at\":\"2024-05-01T12:34:56Z\",\"duration_ms\":1,\"input_tokens\":0,\"output_tokens\":0,\"cost_usd\":0,\"seed\":0,\"span_id\":\"a\nb\"}",
	`{"error_kind":[]}`,
	`{"scores":[]}`,
	`{"scores":{"a":"x"}}`,
	`{"scores":{"a":true}}`,
	`{"scores":{"a":1e999}}`,
	`{"scores":5}`,
	`{"scores":"x"}`,
	`{"scores":{"a":1}`,
	`{"scores":{"a":1,}}`,
	`{"tags":{"a":1}}`,
	`{"tags":{"a":{}}}`,
	`{"tags":"x"}`,
	`{"tags":{"a":"b"`,
	`{"tags":{"a" "b"}}`,
	`{"started_at":"yesterday"}`,
	`{"started_at":5}`,
	`{"started_at":{}}`,
	`{"started_at":"2024-05-01T12:34:56\u005a"}`,
	`{"started_at":"2024-05-01 12:34:56Z"}`,
	`{"input":}`,
	`{"input":[1,2}`,
	`{"input":{"a":}}`,
	`{"output":"\x"}`,
	`{"x":` + nested(maxJSONDepth) + `}`,
	`{"input":` + nested(maxJSONDepth) + `}`,
	`{"x":` + strings.Repeat(`{"a":`, maxJSONDepth) + `1` + strings.Repeat(`}`, maxJSONDepth) + `}`,
}

// prefilled is a non-zero record to decode into: encoding/json keeps what
// the document does not set, adds to existing maps and reuses RawMessages.
func prefilled() sink.Record {
	r := benchRecord()
	r.Scores = map[string]float64{"old": 1}
	r.Tags = map[string]string{"old": "tag", "model": "x"}
	r.Weight = 3
	r.ErrorKind = sink.KindJudge
	return r
}

// checkDecode is the differential test of the record readers: b is
// accepted by all of them with the same value or rejected by all. The
// reference is encoding/json decoding into a record; the strict decoder
// may decline a valid document (DecodeLine then falls back) but never
// accepts an invalid one nor decodes one differently; DecodeLine, with
// and without options, and ScanLine (the resume scan) agree with the
// reference exactly. Each decodes into a zero
// and into a non-zero record.
func checkDecode(t *testing.T, b []byte) {
	t.Helper()
	for _, start := range []func() sink.Record{func() sink.Record { return sink.Record{} }, prefilled} {
		want := start()
		wantErr := json.Unmarshal(b, &want)

		got := start()
		if strictDecode(b, &got) {
			if wantErr != nil {
				t.Fatalf("strict decoder accepts %q, encoding/json rejects it: %v", b, wantErr)
			}
			if diff := cmp.Diff(want, got, exactRecord); diff != "" {
				t.Fatalf("strict decoder(%q) (-encoding/json +got):\n%s", b, diff)
			}
		}

		for _, decode := range []func(*sink.Record) error{
			func(r *sink.Record) error { return DecodeLine(b, r, nil) },
		} {
			got := start()
			err := decode(&got)
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("DecodeLine(%q): err %v, encoding/json err %v", b, err, wantErr)
			}
			if err == nil {
				if diff := cmp.Diff(want, got, exactRecord); diff != "" {
					t.Fatalf("DecodeLine(%q) (-encoding/json +got):\n%s", b, diff)
				}
			}
		}
	}

	// DecodeLine with fields left out: the same acceptance, error and
	// fields as the reference, but those left out, which keep the record's
	// own (the maps not added to, the raw messages' memory not written).
	for _, opts := range []DecodeOptions{{NoRaw: true}, {NoMaps: true}, {NoRaw: true, NoMaps: true}, {Alias: true}, {NoRaw: true, NoMaps: true, Alias: true}} {
		for _, start := range []func() sink.Record{func() sink.Record { return sink.Record{} }, prefilled} {
			want := start()
			wantErr := json.Unmarshal(b, &want)
			kept := start()
			if opts.NoRaw {
				want.Input, want.Output = kept.Input, kept.Output
			}
			if opts.NoMaps {
				want.Scores, want.Tags = kept.Scores, kept.Tags
			}
			got := start()
			in := slices.Clone(got.Input)
			err := DecodeLine(b, &got, &opts)
			if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("DecodeLine(%q, %+v): err %v, encoding/json err %v", b, opts, err, wantErr)
			}
			if err == nil {
				if diff := cmp.Diff(want, got, exactRecord); diff != "" {
					t.Fatalf("DecodeLine(%q, %+v) (-encoding/json +got):\n%s", b, opts, diff)
				}
			}
			if opts.NoRaw && !slices.Equal(in, got.Input) {
				t.Fatalf("DecodeLine(%q, %+v) wrote into the record's input: %q, was %q", b, opts, got.Input, in)
			}
			if opts.NoMaps && !maps.Equal(got.Tags, start().Tags) {
				t.Fatalf("DecodeLine(%q, %+v) changed the record's tags: %v", b, opts, got.Tags)
			}
		}
	}

	// DecodeLight: the same acceptance and error; the record but its input,
	// output and scores, with the tags TagSets makes of it.
	var want sink.Record
	wantErr := json.Unmarshal(b, &want)
	want.Input, want.Output, want.Scores = nil, nil, nil
	l := Light{Record: prefilled()}
	err := DecodeLight(b, &l)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("DecodeLight(%q): err %v, encoding/json err %v", b, err, wantErr)
	}
	if err == nil {
		var sets TagSets
		l.Tags = sets.Of(&l)
		if diff := cmp.Diff(want, l.Record, exactRecord); diff != "" {
			t.Fatalf("DecodeLight(%q) (-encoding/json +got):\n%s", b, diff)
		}
	}

	want = sink.Record{}
	wantErr = json.Unmarshal(b, &want)
	k, err := ScanLine(b)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("ScanLine(%q): err %v, encoding/json err %v", b, err, wantErr)
	}
	if err == nil {
		wantKey := LineKey{want.Schema, []byte(want.RunID), []byte(want.Variant), []byte(want.SampleID), want.Epoch, want.Status, []byte(want.Transcript), want.ErrorKind}
		if diff := cmp.Diff(wantKey, k, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("ScanLine(%q) (-encoding/json +got):\n%s", b, diff)
		}
	}
}

func TestUnmarshalRecordMatchesEncodingJSON(t *testing.T) {
	for _, in := range equivalentInputs {
		if err := json.Unmarshal([]byte(in), new(sink.Record)); err != nil {
			t.Errorf("encoding/json rejects equivalence case %q: %v", in, err)
		}
		checkDecode(t, []byte(in))
	}
	for _, r := range roundTripRecords() {
		checkDecode(t, r.AppendJSON(nil))
	}
}

func TestUnmarshalRecordInvalid(t *testing.T) {
	for _, in := range invalidInputs {
		if err := json.Unmarshal([]byte(in), new(sink.Record)); err == nil {
			t.Errorf("encoding/json accepts invalid case %q", in)
		}
		var r sink.Record
		if strictDecode([]byte(in), &r) {
			t.Errorf("the strict decoder accepts %q", in)
		}
		if err := DecodeLine([]byte(in), &r, nil); err == nil {
			t.Errorf("DecodeLine accepts %q", in)
		}
		checkDecode(t, []byte(in))
	}
}

// TestUnmarshalRecordErrors checks that errors are encoding/json's own.
func TestUnmarshalRecordErrors(t *testing.T) {
	var r sink.Record
	err := DecodeLine([]byte(`{"epoch":"x"}`), &r, nil)
	var te *json.UnmarshalTypeError
	if !asError(err, &te) || te.Field != "epoch" {
		t.Errorf("type mismatch: got %T %v, want *json.UnmarshalTypeError for epoch", err, err)
	}
	err = DecodeLine([]byte(`{"epoch":1`), &r, nil)
	var se *json.SyntaxError
	if !asError(err, &se) {
		t.Errorf("truncated: got %T %v, want *json.SyntaxError", err, err)
	}
}

func asError[T error](err error, target *T) bool {
	e, ok := err.(T)
	if ok {
		*target = e
	}
	return ok
}

func TestUnmarshalRecordAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	// The fields of a distributed run (worker, trace and span IDs…) share
	// the short strings' allocation: they cost none of their own.
	for _, rec := range []sink.Record{benchRecord(), distributedRecord()} {
		line := rec.AppendJSON(nil)
		n := testing.AllocsPerRun(100, func() {
			var r sink.Record
			if err := DecodeLine(line, &r, nil); err != nil {
				t.Fatal(err)
			}
		})
		// sample_id, input, output and the tags map; status is a constant and
		// run_id, eval and the tags' keys and values are interned. The intern
		// cache lives in a sync.Pool, which any GC may drop (other packages'
		// tests run beside this one): refilling it costs one more.
		if n > 9 {
			t.Errorf("%v allocations per decode of %s, want at most 9", n, line)
		}
		// Without input, output and maps: the sample ID, the short strings
		// and the record itself, which this closure makes escape.
		n = testing.AllocsPerRun(100, func() {
			var r sink.Record
			if err := DecodeLine(line, &r, &DecodeOptions{NoRaw: true, NoMaps: true}); err != nil {
				t.Fatal(err)
			}
		})
		if n > 3 {
			t.Errorf("%v allocations per decode of %s without raw fields and maps, want at most 3", n, line)
		}
	}
}

func FuzzUnmarshalRecord(f *testing.F) {
	for _, in := range equivalentInputs {
		f.Add([]byte(in))
	}
	for _, in := range invalidInputs {
		f.Add([]byte(in))
	}
	for _, r := range roundTripRecords() {
		f.Add(r.AppendJSON(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
	})
}

func BenchmarkUnmarshalRecord(b *testing.B) {
	rec := benchRecord()
	line := rec.AppendJSON(nil)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		var r sink.Record
		if err := DecodeLine(line, &r, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeLine is BenchmarkUnmarshalRecord with the fields a fold
// over a log leaves out (the viewer's): input and output, then the maps too.
// The line is validated all the same.
func BenchmarkDecodeLine(b *testing.B) {
	rec := benchRecord()
	line := rec.AppendJSON(nil)
	for _, bc := range []struct {
		name string
		opts *DecodeOptions
	}{
		{"all", nil},
		{"no-raw", &DecodeOptions{NoRaw: true}},
		{"no-raw-no-maps", &DecodeOptions{NoRaw: true, NoMaps: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			var r sink.Record
			for b.Loop() {
				r = sink.Record{}
				if err := DecodeLine(line, &r, bc.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnmarshalRecordDistributed decodes a record that carries the
// optional fields of a distributed, traced run (reused_from, worker,
// trace_id, span_id).
func BenchmarkUnmarshalRecordDistributed(b *testing.B) {
	rec := distributedRecord()
	line := rec.AppendJSON(nil)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		var r sink.Record
		if err := DecodeLine(line, &r, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalRecordReflect(b *testing.B) {
	rec := benchRecord()
	line := rec.AppendJSON(nil)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		var r sink.Record
		if err := json.Unmarshal(line, &r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalRecordScanLine is the resume scan of one line: every
// field validated, the key fields read.
func BenchmarkUnmarshalRecordScanLine(b *testing.B) {
	rec := benchRecord()
	line := rec.AppendJSON(nil)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ScanLine(line); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAppendJSONInvalidRawStaysValid: input or output that is not valid
// JSON is written as a string holding its text, never as it is, which
// would make the whole line unreadable (a regression: a clean-looking
// invalid value such as `{` was copied through).
func TestAppendJSONInvalidRawStaysValid(t *testing.T) {
	for _, raw := range []string{`{`, `[1,`, `tru`, `"open`, `1.`, `{"a":}`, `nul`, `{}}`} {
		r := benchRecord()
		r.Input, r.Output = json.RawMessage(raw), json.RawMessage(raw)
		line := r.AppendJSON(nil)
		if !json.Valid(line) {
			t.Errorf("AppendJSON with raw %q wrote invalid JSON: %s", raw, line)
			continue
		}
		var got sink.Record
		if !strictDecode(line, &got) {
			t.Errorf("the strict decoder rejects %s", line)
		}
		var s string
		if err := json.Unmarshal(got.Input, &s); err != nil || s != raw {
			t.Errorf("input %q read back as %s", raw, got.Input)
		}
	}
}

// FuzzRecordRoundTrip: whatever record AppendJSON writes, the strict
// decoder accepts (the fallback is for documents written by others), and
// it decodes as encoding/json does.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add("run", "s-1", "pass", "reason", "timeout", "k", "v", 0.5, int64(3), uint64(7), []byte(`{"q":1}`), int64(1e9))
	f.Add("\xff<>&\u2028\"\\", "\x00\n", "custom", "", "", "", "", math.NaN(), int64(-1), uint64(math.MaxUint64), []byte("{\n\"a\" : [1]}"), int64(-1))
	f.Add("é😀", "", "", "\ud7ff", "x", "\ufffd", "\x1f", 1e-7, int64(math.MinInt64), uint64(0), []byte(`{`), int64(0))
	f.Fuzz(func(t *testing.T, id, sample, status, reason, kind, tk, tv string, score float64, n int64, seed uint64, raw []byte, ns int64) {
		r := sink.Record{Schema: 1, RunID: id, Eval: id, SampleID: sample, Epoch: int(n), Attempt: int(n >> 3), Status: sink.Status(status),
			Score: score, Scores: map[string]float64{tk: score}, Weight: score, Reason: reason, Error: reason, ErrorKind: sink.ErrorKind(kind),
			Input: raw, Output: raw, Tags: map[string]string{tk: tv}, StartedAt: time.Unix(0, ns).UTC(), DurationMS: score,
			InputTokens: n, OutputTokens: -n, CostUSD: score, Seed: seed, Transcript: tv, ParentRunID: tk,
			// Drawn from separate arguments, so that each is present or
			// absent independently of the others.
			ReusedFrom: kind, Worker: status, TraceID: reason, SpanID: tv,
			ErrorSource: tk, JudgeInputTokens: n >> 1, JudgeOutputTokens: n >> 2, JudgeCostUSD: -score,
			Model: sample, JudgeModel: id}
		line := r.AppendJSON(nil)
		if !json.Valid(line) {
			t.Fatalf("AppendJSON wrote invalid JSON: %q", line)
		}
		var got sink.Record
		if !strictDecode(line, &got) && !deepRaw(raw) {
			t.Fatalf("the strict decoder rejects AppendJSON's %q", line)
		}
		checkDecode(t, line)
	})
}

// deepRaw reports raw JSON nested deeper than the strict decoder follows.
func deepRaw(raw []byte) bool {
	return strings.Count(string(raw), "[")+strings.Count(string(raw), "{") >= jsontext.MaxDepth
}
