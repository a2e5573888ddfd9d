package view_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink/jsonl"
)

// TestFutureSchemaLastLineIsAnErrorAsForResume: a log whose last line is
// a whole record of a later schema is refused by the viewer as by resume
// and report (jsonl.SchemaError); it showed as a healthy run "writing".
func TestFutureSchemaLastLineIsAnErrorAsForResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "future.jsonl")
	writeRun(t, log, 0.8, 1)
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(b), "\n")
	future := strings.Replace(lines[0], `{"schema":1,`, `{"schema":2,`, 1)
	require.NoError(t, os.WriteFile(log, append(b, future...), 0o644))

	_, _, err = jsonl.Open(log, nil)
	var schema *jsonl.SchemaError
	require.ErrorAs(t, err, &schema, "resume refuses it")

	_, ts := serve(t, []string{dir}, nil)
	_, _, body := get(t, ts.URL+"/run/future.jsonl")
	contains(t, body, "record schema 2, this version of proctor reads schema 1")
	notContains(t, body, `id="tail"`, "not a record being written")
	_, _, body = get(t, ts.URL+"/")
	contains(t, body, "record schema 2")
	notContains(t, body, "writing", "not a live run")
}

// TestViewerRefusesAFIFO: a FIFO named as a log in the runs directory, or
// in place of a log's transcript store, does not hang the pages that
// read it.
func TestViewerRefusesAFIFO(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no FIFOs")
	}
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	writeRun(t, good, 0.8, 1)
	require.NoError(t, os.Remove(good+".traces.jsonl"))
	if err := syscall.Mkfifo(good+".traces.jsonl", 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.jsonl"), 0o644))
	_, ts := serve(t, []string{dir}, nil)
	done := make(chan string, 1)
	go func() {
		_, _, body := get(t, ts.URL+"/run/fifo.jsonl")
		_, _, index := get(t, ts.URL+"/")
		_, _, tr := get(t, ts.URL+"/transcript/good.jsonl?s=s-01&e=0")
		done <- body + index + tr
	}()
	select {
	case body := <-done:
		contains(t, body, "good.jsonl")
		contains(t, body, "not a regular file")
	case <-time.After(20 * time.Second):
		t.Fatal("a FIFO hangs the viewer")
	}
}

// TestTranscriptOfAnotherEpisodeIsNotShown: a record whose link points to
// another episode's transcript (a trace store deleted or cut, then
// appended to) shows an error, not that episode's events.
func TestTranscriptOfAnotherEpisodeIsNotShown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	writeRun(t, log, 0.8, 1)
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(b), "\n")
	link := func(line string) string {
		i := strings.Index(line, `"trace":"`) + len(`"trace":"`)
		return line[i : i+strings.IndexByte(line[i:], '"')]
	}
	// Line 0 is s-00 epoch 0; line 1 is s-01 epoch 0.
	lines[0] = strings.Replace(lines[0], link(lines[0]), link(lines[1]), 1)
	require.NoError(t, os.WriteFile(log, []byte(strings.Join(lines, "")), 0o644))

	_, ts := serve(t, []string{dir}, nil)
	_, _, body := get(t, ts.URL+"/transcript/run.jsonl?s=s-00&e=0")
	contains(t, body, `it is &#34;s-01&#34; epoch 0&#39;s, not &#34;s-00&#34; epoch 0&#39;s`)
}
