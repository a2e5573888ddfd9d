package main

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness/replay"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// collector is an OTLP/HTTP receiver speaking the real wire format: it
// decodes the protobuf export requests the SDK's exporters send.
type collector struct {
	mu    sync.Mutex
	logs  []*logspb.LogRecord
	spans int
	names map[string]int
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf body", http.StatusBadRequest)
		return
	}
	var resp proto.Message
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r.URL.Path {
	case "/v1/logs":
		var req collogspb.ExportLogsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rl := range req.GetResourceLogs() {
			for _, sl := range rl.GetScopeLogs() {
				c.logs = append(c.logs, sl.GetLogRecords()...)
			}
		}
		resp = &collogspb.ExportLogsServiceResponse{}
	case "/v1/traces":
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					c.spans++
					c.names[s.GetName()]++
				}
			}
		}
		resp = &coltracepb.ExportTraceServiceResponse{}
	default:
		http.NotFound(w, r)
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any)
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = v.DoubleValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = v.IntValue
		default:
			m[kv.GetKey()] = kv.GetValue().String()
		}
	}
	return m
}

// runOnce runs the job with fresh OTLP/HTTP providers pointed at the
// collector, and flushes them.
func runOnce(t *testing.T, j job, url string) {
	t.Helper()
	ctx := context.Background()
	tp, lp, shutdown, err := telemetry(ctx, url)
	require.NoError(t, err)
	rep, err := run(ctx, j, eval.Config{TracerProvider: tp, LoggerProvider: lp, Quiet: true})
	require.NoError(t, err)
	require.Equal(t, j.Window.RunID(evalName), rep.RunID)
	require.NoError(t, shutdown(ctx))
}

// TestOnlineVerdictsOnTheWire is the online path end to end: OTLP JSON
// traces → dataset → the replay harness → asymmetric sampling → verdicts
// as gen_ai.evaluation.result log records over OTLP/HTTP, each correlated
// with the production span it judges; then a re-run of the window resumes
// and sends nothing again.
func TestOnlineVerdictsOnTheWire(t *testing.T) {
	t.Parallel()
	c := &collector{names: map[string]int{}}
	srv := httptest.NewServer(c)
	defer srv.Close()

	j := job{
		Traces: "testdata/traces.jsonl",
		Window: replay.WindowAt(time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC), time.Hour),
		Dir:    t.TempDir(),
		Rate:   0.34,
		Seed:   1,
	}
	runOnce(t, j, srv.URL)

	// The log: one record per operation of the window (5 of the 6 spans
	// with content; the 11:30 one is the next window's).
	var recs []sink.Record
	for r, err := range jsonl.Records(j.Window.Log(j.Dir, evalName)) {
		require.NoError(t, err)
		recs = append(recs, r)
	}
	require.Len(t, recs, 5)
	judged, unsampled := 0, 0
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		var cs replay.Case
		require.NoError(t, json.Unmarshal(r.Input, &cs))
		require.Equal(t, cs.SampleID(), r.SampleID)

		var events []*logspb.LogRecord
		for _, l := range c.logs {
			if hex.EncodeToString(l.GetTraceId()) == cs.TraceID && hex.EncodeToString(l.GetSpanId()) == cs.SpanID {
				events = append(events, l)
			}
		}
		if r.ErrorKind == sink.KindNotSampled {
			unsampled++
			require.Empty(t, events, "%s: an episode left out of the sample has no verdict", r.SampleID)
			continue
		}
		judged++
		require.Contains(t, []sink.Status{sink.Pass, sink.Fail}, r.Status)
		require.Len(t, events, 1, "%s: one verdict event on the original span", r.SampleID)
		ev := events[0]
		require.Equal(t, "gen_ai.evaluation.result", ev.GetEventName())
		a := attrs(ev.GetAttributes())
		require.Equal(t, evalName, a["gen_ai.evaluation.name"])
		require.Equal(t, string(r.Status), a["gen_ai.evaluation.score.label"])
		require.Equal(t, r.Score, a["gen_ai.evaluation.score.value"])
		require.Equal(t, r.Reason, a["gen_ai.evaluation.explanation"])
		require.Equal(t, r.SampleID, a["proctor.sample_id"])
	}
	require.Equal(t, len(c.logs), judged, "no other events")
	require.Equal(t, 2, countStatus(recs, sink.Fail), "both refusals are suspected failures: always judged, and failed")
	require.Positive(t, unsampled, "at rate 0.34 some suspected successes are left out (seed 1)")
	require.Positive(t, judged-2, "and some are judged")
	require.Equal(t, 5, c.names["episode"], "one trace per episode went out too")

	// The cron job runs again for the same window: it resumes, judges
	// nothing and sends no event twice.
	before := len(c.logs)
	c.mu.Unlock()
	runOnce(t, j, srv.URL)
	c.mu.Lock()
	require.Equal(t, before, len(c.logs))
	n := 0
	for _, err := range jsonl.Records(j.Window.Log(j.Dir, evalName)) {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 5, n, "the log holds each episode once")
}

func countStatus(recs []sink.Record, st sink.Status) int {
	n := 0
	for _, r := range recs {
		if r.Status == st {
			n++
		}
	}
	return n
}
