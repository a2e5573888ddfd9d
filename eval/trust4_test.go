package eval_test

// Regression tests for "Trust, round 4" (issue 38): no figure turns a
// guard off.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// TestAbsurdCostIsAnErrorNotABudgetBypass: a cost of +Inf, or one above
// about $9.2e9, overflowed the run's spend counter to a negative figure:
// the budget never stopped the run, and every episode ran. Now a usage
// figure that is not finite, negative or absurd makes its episode an
// error that says so, and the budget keeps counting what was really spent.
func TestAbsurdCostIsAnErrorNotABudgetBypass(t *testing.T) {
	t.Parallel()
	for _, bad := range []float64{math.Inf(1), 1e10, -5} {
		h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
			u := harness.Usage{OutputTokens: 10, CostUSD: 1}
			if ep.Sample.ID == "s0" {
				u.CostUSD = bad
			}
			ep.AddUsage(u)
			return ep.Sample.Input, nil
		})
		log := filepath.Join(t.TempDir(), "run.jsonl")
		e := &eval.Eval[string, string]{Name: "absurd", Dataset: samples("ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok"), Harness: h, Judge: wantOK}
		rep, err := e.Run(context.Background(), eval.Config{Concurrency: 1, MaxCostUSD: 3, Log: log, MaxErrorRate: -1})
		require.NoError(t, err, "cost %v", bad)
		require.True(t, rep.BudgetExhausted, "cost %v: the budget still stops the run", bad)
		recs := logRecords(t, log)
		require.Len(t, recs, 4, "cost %v: the bad episode and three of $1", bad)
		require.Equal(t, "s0", recs[0].SampleID)
		require.Equal(t, sink.Error, recs[0].Status, "cost %v", bad)
		require.Contains(t, recs[0].Error, "usage", "cost %v", bad)
		require.Zero(t, recs[0].CostUSD, "cost %v: the record keeps no figure it cannot trust", bad)
		require.InDelta(t, 3.0, rep.Usage.CostUSD, 1e-9, "cost %v", bad)
	}
}

// TestNonFiniteUsageInAnEventCostsOneEpisode: an event whose usage was NaN
// or ±Inf made the transcript encoder fail, which stopped the run, and
// every resume stopped the same way. Now that episode is an error and the
// others run.
func TestNonFiniteUsageInAnEventCostsOneEpisode(t *testing.T) {
	t.Parallel()
	for _, bad := range []float64{math.NaN(), math.Inf(-1)} {
		h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
			u := harness.Usage{InputTokens: 3, CostUSD: 0.5, Model: "m"}
			if ep.Sample.ID == "s1" {
				u.CostUSD = bad
			}
			ep.AddEvent(harness.Event{Kind: "model", Usage: u})
			return ep.Sample.Input, nil
		})
		log := filepath.Join(t.TempDir(), "run.jsonl")
		e := &eval.Eval[string, string]{Name: "nan", Dataset: samples("ok", "ok", "ok"), Harness: h, Judge: wantOK}
		rep, err := e.Run(context.Background(), eval.Config{Concurrency: 1, Log: log})
		require.NoError(t, err, "cost %v", bad)
		require.Equal(t, 2, rep.Passed, "cost %v", bad)
		require.Equal(t, 1, rep.Errored, "cost %v", bad)
		for _, r := range logRecords(t, log) {
			tr, err := eval.ReadTranscript(r.Transcript, filepath.Dir(log))
			require.NoError(t, err, "the transcript of %s", r.SampleID)
			require.Len(t, tr.Events, 1)
			if r.SampleID == "s1" {
				require.Equal(t, sink.Error, r.Status)
				require.Contains(t, r.Error, "usage")
			}
		}
		_, err = e.Run(context.Background(), eval.Config{Concurrency: 1, Log: log})
		require.NoError(t, err, "cost %v: the log resumes", bad)
	}
}

// TestALimitIsFinalOnResume: an episode that ended at its per-episode cap
// ran again on every resume (and a run of many such tripped the
// error-rate stop), though a limit is not retried. Now it is final unless
// the caps changed or Config.RetryLimited asks.
func TestALimitIsFinalOnResume(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		calls.Add(1)
		n := int64(1)
		if ep.Sample.ID == "s1" || ep.Sample.ID == "s3" {
			n = 100
		}
		ep.AddUsage(harness.Usage{OutputTokens: n})
		return ep.Sample.Input, nil
	})
	log := filepath.Join(t.TempDir(), "run.jsonl")
	e := &eval.Eval[string, string]{Name: "limits", Dataset: samples("ok", "ok", "ok", "ok"), Harness: h, Judge: wantOK}
	cfg := eval.Config{Concurrency: 1, Log: log, MaxEpisodeTokens: 50}
	rep, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, 2, rep.Errored)
	require.EqualValues(t, 4, calls.Load())

	rep, err = e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.EqualValues(t, 4, calls.Load(), "a limit is final: nothing runs again")
	require.Equal(t, 2, rep.Errored)
	require.Len(t, logRecords(t, log), 4)

	cfg.RetryLimited = true
	_, err = e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.EqualValues(t, 6, calls.Load(), "RetryLimited runs the two again")

	cfg.RetryLimited, cfg.MaxEpisodeTokens = false, 500
	rep, err = e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.EqualValues(t, 8, calls.Load(), "a changed cap runs them again")
	require.Equal(t, 4, rep.Passed)
}

// TestABudgetStoppedRunSaysHowFarItGot: a run stopped by its budget
// printed "28 × 3 = 83 episodes" (wrong arithmetic) and "exhausted" without
// saying how far it got or what the whole run would need. Now it says
// "83 of 120 episodes (69%)", which budget stopped it, and projects the
// whole run against it.
func TestABudgetStoppedRunSaysHowFarItGot(t *testing.T) {
	t.Parallel()
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		ep.AddUsage(harness.Usage{OutputTokens: 10})
		return ep.Sample.Input, nil
	})
	in := make([]string, 40)
	for i := range in {
		in[i] = "ok"
	}
	e := &eval.Eval[string, string]{Name: "stopped", Dataset: samples(in...), Harness: h, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{Concurrency: 1, Epochs: 3, MaxTokens: 830})
	require.NoError(t, err)
	require.True(t, rep.BudgetExhausted)
	require.Equal(t, 83, rep.Episodes)
	require.Equal(t, 120, rep.Planned)
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	require.Contains(t, b.String(), "83 of 120 episodes (69.2%) of 28 samples × 3 epochs: stopped by the token budget")
	require.NotContains(t, b.String(), "= 83 episodes")
	require.Contains(t, b.String(), "830 of 830 tokens spent; the whole run projects to about 1200 tokens")
}

// TestNoOldLinkShowsAnotherEpisodeAfterTheStoreWasCut: issue 38 (item 26)
// found old records whose links, followed without the readers' check,
// showed another episode's transcript after a resume of a log whose store
// was deleted or cut. Twelve episodes, six of them errored (run again on
// resume), the store removed, cut to half, to nothing, or inside its last
// transcript: every link of the log, read raw at its offset, shows its
// own episode's transcript or none.
func TestNoOldLinkShowsAnotherEpisodeAfterTheStoreWasCut(t *testing.T) {
	t.Parallel()
	for _, cut := range []struct {
		name string
		do   func(store string, size int64) error
	}{
		{"removed", func(store string, _ int64) error { return os.Remove(store) }},
		{"half", func(store string, size int64) error { return os.Truncate(store, size/2) }},
		{"empty", func(store string, _ int64) error { return os.Truncate(store, 0) }},
		{"inside the last", func(store string, size int64) error { return os.Truncate(store, size-5) }},
	} {
		dir := t.TempDir()
		log := filepath.Join(dir, "run.jsonl")
		var failing atomic.Bool
		failing.Store(true)
		h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
			ep.AddEvent(harness.Event{Kind: "note", Name: "hello " + ep.Sample.ID})
			var n int
			fmt.Sscanf(ep.Sample.ID, "s%d", &n)
			if n%2 == 0 && failing.Load() {
				return "", eval.Permanent(errors.New("down"))
			}
			return ep.Sample.Input, nil
		})
		in := make([]string, 12)
		for i := range in {
			in[i] = "ok"
		}
		e := &eval.Eval[string, string]{Name: "links", Dataset: samples(in...), Harness: h, Judge: wantOK}
		_, err := e.Run(context.Background(), eval.Config{Log: log, Concurrency: 4})
		require.NoError(t, err)
		store := filepath.Join(dir, "run.traces.jsonl")
		st, err := os.Stat(store)
		require.NoError(t, err)
		require.NoError(t, cut.do(store, st.Size()))
		failing.Store(false)
		_, err = e.Run(context.Background(), eval.Config{Log: log, Concurrency: 4})
		require.NoError(t, err)
		recs := logRecords(t, log)
		require.Len(t, recs, 12)
		for _, r := range recs {
			l, err := jsonl.ParseTranscriptLink(r.Transcript)
			require.NoError(t, err)
			line, err := jsonl.ReadLineAt(filepath.Join(dir, l.Path), l.Offset)
			if err != nil {
				continue // gone with the store: no transcript, not another's
			}
			var tr harness.Transcript
			if json.Unmarshal(line, &tr) == nil {
				require.Equal(t, r.SampleID, tr.SampleID, "%s: the link of %s shows another episode", cut.name, r.SampleID)
			}
		}
	}
}
