package eval_test

// Regression tests for "Trust, round 3" (issue 24): the log and its
// neighbours.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

func deepJSON(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", depth) + strings.Repeat("]", depth))
}

// TestDeepOutputCostsOneEpisodeNotTheLog: an output or input nested
// 10,000 deep (valid JSON, the most encoding/json reads) used to be
// written as a record nested one deeper, which every reader refused:
// resume, report and the viewer failed on the whole log. Now the episode
// is an error that says why, and the log stays readable and resumable.
func TestDeepOutputCostsOneEpisodeNotTheLog(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	d := dataset.Slice[json.RawMessage]{
		{ID: "fine", Input: json.RawMessage(`{"q":1}`)},
		{ID: "deep-output", Input: json.RawMessage(`{"q":2}`)},
		{ID: "deep-input", Input: deepJSON(10000)},
		{ID: "last", Input: json.RawMessage(`{"q":3}`)},
	}
	h := harness.Func[json.RawMessage, json.RawMessage](func(_ context.Context, ep *harness.Episode[json.RawMessage]) (json.RawMessage, error) {
		if ep.Sample.ID == "deep-output" {
			return deepJSON(10000), nil
		}
		return json.RawMessage(`"ok"`), nil
	})
	j := judge.Func[json.RawMessage, json.RawMessage](func(context.Context, *harness.Episode[json.RawMessage], json.RawMessage) (judge.Verdict, error) {
		return judge.Pass("fine"), nil
	})
	e := &eval.Eval[json.RawMessage, json.RawMessage]{Name: "deep", Dataset: d, Harness: h, Judge: j}
	rep, err := e.Run(context.Background(), eval.Config{Log: log, Concurrency: 1})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Passed)
	require.Equal(t, 2, rep.Errored)

	byID := map[string]sink.Record{}
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err, "every record written is read back")
		byID[r.SampleID] = r
	}
	require.Len(t, byID, 4)
	for _, id := range []string{"deep-output", "deep-input"} {
		r := byID[id]
		require.Equal(t, sink.Error, r.Status, id)
		what := strings.TrimPrefix(id, "deep-")
		require.Contains(t, r.Error, "the "+what+" is nested deeper than 512 levels", id)
		require.Contains(t, r.Error, "permanent", id)
	}

	// Resume reads the log (it refused it before) and runs the two
	// errors again, which end as before.
	rep, err = e.Run(context.Background(), eval.Config{Log: log})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Resumed)
	require.Equal(t, 2, rep.Errored)
}

// TestALogWithoutItsManifestIsNotAdoptedByAnotherEval: with the manifest
// gone, another eval (or seed) resumed the log, printed its records as its
// own and wrote its manifest over it, so that the first eval was then
// refused on its own log. The records name their eval and carry seeds
// derived from the run's: they are checked instead.
func TestALogWithoutItsManifestIsNotAdoptedByAnotherEval(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	first := &eval.Eval[string, string]{Name: "first", Dataset: samples("ok", "ok"), Harness: echo, Judge: wantOK}
	_, err := first.Run(context.Background(), eval.Config{Log: log, Seed: 3})
	require.NoError(t, err)
	require.NoError(t, os.Remove(manifest.Path(log)))

	second := &eval.Eval[string, string]{Name: "second", Dataset: samples("ok", "no", "ok"), Harness: echo, Judge: wantOK}
	_, err = second.Run(context.Background(), eval.Config{Log: log, Seed: 3})
	var mm *manifest.MismatchError
	require.ErrorAs(t, err, &mm)
	require.Contains(t, err.Error(), `eval: "first" in the log's records, "second" now`)
	_, err = first.Run(context.Background(), eval.Config{Log: log, Seed: 4})
	require.ErrorAs(t, err, &mm)
	require.Contains(t, err.Error(), "another run seed than 4")
	_, err = os.Stat(manifest.Path(log))
	require.ErrorIs(t, err, os.ErrNotExist, "a refused run writes no manifest")

	rep, err := first.Run(context.Background(), eval.Config{Log: log, Seed: 3})
	require.NoError(t, err, "its own eval resumes it")
	require.Equal(t, 2, rep.Resumed)
	_, err = second.Run(context.Background(), eval.Config{Log: log, Seed: 3, AllowChanged: true})
	require.NoError(t, err, "AllowChanged adopts it knowingly")
}

// TestResumeNeverReusesATranscriptOffsetARecordLinksTo: after the trace
// store was deleted (or cut), resume appended at its new end, so that new
// transcripts took the offsets older records link to, and those records
// showed another episode's transcript. Now the store skips past every
// offset the log links to.
func TestResumeNeverReusesATranscriptOffsetARecordLinksTo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	var failing atomic.Bool
	failing.Store(true)
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		ep.AddEvent(harness.Event{Kind: "note", Name: "hello " + ep.Sample.ID})
		if ep.Sample.ID == "s2" && failing.Load() {
			return "", eval.Permanent(errors.New("down"))
		}
		return ep.Sample.Input, nil
	})
	e := &eval.Eval[string, string]{Name: "links", Dataset: samples("ok", "ok", "ok"), Harness: h, Judge: wantOK}
	_, err := e.Run(context.Background(), eval.Config{Log: log, Concurrency: 1})
	require.NoError(t, err)
	for _, cut := range []func(string) error{
		os.Remove,
		func(store string) error { return os.Truncate(store, 0) },
	} {
		require.NoError(t, cut(filepath.Join(dir, "run.traces.jsonl")))
		failing.Store(false)
		_, err = e.Run(context.Background(), eval.Config{Log: log, Concurrency: 1})
		require.NoError(t, err)
		failing.Store(true)
		recs := logRecords(t, log)
		require.Len(t, recs, 3)
		for _, r := range recs {
			tr, err := eval.ReadTranscript(r.Transcript, dir)
			if err == nil {
				require.Equal(t, r.SampleID, tr.SampleID, "the link of %s shows another episode", r.SampleID)
			}
		}
		last := recs[len(recs)-1]
		tr, err := eval.ReadTranscript(last.Transcript, dir)
		require.NoError(t, err, "the resumed episode's transcript")
		require.Equal(t, "hello s2", tr.Events[0].Name)
		// The next round runs s2 again.
		f, err := os.ReadFile(log)
		require.NoError(t, err)
		lines := strings.SplitAfter(strings.TrimSuffix(string(f), "\n"), "\n")
		require.NoError(t, os.WriteFile(log, []byte(strings.Join(lines[:len(lines)-1], "")), 0o644))
	}
}

// TestReuseCopiesOnlyTranscriptsBesideTheLogAndOfTheRecord: -reuse-from
// copied whatever file a record's link named (a planted absolute link
// copied a secret into the new run's store), and a transcript of another
// episode. Now such a record is reused without its transcript.
func TestReuseCopiesOnlyTranscriptsBesideTheLogAndOfTheRecord(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "runs")
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		ep.AddEvent(harness.Event{Kind: "note", Name: "hello " + ep.Sample.ID})
		return ep.Sample.Input, nil
	})
	e := &eval.Eval[string, string]{Name: "reuse-links", Dataset: samples("ok", "ok", "ok"), Harness: h, Judge: wantOK}
	old := filepath.Join(dir, "old.jsonl")
	_, err := e.Run(context.Background(), eval.Config{Log: old, Concurrency: 1})
	require.NoError(t, err)
	secret := filepath.Join(root, "secret.jsonl")
	require.NoError(t, os.WriteFile(secret, []byte(`{"run_id":"x","sample_id":"s0","epoch":0,"events":[{"kind":"note","name":"SECRET-TOKEN"}]}`+"\n"), 0o600))
	recs := logRecords(t, old)
	b, err := os.ReadFile(old)
	require.NoError(t, err)
	text := strings.Replace(string(b), `"trace":"`+recs[0].Transcript+`"`, `"trace":"`+secret+`#0"`, 1)
	text = strings.Replace(text, `"trace":"`+recs[1].Transcript+`"`, `"trace":"`+recs[2].Transcript+`"`, 1)
	require.NoError(t, os.WriteFile(old, []byte(text), 0o644))

	log := filepath.Join(dir, "new.jsonl")
	rep, err := e.Run(context.Background(), eval.Config{Log: log, ReuseFrom: []string{old}})
	require.NoError(t, err)
	require.Equal(t, 3, rep.Reused)
	store, err := os.ReadFile(filepath.Join(dir, "new.traces.jsonl"))
	require.NoError(t, err)
	require.NotContains(t, string(store), "SECRET-TOKEN")
	for _, r := range logRecords(t, log) {
		if r.SampleID == "s2" {
			tr, err := eval.ReadTranscript(r.Transcript, dir)
			require.NoError(t, err)
			require.Equal(t, "s2", tr.SampleID)
			continue
		}
		require.Empty(t, r.Transcript, "%s: a transcript not its own, or outside the log's directory, is not copied", r.SampleID)
	}
}
