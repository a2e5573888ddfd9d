package view_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// TestCompactedTranscript: after proctor compact dropped a transcript,
// the sample and transcript pages say "compacted" instead of failing.
func TestCompactedTranscript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	writeRun(t, log, 0.8, 1)
	_, err := jsonl.Compact(log, func(r *sink.Record) bool { return r.SampleID != "s-01" })
	require.NoError(t, err)
	_, ts := serve(t, []string{dir}, nil)

	code, _, body := get(t, ts.URL+"/sample/run.jsonl?s=s-01")
	require.Equal(t, 200, code)
	require.Contains(t, body, "(compacted)")
	code, _, body = get(t, ts.URL+"/transcript/run.jsonl?s=s-01&e=0")
	require.Equal(t, 200, code)
	require.Contains(t, body, `<p class="error">jsonl: the transcript was compacted`)
	code, _, body = get(t, ts.URL+"/transcript/run.jsonl?s=s-02&e=0&fragment=1")
	require.Equal(t, 200, code)
	require.Contains(t, body, `<table class="events">`, "a kept transcript reads from the new store")
}

// TestCompactedStoreIsNotARun: the store Compact writes,
// run.traces.c1.jsonl, is not listed as a run.
func TestCompactedStoreIsNotARun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	writeRun(t, log, 0.8, 1)
	res, err := jsonl.Compact(log, func(r *sink.Record) bool { return r.SampleID != "s-01" })
	require.NoError(t, err)
	require.FileExists(t, res.Store)
	_, ts := serve(t, []string{dir}, nil)
	code, _, body := get(t, ts.URL+"/")
	require.Equal(t, 200, code)
	require.Contains(t, body, `href="/run/run.jsonl"`)
	require.NotContains(t, body, "traces.c1")
}
