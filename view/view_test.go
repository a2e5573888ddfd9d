package view_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/view"
)

// contains and notContains do not print the page when they fail.
func contains(t testing.TB, body, s string, msg ...any) {
	t.Helper()
	if !strings.Contains(body, s) {
		t.Fatalf("the page (%d bytes) lacks %q %v", len(body), s, msg)
	}
}

func notContains(t testing.TB, body, s string, msg ...any) {
	t.Helper()
	if i := strings.Index(body, s); i >= 0 {
		t.Fatalf("the page holds %q at %d: …%s… %v", s, i, body[max(0, i-80):min(len(body), i+80)], msg)
	}
}

// pageRows returns the summary table of a run page: metric → value.
func pageRows(body string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`<tr id="m-[^"]+"><td>([^<]*)</td><td>([^<]*)</td></tr>`).FindAllStringSubmatch(body, -1) {
		out[html.UnescapeString(m[1])] = html.UnescapeString(m[2])
	}
	return out
}

// TestRunPageMatchesTextReport: the page prints what `proctor report`
// prints, row for row, and the same tag tables.
func TestRunPageMatchesTextReport(t *testing.T) {
	t.Parallel()
	testRunPageMatchesTextReport(t)
}

// TestRunPageMatchesTextReportInChunks folds the log in chunks of a few
// lines, on every worker: the same page. (Not parallel: it sets the
// chunk size, which parallel tests, paused until it ends, also read.)
func TestRunPageMatchesTextReportInChunks(t *testing.T) {
	defer view.SetChunkSize(view.SetChunkSize(1500))
	testRunPageMatchesTextReport(t)
}

func testRunPageMatchesTextReport(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	writeRun(t, log, 0.8, 1)
	_, ts := serve(t, []string{dir}, nil)
	code, _, body := get(t, ts.URL+"/run/run.jsonl")
	require.Equal(t, 200, code, body)
	text := textReport(t, log)
	want := textRows(text, summaryMetrics)
	require.Len(t, want, len(summaryMetrics), "the text report lacks a row: %s", text)
	got := pageRows(body)
	for _, m := range summaryMetrics {
		if got[m] != want[m] {
			t.Errorf("%s: page %q, text report %q", m, got[m], want[m])
		}
	}
	for _, tag := range text.ByTag {
		for _, g := range tag.Groups {
			row := fmt.Sprintf("<tr><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%.1f%%</td><td>[%.1f%%, %.1f%%]",
				g.Value, g.Samples, g.Passed, g.Failed, g.Errored, g.Unscored, 100*g.PassRate, 100*g.Interval.Lo, 100*g.Interval.Hi)
			if !strings.Contains(body, row) {
				t.Errorf("the page lacks the row of %s=%s: %s", tag.Tag, g.Value, row)
			}
		}
	}
	contains(t, body, "9 episodes (earlier results reused, not run again)")
	var failures []string
	for _, m := range regexp.MustCompile(`<tr><td><a href="/sample/run.jsonl\?s=([^"]+)">[^<]+</a></td><td>(\d+)</td>`).FindAllStringSubmatch(body, -1) {
		failures = append(failures, m[1]+"/"+m[2])
	}
	var want2 []string
	for _, f := range text.Failures {
		want2 = append(want2, fmt.Sprintf("%s/%d", f.SampleID, f.Epoch))
	}
	require.Equal(t, want2, failures, "the failures, in the report's order (Failure.Compare)")
	for _, chart := range []string{"pass rate by difficulty", "pass rate by repo", "latency", "cost per episode", "errors by kind", "episodes finished per"} {
		contains(t, body, "<title>"+chart, "chart %q", chart)
	}
}

// TestTraceURL: -trace-url turns records' trace IDs into links, on the
// failures of a run and on a sample's records.
func TestTraceURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRun(t, filepath.Join(dir, "run.jsonl"), 0.5, 3)
	_, ts := serve(t, []string{dir}, &view.Options{TraceURL: "http://jaeger.test/trace/{trace_id}?span={span_id}"})
	_, _, body := get(t, ts.URL+"/sample/run.jsonl?s=s-04")
	contains(t, body, `href="http://jaeger.test/trace/00000000000000000000000000000005?span=0000000000000001"`)
	_, _, body = get(t, ts.URL+"/run/run.jsonl")
	require.Regexp(t, `href="http://jaeger.test/trace/0{31}[0-9a-f]\?span=000000000000000[1-3]"`, body)
}

// TestHostileContent: what agents wrote is shown as text; the policy
// forbids inline script; the handler only reads; requests reach only the
// served logs, and a log's transcript links only its own directory.
func TestHostileContent(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "runs")
	require.NoError(t, os.Mkdir(dir, 0o755))
	log := filepath.Join(dir, "run.jsonl")
	writeRun(t, log, 0.8, 1)
	secret := filepath.Join(root, "secret.jsonl")
	require.NoError(t, os.WriteFile(secret, []byte(`{"run_id":"SECRET","events":[{"kind":"SECRET"}]}`+"\n"), 0o644))
	// A log whose records link transcripts outside its directory.
	w, err := jsonl.Append(log, nil)
	require.NoError(t, err)
	for i, link := range []string{secret + "#0", "../secret.jsonl#0", "file://" + secret + "#0"} {
		r := sink.Record{Schema: 1, RunID: "run-1", Eval: "arith", SampleID: fmt.Sprintf("evil-%d", i), Status: sink.Fail, Transcript: link, StartedAt: time.Now()}
		require.NoError(t, w.Write(context.Background(), r))
	}
	require.NoError(t, w.Close(context.Background()))
	// A symbolic link in the directory to the file outside it.
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "link.traces.jsonl")))
	w, err = jsonl.Append(log, nil)
	require.NoError(t, err)
	require.NoError(t, w.Write(context.Background(), sink.Record{Schema: 1, RunID: "run-1", Eval: "arith", SampleID: "evil-3", Status: sink.Fail, Transcript: "link.traces.jsonl#0"}))
	require.NoError(t, w.Close(context.Background()))

	_, ts := serve(t, []string{dir}, nil)
	for _, path := range []string{"/", "/run/run.jsonl", "/sample/run.jsonl?s=s-01", "/transcript/run.jsonl?s=s-01&e=0", "/transcript/run.jsonl?s=s-01&e=0&fragment=1"} {
		code, h, body := get(t, ts.URL+path)
		require.Equal(t, 200, code, path)
		require.Contains(t, h.Get("Content-Security-Policy"), "script-src 'self'", path)
		require.NotContains(t, h.Get("Content-Security-Policy"), "unsafe-inline", path)
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
		for _, raw := range []string{"<script>window", "<img src=x", "<svg onload", "<b>unavailable", "<i>wrong"} {
			notContains(t, body, raw, "%s shows hostile markup unescaped", path)
		}
		if !strings.Contains(path, "fragment=1") {
			require.Equal(t, 1, strings.Count(body, "<script"), "%s: only the viewer's own script", path)
		}
	}
	_, _, body := get(t, ts.URL+"/transcript/run.jsonl?s=s-01&e=0")
	contains(t, body, "&lt;svg onload=&#34;window.pwned=3&#34;&gt;", "the transcript shows the event's name as text")

	for i := range 4 {
		code, _, body := get(t, ts.URL+fmt.Sprintf("/transcript/run.jsonl?s=evil-%d&e=0", i))
		require.Equal(t, http.StatusForbidden, code, "evil-%d: %s", i, body)
		notContains(t, body, "SECRET")
	}
	for _, path := range []string{
		"/run/../secret.jsonl", "/run/..%2fsecret.jsonl", "/run/%2e%2e/secret.jsonl", "/run/" + secret, "/run//" + secret,
		"/sample/..%2f..%2fsecret.jsonl?s=x", "/events/..%2fsecret.jsonl", "/compare?base=../secret.jsonl&head=run.jsonl",
		"/assets/../server.go", "/assets/..%2fserver.go", "/run/run.jsonl.traces.jsonl",
	} {
		req, err := http.NewRequest("GET", ts.URL, nil)
		require.NoError(t, err)
		req.URL.Opaque = strings.SplitN(path, "?", 2)[0] // sent as is, not cleaned by the client
		if q := strings.SplitN(path, "?", 2); len(q) == 2 {
			req.URL.RawQuery = q[1]
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		resp.Body.Close()
		if resp.StatusCode < 300 || resp.StatusCode >= 400 { // a redirect to a cleaned path is fine: it is then refused
			require.GreaterOrEqual(t, resp.StatusCode, 400, "%s answered %d", path, resp.StatusCode)
		}
		require.NotContains(t, string(b[:n]), "SECRET", path)
		require.NotContains(t, string(b[:n]), "package view", path)
	}
	for _, method := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		req, _ := http.NewRequest(method, ts.URL+"/run/run.jsonl", strings.NewReader("x"))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, method)
	}
}

// TestLiveTail follows a log as it is written: the stream reports each
// batch of records; a half-written last line is not counted (nor an
// error) until its newline arrives.
func TestLiveTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "live.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	write := func(from, to int) {
		for i := from; i < to; i++ {
			r := record(rng, fmt.Sprintf("s-%02d", i), 0, i, 0.7, 1)
			r.StartedAt = time.Now()
			require.NoError(t, w.Write(context.Background(), r))
		}
		require.NoError(t, w.Flush())
	}
	write(0, 5)
	_, ts := serve(t, []string{log}, &view.Options{Poll: 20 * time.Millisecond})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/events/live.jsonl", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := bufio.NewScanner(resp.Body)
	next := func() map[string]any {
		for events.Scan() {
			if data, ok := strings.CutPrefix(events.Text(), "data: "); ok {
				var c map[string]any
				require.NoError(t, json.Unmarshal([]byte(data), &c))
				return c
			}
		}
		t.Fatalf("the stream ended: %v", events.Err())
		return nil
	}
	require.EqualValues(t, 5, next()["episodes"])
	write(5, 12)
	require.EqualValues(t, 12, next()["episodes"])

	// A torn last line: half a record, as a crash or a write in progress
	// leaves it.
	r := record(rng, "s-99", 0, 99, 0.7, 1)
	line := r.AppendJSON(nil)
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(line[:len(line)/2])
	require.NoError(t, err)
	c := next()
	require.EqualValues(t, 12, c["episodes"], "a half line is not a record")
	require.EqualValues(t, len(line)/2, c["tail"])
	_, _, body := get(t, ts.URL+"/run/live.jsonl")
	contains(t, body, fmt.Sprintf("%d bytes after the last complete record", len(line)/2))
	notContains(t, body, `class="error"`)
	_, err = f.Write(append(line[len(line)/2:], '\n'))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.EqualValues(t, 13, next()["episodes"])
	require.NoError(t, w.Close(context.Background()))

	// A rewritten log (resume drops error records atomically) is read
	// again from the start.
	tmp := filepath.Join(dir, "tmp")
	w2, err := jsonl.Create(tmp, nil)
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, w2.Write(context.Background(), record(rng, fmt.Sprintf("s-%02d", i), 0, i, 1, 1)))
	}
	require.NoError(t, w2.Close(context.Background()))
	require.NoError(t, os.Rename(tmp, log))
	require.EqualValues(t, 3, next()["episodes"])
}

// TestBadLogs: a corrupt line is an error naming the file and line; a
// torn tail is noted and the records before it counted; a file that is not
// a log is left out of a directory's runs.
func TestBadLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	writeRun(t, good, 0.8, 1)
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(b), "\n")
	corrupt := strings.Join(lines[:3], "") + "{\"schema\":1,\"run_id\":\n" + strings.Join(lines[3:], "")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "corrupt.jsonl"), []byte(corrupt), 0o644))
	torn := strings.Join(lines[:10], "") + lines[10][:40]
	require.NoError(t, os.WriteFile(filepath.Join(dir, "torn.jsonl"), []byte(torn), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dataset.jsonl"), []byte(`{"id":"q1","input":{"q":"?"}}`+"\n"), 0o644))

	_, ts := serve(t, []string{dir}, nil)
	_, _, body := get(t, ts.URL+"/run/corrupt.jsonl")
	contains(t, body, html.EscapeString(filepath.Join(dir, "corrupt.jsonl"))+":4: corrupt record")
	_, _, body = get(t, ts.URL+"/run/torn.jsonl")
	contains(t, body, `<span id="done">10</span>`)
	contains(t, body, "40 bytes after the last complete record")
	_, _, body = get(t, ts.URL+"/")
	contains(t, body, ">good.jsonl<")
	notContains(t, body, "dataset.jsonl", "a dataset is not a run")
	notContains(t, body, "traces.jsonl", "a transcript store is not a run")
	code, _, body := get(t, ts.URL+"/run/dataset.jsonl")
	require.Equal(t, 200, code)
	contains(t, body, "not a proctor log")
}

// TestCompareMatchesText: the compare page prints CompareLogs' numbers.
func TestCompareMatchesText(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, head := filepath.Join(dir, "base.jsonl"), filepath.Join(dir, "head.jsonl")
	writeRun(t, base, 0.85, 1)
	writeRun(t, head, 0.55, 2)
	_, ts := serve(t, []string{dir}, nil)
	code, _, body := get(t, ts.URL+"/compare?base=base.jsonl&head=head.jsonl&margin=0.02")
	require.Equal(t, 200, code, body)
	c, err := report.CompareLogs(base, head, &report.CompareOptions{Margin: 0.02})
	require.NoError(t, err)
	d := c.PassRate
	require.Contains(t, html.UnescapeString(body), fmt.Sprintf("<td>pass rate</td><td>%.1f%%</td><td>%.1f%%</td><td>%+.1f pts</td><td>[%+.1f pts, %+.1f pts]</td>",
		100*d.MeanA, 100*d.MeanB, 100*d.Mean, 100*d.Lo, 100*d.Hi))
	require.NotNil(t, c.NoiseFloor, "three epochs a run: a noise floor")
	require.Contains(t, html.UnescapeString(body), fmt.Sprintf(`id="noise-floor">noise floor ±%.1f pts`, 100*c.NoiseFloor.HalfWidth))
	require.Contains(t, html.UnescapeString(body), fmt.Sprintf("the difference %+.1f pts is outside it", 100*d.Mean))
	for _, v := range c.Verdict() {
		require.Contains(t, html.UnescapeString(body), "verdict: "+v)
	}
	for _, f := range c.Flips {
		contains(t, body, `href="/sample/base.jsonl?s=`+f.SampleID+`"`)
		contains(t, body, `href="/sample/head.jsonl?s=`+f.SampleID+`"`)
	}
	require.NotEmpty(t, c.Flips)
	contains(t, body, "<title>head − base pass rate (points)")
	code, _, _ = get(t, ts.URL+"/compare?base=base.jsonl&head=head.jsonl&margin=abc")
	require.Equal(t, http.StatusBadRequest, code)
}

// TestWriteHTML: report -html's page is one file: inline style and SVG,
// no script, no reference to the server, the text report's numbers.
func TestWriteHTML(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	writeRun(t, log, 0.8, 1)
	var b strings.Builder
	require.NoError(t, view.WriteHTML(&b, log, nil))
	out := b.String()
	require.Contains(t, out, "<style>")
	require.Contains(t, out, "<svg")
	require.Contains(t, out, `http-equiv="Content-Security-Policy"`)
	for _, bad := range []string{"<script", "/assets/", `href="/`, `action="/`, "<link"} {
		require.NotContains(t, out, bad)
	}
	want := textRows(textReport(t, log), summaryMetrics)
	got := pageRows(out)
	for _, m := range summaryMetrics {
		require.Equal(t, want[m], got[m], m)
	}
	err := view.WriteHTML(&b, filepath.Join(t.TempDir(), "missing.jsonl"), nil)
	require.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
}

// FuzzFold feeds arbitrary bytes to the viewer as a log: no panic, and
// when the log reader accepts the file, the viewer counts the same
// records.
func FuzzFold(f *testing.F) {
	r := sink.Record{Schema: 1, RunID: "r", Eval: "e", SampleID: "s", Status: sink.Pass, Score: 1, Tags: map[string]string{"t": "v"}}
	line := string(r.AppendJSON(nil))
	for _, seed := range []string{"", "\n", line + "\n", line + "\n" + line[:20], line + "\n\n  \n" + line + "\n", "{}\n", "not a log\n", line + "\nx\n" + line + "\n",
		`{"schema":2}` + "\n", line + "\n" + `{"schema":1,"sample_id":"x","tags":{"a":"<b>"}}` + "\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		log := filepath.Join(dir, "f.jsonl")
		if err := os.WriteFile(log, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		err := view.WriteHTML(&b, log, &view.Options{Report: &report.Options{Resamples: -1}})
		n, clean := 0, true
		for _, rerr := range jsonl.Records(log) {
			var torn *jsonl.TornTailError
			if errors.As(rerr, &torn) {
				break
			}
			if rerr != nil {
				clean = false
				break
			}
			n++
		}
		if clean && n > 0 {
			if err != nil {
				t.Fatalf("the log reader reads %d records, the viewer fails: %v", n, err)
			}
			if !strings.Contains(b.String(), fmt.Sprintf(`<span id="done">%d</span>`, n)) {
				t.Fatalf("the log reader reads %d records, the viewer shows otherwise", n)
			}
		}
	})
}

// TestRunReportIsTheTextReport: the viewer reads a log with the reader of
// `proctor report` (records added in file order), so the report it holds
// is the text report's to the last bit, read in many chunks and after the
// log grew between two reads. (Not parallel: it sets the chunk size.)
func TestRunReportIsTheTextReport(t *testing.T) {
	defer view.SetChunkSize(view.SetChunkSize(1500))
	log := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	defer w.Close(context.Background())
	v, err := view.New([]string{log}, nil)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(5, 6))
	for ep := range 4 {
		for i := range 40 {
			require.NoError(t, w.Write(context.Background(), record(rng, fmt.Sprintf("s-%02d", i), ep, i, 0.7, 1)))
		}
		require.NoError(t, w.Flush())
		got, err := v.Report("run.jsonl")
		require.NoError(t, err)
		want, err := report.FromRecords(jsonl.Records(log), nil)
		require.NoError(t, err)
		require.Equal(t, 40*(ep+1), got.Episodes)
		wantJSON, err := json.Marshal(want)
		require.NoError(t, err)
		gotJSON, err := json.Marshal(got)
		require.NoError(t, err)
		require.Equal(t, string(wantJSON), string(gotJSON), "after epoch %d", ep)
		require.Equal(t, want.SampleResults(), got.SampleResults(), "after epoch %d", ep)
	}
}

// TestCompareOfRunsOfOneAgent: two logs whose manifests name the same
// versions are runs of one agent; the compare page says its noise floor
// comes from both runs, as proctor compare does.
func TestCompareOfRunsOfOneAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, head := filepath.Join(dir, "base.jsonl"), filepath.Join(dir, "head.jsonl")
	writeRun(t, base, 0.7, 1)
	writeRun(t, head, 0.7, 2)
	for _, log := range []string{base, head} {
		require.NoError(t, manifest.Write(log, &manifest.Manifest{Schema: manifest.Schema, RunID: "r-" + filepath.Base(log), Eval: "view", Versions: manifest.Versions{Harness: "v1"}}))
	}
	c, err := report.CompareLogs(base, head, nil)
	require.NoError(t, err)
	require.True(t, c.SameAgent)
	_, ts := serve(t, []string{dir}, nil)
	code, _, body := get(t, ts.URL+"/compare?base=base.jsonl&head=head.jsonl")
	require.Equal(t, 200, code, body)
	body = html.UnescapeString(body)
	require.Contains(t, body, "from the spread of each sample across both runs, taken as runs of one agent)")
	require.Contains(t, body, fmt.Sprintf(`id="noise-floor">noise floor ±%.1f pts`, 100*c.NoiseFloor.HalfWidth))
}
