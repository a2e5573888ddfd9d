package eval_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
)

// oracleFixture: "easy" the agent solves; "hard" the oracle solves and
// the agent does not; "broken-a" and "broken-b" nobody can (their test
// fails whatever the solution: a broken environment).
func oracleFixture() *eval.Eval[string, string] {
	solve := func(answer string) harness.Harness[string, string] {
		return harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
			if answer == "" {
				return ep.Sample.Input, nil
			}
			return answer, nil
		})
	}
	return &eval.Eval[string, string]{Name: "oracle",
		Dataset: dataset.Slice[string]{{ID: "easy", Input: "solved"}, {ID: "hard", Input: "wrong"}, {ID: "broken-a", Input: "solved"}, {ID: "broken-b", Input: "solved"}},
		Harness: solve(""),
		Oracle:  solve("solved"),
		Judge: judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
			if strings.HasPrefix(ep.Sample.ID, "broken") {
				return judge.Fail("the test suite does not build"), nil
			}
			return judge.Verdict{Pass: out == "solved"}, nil
		}),
	}
}

// Broken samples (the oracle fails) and hard ones (the oracle passes,
// the agent fails) read apart: the broken are listed, counted and left
// out of the pass rate, the headline says so, the hard count as fails;
// the gate option holds; `proctor report`'s reading of the log agrees.
func TestBrokenSamplesAreNotHardOnes(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	e := oracleFixture()
	rep, err := e.Run(context.Background(), eval.Config{Log: log, Oracle: true, Epochs: 2, Quiet: true})
	require.NoError(t, err)
	check := func(rep *report.Report) {
		t.Helper()
		require.Equal(t, []string{"broken-a", "broken-b"}, rep.Broken)
		require.Equal(t, 4, rep.BrokenEpisodes)
		require.Equal(t, 2, rep.Passed, "easy, twice")
		require.Equal(t, 2, rep.Failed, "hard, twice: a hard sample is the agent's failure")
		require.InDelta(t, 0.5, rep.PassRate, 1e-9)
		require.Contains(t, rep.Headline(), "pass rate 50.0%")
		require.Contains(t, rep.Headline(), "2 broken samples (their oracle failed: 4 episodes) excluded from the pass rate: broken-a, broken-b")
		for _, f := range rep.Failures {
			require.Equal(t, "hard", f.SampleID, "a broken sample listed as the agent's failure")
		}
		require.Empty(t, rep.GateFailure(), "no gate on broken samples unless asked")
	}
	check(rep)
	_, err = os.Stat(filepath.Join(filepath.Dir(log), "run.oracle.jsonl"))
	require.NoError(t, err, "the oracle's log beside the run's")

	broken, err := report.OracleBroken(log)
	require.NoError(t, err)
	fromLog, err := report.FromLog(log, &report.Options{Broken: broken})
	require.NoError(t, err)
	check(fromLog)

	gated, err := report.FromLog(log, &report.Options{Broken: broken, FailOnBroken: true})
	require.NoError(t, err)
	require.Contains(t, gated.GateFailure(), "2 broken samples")

	// Resumed, the oracle does not run again: its log holds every sample.
	rep, err = e.Run(context.Background(), eval.Config{Log: log, Oracle: true, Epochs: 2, Quiet: true, Report: report.Options{FailOnBroken: true}})
	require.NoError(t, err)
	require.Equal(t, []string{"broken-a", "broken-b"}, rep.Broken)
	require.Contains(t, rep.GateFailure(), "-fail-on-broken")
}

// A sample whose oracle passes is not broken, however the agent does;
// without an Oracle, Config.Oracle is a configuration error.
func TestOracleNeedsAnOracle(t *testing.T) {
	t.Parallel()
	e := oracleFixture()
	e.Oracle = nil
	_, err := e.Run(context.Background(), eval.Config{Oracle: true, Quiet: true})
	var ce *eval.ConfigError
	require.ErrorAs(t, err, &ce)
	mem := &memSink{}
	e = oracleFixture()
	rep, err := e.Run(context.Background(), eval.Config{Oracle: true, Quiet: true, Sinks: []sink.Sink{mem}})
	require.NoError(t, err)
	require.Len(t, mem.recs, 4, "the agent's episodes only reach the run's sinks")
	require.Len(t, rep.Broken, 2)
}
