package otlp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/dataset/otlp"
	"github.com/proctor-evals/proctor/harness/replay"
)

// testdata/traces.jsonl holds four export requests as the Collector's file
// exporter writes them (and a blank line):
//
//  1. service support-bot: two chat spans with gen_ai.input/output.messages
//     as JSON strings (one a child of the other), an HTTP span (no GenAI)
//     and a chat span whose content was not recorded;
//  2. a chat span with structured messages (arrayValue/kvlistValue) and
//     status ok, a span with the older gen_ai.content.prompt/completion
//     events, and one with OpenLLMetry's flattened gen_ai.prompt.N.*;
//  3. the first chat span again (a retried export);
//  4. a chat span an hour later.
const fixture = "testdata/traces.jsonl"

func collect(t *testing.T, d dataset.Dataset[replay.Case]) []dataset.Sample[replay.Case] {
	t.Helper()
	s, err := dataset.Collect(context.Background(), d)
	require.NoError(t, err)
	return s
}

func TestTracesFixture(t *testing.T) {
	t.Parallel()
	got := collect(t, otlp.Traces(fixture, nil))
	var ids []string
	for _, s := range got {
		ids = append(ids, s.ID)
		require.NoError(t, dataset.CheckID(s.ID))
	}
	want := []string{
		"5b8efff798038103d269b633813fc60c-eee19b7ec3c1b174",
		"5b8efff798038103d269b633813fc60c-eee19b7ec3c1b175",
		"4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
		"0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
		"0af7651916cd43dd8448eb211c80319c-b7ad6b7169203332",
		"6e0c63257de34c926f9efcd03899184a-1a2b3c4d5e6f7081",
	}
	require.Equal(t, want, ids, "GenAI spans with content, in file order, the retried export once")

	first := got[0]
	require.Equal(t, replay.Case{
		Input:   json.RawMessage(`[{"role": "user", "parts": [{"type": "text", "content": "Where is my parcel 1234?"}]}]`),
		Output:  json.RawMessage(`[{"role": "assistant", "parts": [{"type": "text", "content": "It left the depot this morning and arrives tomorrow."}]}]`),
		TraceID: "5b8efff798038103d269b633813fc60c",
		SpanID:  "eee19b7ec3c1b174",
		Time:    time.Date(2026, 11, 23, 10, 4, 5, 0, time.UTC),
		Attrs: map[string]string{
			"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "m-small",
			"gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "7",
		},
	}, first.Input)
	tid, sid := first.Input.OriginSpan()
	require.Equal(t, "5b8efff798038103d269b633813fc60c", tid)
	require.Equal(t, "eee19b7ec3c1b174", sid)
	require.Equal(t, map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
		"gen_ai.request.model": "m-small", "service.name": "support-bot",
	}, first.Tags, "default tags: span attributes, then the resource's service.name")

	jsonEq := func(want, got json.RawMessage) {
		t.Helper()
		var w, g any
		require.NoError(t, json.Unmarshal(want, &w))
		require.NoError(t, json.Unmarshal(got, &g), "%s", got)
		if d := cmp.Diff(w, g); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	}
	// Structured attribute values become JSON objects and arrays.
	jsonEq(json.RawMessage(`[{"role":"user","parts":[{"type":"text","content":"Cancel order 77, please."}]}]`), got[2].Input.Input)
	jsonEq(json.RawMessage(`[{"role":"assistant","parts":[{"type":"text","content":"Order 77 is cancelled."}],"finish_reason":"stop"}]`), got[2].Input.Output)
	require.Equal(t, "m-large", got[2].Tags["gen_ai.request.model"])
	// The older span events.
	jsonEq(json.RawMessage(`[{"role":"user","content":"What is your refund policy?"}]`), got[3].Input.Input)
	jsonEq(json.RawMessage(`[{"role":"assistant","content":"Refunds within 30 days."}]`), got[3].Input.Output)
	require.Equal(t, "openai", got[3].Tags["gen_ai.system"])
	// OpenLLMetry's flattened attributes, read back in index order; they
	// are content, so not in Attrs.
	jsonEq(json.RawMessage(`[{"role":"system","content":"Be brief."},{"role":"user","content":"Do you ship to Canada?"}]`), got[4].Input.Input)
	jsonEq(json.RawMessage(`[{"role":"assistant","content":"Sorry, I cannot help with that.","finish_reason":"stop"}]`), got[4].Input.Output)
	for k := range got[4].Input.Attrs {
		require.False(t, strings.HasPrefix(k, "gen_ai.prompt") || strings.HasPrefix(k, "gen_ai.completion"), k)
	}
}

func TestTracesOptions(t *testing.T) {
	t.Parallel()
	// Select the HTTP span, with an Extract of its own, and tag by method.
	d := otlp.Traces(fixture, &otlp.Options{
		Select: func(s *otlp.Span) bool { return s.Kind == "server" },
		Extract: func(s *otlp.Span) (json.RawMessage, json.RawMessage, error) {
			return json.RawMessage(`"` + s.Name + `"`), json.RawMessage(otlp.String(s.Attrs["http.response.status_code"])), nil
		},
		Tags: []string{"http.request.method", "deployment.environment.name"},
	})
	got := collect(t, d)
	require.Len(t, got, 1)
	require.Equal(t, "5b8efff798038103d269b633813fc60c-eee19b7ec3c1b176", got[0].ID)
	require.JSONEq(t, `"GET /orders"`, string(got[0].Input.Input))
	require.JSONEq(t, `200`, string(got[0].Input.Output))
	require.Equal(t, map[string]string{"http.request.method": "GET", "deployment.environment.name": "prod"}, got[0].Tags)

	// A selected span without content is an error naming file, line and span.
	_, err := dataset.Collect(context.Background(), otlp.Traces(fixture, &otlp.Options{
		Select: func(s *otlp.Span) bool { _, ok := s.Attrs["gen_ai.operation.name"]; return ok },
	}))
	var re *dataset.RowError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 1, re.Line)
	require.Equal(t, "resourceSpans[0].scopeSpans[0].spans[3]", re.Field)
	require.ErrorIs(t, err, otlp.ErrNoContent)
	require.Contains(t, err.Error(), fixture+":1: ")

	// Tags: empty means none.
	for _, s := range collect(t, otlp.Traces(fixture, &otlp.Options{Tags: []string{}})) {
		require.Nil(t, s.Tags)
	}
}

func TestTracesWindow(t *testing.T) {
	t.Parallel()
	w := replay.WindowAt(time.Date(2026, 11, 23, 10, 59, 0, 0, time.UTC), time.Hour)
	got := collect(t, w.Filter(otlp.Traces(fixture, nil)))
	require.Len(t, got, 5, "the 11:30 span is in the next window")
	next := collect(t, replay.WindowAt(time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC), time.Hour).Filter(otlp.Traces(fixture, nil)))
	require.Len(t, next, 1)
	require.Equal(t, "6e0c63257de34c926f9efcd03899184a-1a2b3c4d5e6f7081", next[0].ID)
}

const goodSpan = `{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"chat","attributes":[` +
	`{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},{"key":"gen_ai.input.messages","value":{"stringValue":"[]"}}]}`

func line(spans ...string) string {
	return `{"resourceSpans":[{"scopeSpans":[{"spans":[` + strings.Join(spans, ",") + `]}]}]}`
}

func TestTracesMalformed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		line       int
		field      string
		msg        string
	}{
		{"not JSON", line(goodSpan) + "\n{\"resourceSpans\": [\n", 2, "", "unexpected EOF"},
		{"an array, not an export request", "[1,2]\n", 1, "", "want a JSON object"},
		{"trailing data", line(goodSpan) + " {}\n", 1, "", "after the JSON object"},
		{"trace ID not hex", line(strings.Replace(goodSpan, "5b8efff7", "5b8efffz", 1)), 1, "", "traceId"},
		{"trace ID in base64 (the plain protobuf mapping)", line(strings.Replace(goodSpan, "5b8efff798038103d269b633813fc60c", "W47/95gDgQPSabYzgT/GDA==", 1)), 1, "", "is not hex"},
		{"short span ID", "\n\n" + line(strings.Replace(goodSpan, "eee19b7ec3c1b174", "eee19b7e", 1)), 3, "resourceSpans[0].scopeSpans[0].spans[0]", "spanId: want 8 bytes"},
		{"zero trace ID", line(goodSpan, strings.Replace(goodSpan, "5b8efff798038103d269b633813fc60c", strings.Repeat("0", 32), 1)), 1, "resourceSpans[0].scopeSpans[0].spans[1]", "not all zero"},
		{"missing trace ID", line(`{"spanId":"eee19b7ec3c1b174"}`), 1, "resourceSpans[0].scopeSpans[0].spans[0]", "traceId"},
		{"wrong type", `{"resourceSpans":{"x":1}}`, 1, "", "not an OTLP export request"},
		{"unknown enum name (ignored, as OTLP asks of receivers)", line(strings.Replace(goodSpan, `"name":"chat"`, `"kind":"SPAN_KIND_NOPE"`, 1)), 1, "", ""},
		{"unknown field (ignored)", line(strings.Replace(goodSpan, `"name":"chat"`, `"futureField":{"a":[1]}`, 1)), 1, "", ""},
		{"invalid UTF-8", "{\"resourceSpans\":[],\"x\":\"\xff\"}", 1, "", "invalid UTF-8 at byte 25"},
		{"content attribute not JSON-encodable", line(strings.Replace(goodSpan, `{"stringValue":"[]"}`, `{"doubleValue":"NaN"}`, 1)), 1, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "traces.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tc.file), 0o644))
			_, err := dataset.Collect(context.Background(), otlp.Traces(path, nil))
			if tc.msg == "" { // an edge the loader accepts: no panic, no error
				require.NoError(t, err)
				return
			}
			var re *dataset.RowError
			require.ErrorAs(t, err, &re, "%v", err)
			require.Equal(t, path, re.File)
			require.Equal(t, tc.line, re.Line, "%v", err)
			require.Equal(t, tc.field, re.Field, "%v", err)
			require.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestTracesFileErrors(t *testing.T) {
	t.Parallel()
	_, err := dataset.Collect(context.Background(), otlp.Traces(filepath.Join(t.TempDir(), "missing.jsonl"), nil))
	require.ErrorIs(t, err, os.ErrNotExist)

	path := filepath.Join(t.TempDir(), "long.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(line(goodSpan)+"\n"+line(goodSpan, goodSpan)+"\n"), 0o644))
	_, err = dataset.Collect(context.Background(), otlp.Traces(path, &otlp.Options{MaxLineBytes: len(line(goodSpan))}))
	var re *dataset.RowError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 2, re.Line)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = dataset.Collect(ctx, otlp.Traces(fixture, nil))
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.As(err, &re))
}

func TestUnmarshalJSONSnakeCase(t *testing.T) {
	t.Parallel()
	// The proto field names are accepted too, IDs in hex all the same.
	req, err := otlp.UnmarshalJSON([]byte(`{"resource_spans":[{"scope_spans":[{"spans":[{"trace_id":"5B8EFFF798038103D269B633813FC60C","span_id":"eee19b7ec3c1b174","start_time_unix_nano":1795428245000000000}]}]}]}`))
	require.NoError(t, err)
	sp := req.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0]
	require.Equal(t, []byte{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c}, sp.GetTraceId())
	require.Equal(t, uint64(1795428245000000000), sp.GetStartTimeUnixNano())
}
