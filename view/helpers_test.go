package view_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/view"
)

// Hostile content an agent might produce: it must show as text.
const (
	evilOutput = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	evilName   = `<svg onload="window.pwned=3">`
)

// writeRun writes a run's log with the real JSONL writer, and its
// transcripts to the transcript store beside it as the engine does (one line
// each, linked from the record as a path relative to the log): 30 samples
// × 3 epochs over two tags, passing with probability skill, a transcript
// holding hostile content, some errors, OpenTelemetry IDs, workers and
// reused records. It returns the records' count.
func writeRun(t testing.TB, log string, skill float64, seed uint64) int {
	t.Helper()
	w, err := jsonl.Create(log, nil)
	if err != nil {
		t.Fatal(err)
	}
	tw, err := jsonl.Create(log+".traces.jsonl", nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).Add(time.Duration(seed) * time.Hour)
	n := 0
	for ep := range 3 {
		for i := range 30 {
			r := record(rng, fmt.Sprintf("s-%02d", i), ep, i, skill, seed)
			r.StartedAt = start.Add(time.Duration(n) * 700 * time.Millisecond)
			ev, _ := json.Marshal(map[string]any{"run_id": r.RunID, "sample_id": r.SampleID, "epoch": ep, "attempt": 0,
				"events": []harness.Event{{Time: r.StartedAt, Kind: "model", Name: evilName, Input: []byte(`{"prompt":"add"}`),
					Output: []byte(fmt.Sprintf("%q", evilOutput)), Duration: time.Millisecond, Usage: harness.Usage{InputTokens: 40, OutputTokens: 3}}}})
			off, err := tw.WriteLine(append(ev, '\n'))
			if err != nil {
				t.Fatal(err)
			}
			r.Transcript = fmt.Sprintf("%s#%d", filepath.Base(log)+".traces.jsonl", off)
			if err := w.Write(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if err := errors.Join(tw.Close(context.Background()), w.Close(context.Background())); err != nil {
		t.Fatal(err)
	}
	return n
}

// record is one episode of sample i of writeRun's runs.
func record(rng *rand.Rand, id string, ep, i int, skill float64, seed uint64) sink.Record {
	r := sink.Record{Schema: 1, RunID: fmt.Sprintf("run-%d", seed), Eval: "arith", SampleID: id, Epoch: ep,
		Tags:       map[string]string{"difficulty": []string{"easy", "medium", "hard"}[i%3], "repo": fmt.Sprintf("r%d", i%2)},
		Input:      []byte(fmt.Sprintf(`{"a":%d,"b":%d}`, i, i%7)),
		Output:     []byte(fmt.Sprintf("%q", evilOutput)),
		DurationMS: 20 + 400*rng.Float64(), InputTokens: 40, OutputTokens: 3, CostUSD: 0.00002 * float64(1+i%5),
		Seed: rng.Uint64(), Worker: fmt.Sprintf("host-%d:100", i%2)}
	switch p := skill - 0.15*float64(i%3); {
	case rng.Float64() < 0.05:
		r.Status, r.ErrorKind, r.Error = sink.Error, sink.KindHarness, "stand-in API: 503 <b>unavailable</b>\nstack…"
	case rng.Float64() < p:
		r.Status, r.Score = sink.Pass, 1
	default:
		r.Status, r.Reason = sink.Fail, "expected "+strconv.Itoa(i+i%7)+", got <i>wrong</i>"
	}
	if i%4 == 0 {
		r.TraceID, r.SpanID = fmt.Sprintf("%032x", i+1), fmt.Sprintf("%016x", ep+1)
	}
	if i%10 == 9 {
		r.ReusedFrom = "run-0"
	}
	return r
}

// textReport is what `proctor report LOG` prints.
func textReport(t testing.TB, log string) *report.Report {
	t.Helper()
	rep, err := report.FromRecords(jsonl.Records(log), nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// textRows returns the value of each metric row of the text report.
func textRows(rep *report.Report, metrics []string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(rep.String(), "\n") {
		for _, m := range metrics {
			if strings.HasPrefix(line, m+"  ") {
				out[m] = strings.TrimSpace(strings.TrimPrefix(line, m))
			}
		}
	}
	return out
}

var summaryMetrics = []string{"samples × epochs", "passed / failed", "errored / unscored", "reused", "pass rate", "bootstrap CI", "pass@k", "pass^k", "latency", "usage"}

// serve starts a viewer of paths on a test server.
func serve(t testing.TB, paths []string, opts *view.Options) (*view.Server, *httptest.Server) {
	t.Helper()
	v, err := view.New(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(v)
	t.Cleanup(func() {
		v.Close() // ends live streams, so that Close does not wait on them
		ts.Close()
	})
	return v, ts
}

func get(t testing.TB, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}
