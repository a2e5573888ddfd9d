package eval_test

// Regression tests for "Trust": each names the behavior it holds.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
)

func TestResumeRefusesALogOfAnotherEvalOrVersion(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	e := &eval.Eval[string, string]{Name: "first", Dataset: samples("ok", "ok"), Harness: echo, Judge: wantOK,
		Versions: eval.Versions{Judge: "v1"}}
	_, err := e.Run(context.Background(), eval.Config{Log: log})
	require.NoError(t, err)
	m, err := manifest.Read(log)
	require.NoError(t, err)
	require.Equal(t, "first", m.Eval)
	require.Equal(t, 2, m.Dataset.Samples)
	require.NotEmpty(t, m.Dataset.Hash)

	other := *e
	other.Name = "second"
	_, err = other.Run(context.Background(), eval.Config{Log: log})
	var mm *manifest.MismatchError
	require.ErrorAs(t, err, &mm)
	require.Contains(t, err.Error(), `eval: "first" in the log, "second" now`)

	changed := *e
	changed.Versions.Judge = "v2"
	_, err = changed.Run(context.Background(), eval.Config{Log: log})
	require.ErrorAs(t, err, &mm)
	require.Contains(t, err.Error(), `judge version: "v1" in the log, "v2" now`)

	_, err = e.Run(context.Background(), eval.Config{Log: log, Seed: 7})
	require.ErrorAs(t, err, &mm, "another seed makes other episodes")

	rep, err := changed.Run(context.Background(), eval.Config{Log: log, AllowChanged: true})
	require.NoError(t, err, "an explicit opt-in resumes it")
	require.Equal(t, 2, rep.Resumed)
	m, err = manifest.Read(log)
	require.NoError(t, err)
	require.Equal(t, "v2", m.Versions.Judge, "the opt-in records the versions now in force")
}

func TestDatasetMayGrowOrShrinkBetweenRuns(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	var calls atomic.Int64
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		calls.Add(1)
		return ep.Sample.Input, nil
	})
	run := func(d dataset.Slice[string], epochs int) *eval.Eval[string, string] {
		return &eval.Eval[string, string]{Name: "grow", Dataset: d, Harness: h, Judge: wantOK}
	}
	_, err := run(samples("ok", "ok", "no", "ok"), 2).Run(context.Background(), eval.Config{Log: log, Epochs: 2})
	require.NoError(t, err)
	require.EqualValues(t, 8, calls.Load())

	// Two samples removed (s2, s3), one added (s4): no panic; only s4 runs;
	// the removed samples' records stay in the log and out of the report.
	calls.Store(0)
	d := samples("ok", "ok", "no", "ok", "ok")
	d = append(d[:2], d[4])
	rep, err := run(d, 2).Run(context.Background(), eval.Config{Log: log, Epochs: 2})
	require.NoError(t, err)
	require.EqualValues(t, 2, calls.Load(), "only the added sample runs")
	require.Equal(t, 4, rep.Excluded, "2 removed samples × 2 epochs")
	require.Equal(t, 3, rep.Samples)
	require.Equal(t, 6, rep.Episodes)
	require.Equal(t, 6, rep.Passed)
	require.Len(t, logRecords(t, log), 10, "nothing is deleted from the log")
	require.True(t, slicesContain(rep.Warnings, "excluded from the report"), "%q", rep.Warnings)

	// Fewer epochs: the later epochs' records are excluded too.
	rep, err = run(d, 1).Run(context.Background(), eval.Config{Log: log, Epochs: 1})
	require.NoError(t, err)
	require.Equal(t, 3, rep.Episodes)
	require.Equal(t, 7, rep.Excluded)
}

func slicesContain(list []string, part string) bool {
	for _, s := range list {
		if strings.Contains(s, part) {
			return true
		}
	}
	return false
}

func TestGoexitInAHarnessCostsOneEpisode(t *testing.T) {
	t.Parallel()
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		if ep.Sample.ID == "s1" {
			runtime.Goexit() // what t.FailNow does from a test helper
		}
		return ep.Sample.Input, nil
	})
	j := judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
		if ep.Sample.ID == "s3" {
			runtime.Goexit()
		}
		return judge.Verdict{Pass: out == "ok"}, nil
	})
	e := &eval.Eval[string, string]{Name: "goexit", Dataset: samples("ok", "ok", "ok", "ok"), Harness: h, Judge: j}
	done := make(chan struct{})
	var rep *report.Report
	var err error
	go func() {
		defer close(done)
		rep, err = e.Run(context.Background(), eval.Config{Concurrency: 2, Retries: 1, Backoff: time.Millisecond, MaxErrorRate: -1})
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after a harness called runtime.Goexit")
	}
	require.NoError(t, err)
	require.Equal(t, 2, rep.Passed)
	require.Equal(t, 2, rep.Errored)
	for _, f := range rep.Failures {
		require.Equal(t, sink.KindPanic, f.ErrorKind)
		require.Contains(t, f.Reason, "runtime.Goexit")
		require.Equal(t, 1, f.Attempt, "an infrastructure error is retried like any other")
	}
}

func TestJudgeFailureRetriesTheJudgeNotTheAgent(t *testing.T) {
	t.Parallel()
	var harnessCalls, judgeCalls atomic.Int64
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		harnessCalls.Add(1)
		ep.AddUsage(harness.Usage{InputTokens: 100, CostUSD: 1})
		return ep.Sample.Input, nil
	})
	j := judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
		judgeCalls.Add(1)
		ep.AddUsage(harness.Usage{InputTokens: 10, CostUSD: 0.01})
		if ep.Attempt < 2 {
			return judge.Verdict{}, errors.New("grader overloaded")
		}
		return judge.Verdict{Pass: out == "ok"}, nil
	})
	log := filepath.Join(t.TempDir(), "run.jsonl")
	e := &eval.Eval[string, string]{Name: "rejudge-on-retry", Dataset: samples("ok", "no"), Harness: h, Judge: j}
	rep, err := e.Run(context.Background(), eval.Config{Retries: 2, Backoff: time.Millisecond, Log: log})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Passed)
	require.Equal(t, 1, rep.Failed)
	require.EqualValues(t, 2, harnessCalls.Load(), "the agent ran once per episode")
	require.EqualValues(t, 6, judgeCalls.Load(), "the judge ran three times per episode")
	for _, r := range logRecords(t, log) {
		require.Equal(t, 2, r.Attempt)
		// Every attempt's usage counts: the agent once, the judge three times.
		require.EqualValues(t, 130, r.InputTokens)
		require.InDelta(t, 1.03, r.CostUSD, 1e-9)
		require.Equal(t, `"`+map[string]string{"s0": "ok", "s1": "no"}[r.SampleID]+`"`, string(r.Output))
	}
	require.InDelta(t, 2.06, rep.Usage.CostUSD, 1e-9)
}

func TestEveryAttemptsCostCountsInRecordsAndBudget(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		calls.Add(1)
		ep.AddUsage(harness.Usage{OutputTokens: 5, CostUSD: 1})
		if ep.Attempt < 2 {
			return "", errors.New("provider hiccup")
		}
		return ep.Sample.Input, nil
	})
	log := filepath.Join(t.TempDir(), "run.jsonl")
	e := &eval.Eval[string, string]{Name: "cost", Dataset: samples("ok", "ok", "ok", "ok", "ok", "ok"), Harness: h, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{Retries: 2, Backoff: time.Millisecond, Concurrency: 1, MaxCostUSD: 5, Log: log, MaxErrorRate: -1})
	require.NoError(t, err)
	require.True(t, rep.BudgetExhausted)
	recs := logRecords(t, log)
	require.Len(t, recs, 2, "3 attempts at $1 each: the budget of $5 is spent during the second episode")
	require.Equal(t, sink.Pass, recs[0].Status)
	require.InDelta(t, 3.0, recs[0].CostUSD, 1e-9, "the record carries the cost of its three attempts")
	require.EqualValues(t, 15, recs[0].OutputTokens)
	// No attempt starts once the budget is spent: the second episode's
	// retry does not, so it ends in error (and runs again on resume), with
	// the cost of the two attempts it made.
	require.Equal(t, sink.Error, recs[1].Status)
	require.InDelta(t, 2.0, recs[1].CostUSD, 1e-9)
	require.InDelta(t, 5.0, rep.Usage.CostUSD, 1e-9, "what was spent, all of it")
	require.EqualValues(t, 5, calls.Load())
}

func TestPermanentErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		calls.Add(1)
		if ep.Sample.Input == "bad" {
			return "", eval.Permanent(errors.New("400 bad request: unknown model"))
		}
		return "", fmt.Errorf("wrapped: %w", httpStatusError(401))
	})
	e := &eval.Eval[string, string]{Name: "permanent", Dataset: samples("bad", "key"), Harness: h, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{Retries: 3, Backoff: time.Millisecond, MaxErrorRate: -1})
	require.NoError(t, err)
	require.EqualValues(t, 2, calls.Load(), "one attempt each")
	require.Equal(t, 2, rep.Errored)
	for _, f := range rep.Failures {
		require.Equal(t, 0, f.Attempt)
		require.Contains(t, f.Reason, "permanent: not retried")
	}
}

// httpStatusError is an error of another package that says it is permanent.
type httpStatusError int

func (e httpStatusError) Error() string   { return fmt.Sprintf("HTTP %d", int(e)) }
func (e httpStatusError) Permanent() bool { return e >= 400 && e < 500 && e != 429 }

func TestABrokenRunStopsEarlyAndResumesOnceFixed(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	broken.Store(true)
	var calls atomic.Int64
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		calls.Add(1)
		if broken.Load() {
			return "", errors.New("401 invalid API key")
		}
		return ep.Sample.Input, nil
	})
	inputs := make([]string, 1000)
	for i := range inputs {
		inputs[i] = "ok"
	}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	e := &eval.Eval[string, string]{Name: "broken", Dataset: samples(inputs...), Harness: h, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{Concurrency: 4, Backoff: time.Millisecond, Log: log})
	var ere *eval.ErrorRateError
	require.ErrorAs(t, err, &ere)
	require.Contains(t, err.Error(), "401 invalid API key")
	require.Less(t, calls.Load(), int64(200), "it stops long before burning the dataset")
	require.GreaterOrEqual(t, ere.Episodes, eval.DefaultErrorRateAfter)
	require.NotNil(t, rep)

	broken.Store(false)
	rep, err = e.Run(context.Background(), eval.Config{Concurrency: 4, Backoff: time.Millisecond, Log: log})
	require.NoError(t, err)
	require.Equal(t, 1000, rep.Passed, "resumed once fixed: every episode passes, each once")
	require.Len(t, logRecords(t, log), 1000)
}

func TestInvalidConfigIsAConfigError(t *testing.T) {
	t.Parallel()
	e := &eval.Eval[string, string]{Name: "cfg", Dataset: samples("ok"), Harness: echo, Judge: wantOK}
	for name, cfg := range map[string]eval.Config{
		"negative concurrency": {Concurrency: -1},
		"negative epochs":      {Epochs: -2},
		"negative backoff":     {Backoff: -time.Second},
		"negative budget":      {MaxCostUSD: -1},
		"error rate above 1":   {MaxErrorRate: 1.5},
		"level of 95":          {Report: report.Options{Level: 95}},
	} {
		_, err := e.Run(context.Background(), cfg)
		var ce *eval.ConfigError
		require.ErrorAs(t, err, &ce, name)
	}
}

func TestTranscriptLinksSurviveMovingTheRunsDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		ep.AddEvent(harness.Event{Kind: "note", Name: "hello " + ep.Sample.ID})
		return ep.Sample.Input, nil
	})
	e := &eval.Eval[string, string]{Name: "move", Dataset: samples("ok", "ok"), Harness: h, Judge: wantOK}
	_, err := e.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "runs", "a.jsonl")})
	require.NoError(t, err)
	require.NoError(t, os.Rename(filepath.Join(dir, "runs"), filepath.Join(dir, "moved")))
	log := filepath.Join(dir, "moved", "a.jsonl")
	for _, r := range logRecords(t, log) {
		require.False(t, filepath.IsAbs(r.Transcript), r.Transcript)
		tr, err := eval.ReadTranscript(r.Transcript, filepath.Dir(log))
		require.NoError(t, err)
		require.Equal(t, "hello "+r.SampleID, tr.Events[0].Name)
	}
}
