package eval_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
)

func TestRejudgeRunsOnlyTheJudge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var harnessCalls atomic.Int32
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		harnessCalls.Add(1)
		if ep.Sample.Input == "crash" {
			return "", errors.New("sandbox died")
		}
		return ep.Sample.Input + "!", nil
	})
	graderDown := judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
		if ep.Sample.Input == "b" {
			return judge.Verdict{}, errors.New("grader API: 503")
		}
		return judge.Verdict{Pass: out == "a!"}, nil
	})
	e := &eval.Eval[string, string]{Name: "rj", Dataset: samples("a", "b", "c", "crash"), Harness: h, Judge: graderDown}
	orig := filepath.Join(dir, "orig.jsonl")
	first, err := e.Run(context.Background(), eval.Config{Epochs: 2, Retries: -1, Log: orig, Seed: 9})
	require.NoError(t, err)
	require.Equal(t, []int{2, 2, 4}, []int{first.Passed, first.Failed, first.Errored})
	require.Equal(t, int32(8), harnessCalls.Load())

	// A new judge, fixed grader: every output that exists is judged again.
	var seen []string
	lenient := judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
		seen = append(seen, out)
		return judge.Verdict{Pass: len(out) == 2, Reason: "length check"}, nil
	})
	e.Judge = lenient
	re := filepath.Join(dir, "rejudged.jsonl")
	rep, err := e.Rejudge(context.Background(), orig, eval.Config{Log: re, Concurrency: 1})
	require.NoError(t, err)
	require.Equal(t, int32(8), harnessCalls.Load(), "the harness is never called")
	require.Len(t, seen, 6, "a, b and c, two epochs each; crash has no output")
	require.Equal(t, 6, rep.Passed)
	require.NotEqual(t, first.RunID, rep.RunID)
	require.Len(t, rep.Warnings, 1)
	require.Contains(t, rep.Warnings[0], "2 episodes")

	origSeeds := map[sink.Key]uint64{}
	for _, r := range logRecords(t, orig) {
		origSeeds[r.Key()] = r.Seed
	}
	recs := logRecords(t, re)
	require.Len(t, recs, 6)
	for _, r := range recs {
		require.Equal(t, first.RunID, r.ParentRunID)
		require.Equal(t, origSeeds[r.Key()], r.Seed, "episodes keep their seeds")
		tr, err := eval.ReadTranscript(r.Transcript, dir)
		require.NoError(t, err)
		var link map[string]string
		require.NoError(t, json.Unmarshal(tr.Events[0].Input, &link))
		require.Equal(t, first.RunID, link["run_id"], "the transcript links to the original run")
	}

	// Rejudging resumes like a run: nothing is left to do.
	seen = nil
	_, err = e.Rejudge(context.Background(), orig, eval.Config{Log: re})
	require.NoError(t, err)
	require.Empty(t, seen)
}

func TestBudgetStopsScheduling(t *testing.T) {
	t.Parallel()
	costly := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		ep.AddEvent(harness.Event{Kind: "model", Usage: harness.Usage{InputTokens: 100, CostUSD: 1}})
		return ep.Sample.Input, nil
	})
	inputs := make([]string, 100)
	for i := range inputs {
		inputs[i] = "ok"
	}
	e := &eval.Eval[string, string]{Name: "budget", Dataset: samples(inputs...), Harness: costly, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{Concurrency: 2, MaxCostUSD: 10})
	require.NoError(t, err)
	require.True(t, rep.BudgetExhausted)
	require.GreaterOrEqual(t, rep.Usage.CostUSD, 10.0)
	// Episodes already in flight when the budget was reached still finish.
	require.LessOrEqual(t, rep.Episodes, 10+2)
	require.Less(t, rep.Episodes, 100)
	require.Contains(t, rep.String(), "budget")
}
