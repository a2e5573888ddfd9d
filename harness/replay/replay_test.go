package replay_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/harness/replay"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "conversations.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

const conversations = "\uFEFF" + `{"id":"c-1","input":[{"role":"user","content":"hi"}],"output":[{"role":"assistant","content":"hello"}],"trace_id":"4BF92F3577B34DA6A3CE929D0E0E4736","span_id":"00f067aa0ba902b7","time":"2026-11-23T11:04:05+01:00","tags":{"model":"m-1"},"attrs":{"finish_reason":"stop"}}

{"input":"what is 2+2?","output":null,"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331"}
{"input":{"q":"x"},"output":"y","trace_id":"0af7651916cd43dd8448eb211c80319c"}
`

func TestJSONL(t *testing.T) {
	t.Parallel()
	got, err := dataset.Collect(context.Background(), replay.JSONL(writeFile(t, conversations), nil))
	require.NoError(t, err)
	require.Equal(t, dataset.Slice[replay.Case]{
		{ID: "c-1", Tags: map[string]string{"model": "m-1"}, Input: replay.Case{
			Input: json.RawMessage(`[{"role":"user","content":"hi"}]`), Output: json.RawMessage(`[{"role":"assistant","content":"hello"}]`),
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
			Time: time.Date(2026, 11, 23, 10, 4, 5, 0, time.UTC), Attrs: map[string]string{"finish_reason": "stop"},
		}},
		{ID: "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", Input: replay.Case{
			Input: json.RawMessage(`"what is 2+2?"`), TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331",
		}},
		{ID: "0af7651916cd43dd8448eb211c80319c", Input: replay.Case{
			Input: json.RawMessage(`{"q":"x"}`), Output: json.RawMessage(`"y"`), TraceID: "0af7651916cd43dd8448eb211c80319c",
		}},
	}, got)
}

func TestJSONLMalformed(t *testing.T) {
	t.Parallel()
	ok := `{"id":"a","input":1,"output":2}` + "\n"
	for _, tc := range []struct {
		name, file string
		line, col  int
		field, msg string
	}{
		{"not JSON", ok + `{"id":"b","input":1,` + "\n", 2, 0, "", "unexpected EOF"},
		{"syntax error", ok + ok + `{"id":"b" "input":1}`, 3, 11, "", "invalid character"},
		{"syntax error after a byte-order mark", "\uFEFF" + `{"id":"b" "input":1}`, 1, 14, "", "invalid character"},
		{"missing input", `{"id":"b","output":1}`, 1, 0, "input", "missing"},
		{"null input", `{"id":"b","input":null,"output":1}`, 1, 0, "input", "missing"},
		{"missing output", `{"id":"b","input":1}`, 1, 0, "output", "missing"},
		{"no id, no trace", `{"input":1,"output":2,"span_id":"00f067aa0ba902b7"}`, 1, 0, "trace_id", "span_id is given"},
		{"no id at all", `{"input":1,"output":2}`, 1, 0, "id", "no trace_id"},
		{"bad id", `{"id":"a\tb","input":1,"output":2}`, 1, 0, "id", "control character"},
		{"trace ID not hex", `{"input":1,"output":2,"trace_id":"xyz"}`, 1, 0, "trace_id", "not 32 hex digits"},
		{"short span ID", `{"input":1,"output":2,"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad"}`, 1, 0, "span_id", "not 16 hex digits"},
		{"zero trace ID", `{"input":1,"output":2,"trace_id":"00000000000000000000000000000000"}`, 1, 0, "trace_id", "all zeros"},
		{"bad time", `{"id":"a","input":1,"output":2,"time":"yesterday"}`, 1, 0, "", "cannot parse"},
		{"unknown field (a typo)", `{"id":"a","input":1,"output":2,"tag":{"x":"y"}}`, 1, 0, "", `unknown field "tag"`},
		{"tags of the wrong type", `{"id":"a","input":1,"output":2,"tags":{"n":1}}`, 1, 44, "tags", "cannot unmarshal number"},
		{"trailing data", `{"id":"a","input":1,"output":2} {}`, 1, 0, "", "after the JSON object"},
		{"invalid UTF-8", ok + "{\"id\":\"\xff\",\"input\":1,\"output\":2}", 2, 0, "", "invalid UTF-8"},
		{"an array", `[1]`, 1, 1, "", "cannot unmarshal array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, tc.file)
			_, err := dataset.Collect(context.Background(), replay.JSONL(path, nil))
			var re *dataset.RowError
			require.ErrorAs(t, err, &re, "%v", err)
			require.Equal(t, path, re.File)
			require.Equal(t, tc.line, re.Line, "%v", err)
			if tc.col > 0 {
				require.Equal(t, tc.col, re.Column, "%v", err)
			}
			require.Equal(t, tc.field, re.Field, "%v", err)
			require.Contains(t, err.Error(), tc.msg)
			require.Contains(t, err.Error(), path+":")
		})
	}
}

func TestJSONLOptions(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `{"id":"a","input":1,"output":2,"extra":true}`+"\n"+`{"id":"b","input":1,"output":2,"pad":"`+strings.Repeat("x", 100)+`"}`)
	got, err := dataset.Collect(context.Background(), replay.JSONL(path, &replay.JSONLOptions{AllowUnknownFields: true, MaxLineBytes: 60}))
	var re *dataset.RowError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 2, re.Line)
	require.Contains(t, err.Error(), "longer than 60 bytes")
	require.Nil(t, got)

	got, err = dataset.Collect(context.Background(), replay.JSONL(path, &replay.JSONLOptions{AllowUnknownFields: true}))
	require.NoError(t, err)
	require.Len(t, got, 2)

	_, err = dataset.Collect(context.Background(), replay.JSONL(filepath.Join(t.TempDir(), "missing.jsonl"), nil))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestHarnessReturnsTheRecordedOutput(t *testing.T) {
	t.Parallel()
	h := replay.Harness()
	ep := &harness.Episode[replay.Case]{Sample: dataset.Sample[replay.Case]{ID: "x", Input: replay.Case{
		Input: json.RawMessage(`"q"`), Output: json.RawMessage(`{"a":1}`), TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331",
	}}}
	out, err := h.Run(context.Background(), ep)
	require.NoError(t, err)
	require.JSONEq(t, `{"a":1}`, string(out))
	ev := ep.Events()
	require.Len(t, ev, 1)
	require.Equal(t, "replay", ev[0].Kind)
	require.Contains(t, ev[0].Name, "0af7651916cd43dd8448eb211c80319c/b7ad6b7169203331")
	require.Zero(t, ep.Usage(), "a replay costs nothing")

	// No recorded output: null, which the judge sees.
	ep = &harness.Episode[replay.Case]{Sample: dataset.Sample[replay.Case]{ID: "y", Input: replay.Case{Input: json.RawMessage(`"q"`)}}}
	out, err = h.Run(context.Background(), ep)
	require.NoError(t, err)
	require.Equal(t, "null", string(out))
}

func TestWindow(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 10, 59, 59, 999, time.FixedZone("CET", 3600)) // 09:59:59 UTC
	w := replay.WindowAt(at, time.Hour)
	require.Equal(t, time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC), w.Start)
	require.Equal(t, "bot-2026-11-23T09-1h", w.RunID("bot"))
	require.Equal(t, filepath.Join("runs", "bot-2026-11-23T09-1h.jsonl"), w.Log("runs", "bot"))
	require.True(t, w.Contains(w.Start))
	require.True(t, w.Contains(at))
	require.False(t, w.Contains(w.End()), "the end is the next window's")
	require.False(t, w.Contains(w.Start.Add(-time.Nanosecond)))
	require.Equal(t, w, replay.WindowAt(w.Start.Add(30*time.Minute), time.Hour), "same window, same run")

	for _, tc := range []struct {
		w    replay.Window
		want string
	}{
		{replay.WindowAt(at, 24*time.Hour), "bot-2026-11-23T00-24h"},
		{replay.WindowAt(at, 15*time.Minute), "bot-2026-11-23T0945-15m"},
		{replay.WindowAt(at, 90*time.Minute), "bot-2026-11-23T09-1h30m"},
		{replay.WindowAt(at, 30*time.Second), "bot-2026-11-23T095930-30s"},
	} {
		require.Equal(t, tc.want, tc.w.RunID("bot"))
		require.NotContains(t, tc.w.RunID("bot"), ":")
	}
	require.Panics(t, func() { replay.WindowAt(at, 0) })

	d := dataset.Slice[replay.Case]{
		{ID: "in", Input: replay.Case{Time: w.Start}},
		{ID: "late", Input: replay.Case{Time: w.End()}},
		{ID: "untimed"},
		{ID: "in2", Input: replay.Case{Time: w.End().Add(-time.Nanosecond)}},
	}
	got, err := dataset.Collect(context.Background(), w.Filter(d))
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "in", got[0].ID)
	require.Equal(t, "in2", got[1].ID)
}

// Recorded conversations load gzip-compressed as they do plain.
func TestJSONLGzip(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(conversations))
	require.NoError(t, zw.Close())
	path := filepath.Join(t.TempDir(), "conversations.jsonl.gz")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	got, err := dataset.Collect(context.Background(), replay.JSONL(path, nil))
	require.NoError(t, err)
	want, err := dataset.Collect(context.Background(), replay.JSONL(writeFile(t, conversations), nil))
	require.NoError(t, err)
	require.Equal(t, want, got)
}
