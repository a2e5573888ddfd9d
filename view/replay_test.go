package view_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/view"
)

// TestReplayShows: a run whose episodes were resumed by replay shows it
// on its run page (the text report's row "model calls not bought", from
// the records) and on a sample's page (how many calls were replayed, and
// where the replay diverged).
func TestReplayShows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	for i := range 4 {
		r := sink.Record{Schema: 1, RunID: "r", Eval: "e", SampleID: fmt.Sprintf("s%d", i), Status: sink.Pass, Score: 1, Seed: uint64(i),
			InputTokens: 100, OutputTokens: 10}
		switch i {
		case 1:
			r.CallsReplayed = 7
		case 2:
			r.CallsReplayed, r.ReplayDivergedAt = 3, 4
		}
		require.NoError(t, w.Write(context.Background(), r))
	}
	require.NoError(t, w.Close(context.Background()))
	_, ts := serve(t, []string{dir}, nil)

	code, _, body := get(t, ts.URL+"/run/run.jsonl")
	require.Equal(t, 200, code, body)
	want := textRows(textReport(t, log), []string{"model calls not bought"})["model calls not bought"]
	require.Equal(t, "10 replayed from the call store, 0 served from the cache (-cache-from), 1 episodes diverged", want)
	require.Equal(t, want, pageRows(body)["model calls not bought"])

	_, _, body = get(t, ts.URL+"/sample/run.jsonl?s=s2")
	contains(t, body, "<td>model calls replayed</td><td>3 from the call store, not bought again (in no usage above); diverged at call 4, live from there</td>")
	_, _, body = get(t, ts.URL+"/sample/run.jsonl?s=s1")
	contains(t, body, "<td>7 from the call store, not bought again (in no usage above)</td>")
	_, _, body = get(t, ts.URL+"/sample/run.jsonl?s=s0")
	notContains(t, body, "model calls replayed")
}

// TestGovernorShowsOnALiveRun: the page of a run being written shows the
// rate governor's lanes (Options.Governor, read at each page), and the
// page of a finished run does not.
func TestGovernorShowsOnALiveRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	require.NoError(t, w.Write(context.Background(), sink.Record{Schema: 1, RunID: "r", Eval: "e", SampleID: "s", Status: sink.Pass, Score: 1}))
	require.NoError(t, w.Flush())
	var waiting atomic.Int64
	waiting.Store(7)
	_, ts := serve(t, []string{dir}, &view.Options{Governor: func() []view.GovernorLane {
		return []view.GovernorLane{{Provider: "anthropic", Model: "claude-haiku-4-5", Limit: 12, InFlight: 12, Waiting: int(waiting.Load())}}
	}})
	_, _, body := get(t, ts.URL+"/run/run.jsonl")
	contains(t, body, `<table class="governor" id="governor">`)
	contains(t, body, "<tr><td>anthropic</td><td>claude-haiku-4-5</td><td>12</td><td>12</td><td>7</td></tr>")
	waiting.Store(0)
	_, _, body = get(t, ts.URL+"/run/run.jsonl")
	contains(t, body, "<td>12</td><td>12</td><td>0</td>", "read again at each page")
	require.NoError(t, w.Close(context.Background()))
	_, _, body = get(t, ts.URL+"/run/run.jsonl")
	notContains(t, body, `id="governor"`, "a finished run has no governor")
}
