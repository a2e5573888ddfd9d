package eval_test

// Regression tests for "Trust, round 3" (issue 24): the log and its
// neighbours.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
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
	require.NoError(t, os.Remove(eval.ManifestPath(log)))

	second := &eval.Eval[string, string]{Name: "second", Dataset: samples("ok", "no", "ok"), Harness: echo, Judge: wantOK}
	_, err = second.Run(context.Background(), eval.Config{Log: log, Seed: 3})
	var mm *eval.ManifestMismatchError
	require.ErrorAs(t, err, &mm)
	require.Contains(t, err.Error(), `eval: "first" in the log's records, "second" now`)
	_, err = first.Run(context.Background(), eval.Config{Log: log, Seed: 4})
	require.ErrorAs(t, err, &mm)
	require.Contains(t, err.Error(), "another run seed than 4")
	_, err = os.Stat(eval.ManifestPath(log))
	require.ErrorIs(t, err, os.ErrNotExist, "a refused run writes no manifest")

	rep, err := first.Run(context.Background(), eval.Config{Log: log, Seed: 3})
	require.NoError(t, err, "its own eval resumes it")
	require.Equal(t, 2, rep.Resumed)
	_, err = second.Run(context.Background(), eval.Config{Log: log, Seed: 3, AllowChanged: true})
	require.NoError(t, err, "AllowChanged adopts it knowingly")
}
