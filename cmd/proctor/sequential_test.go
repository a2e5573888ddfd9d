package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

// TestReportDecidesTheLogsSequentialGate: `proctor report` of a sequential
// run's log decides its gate (named in the manifest) as the run did.
func TestReportDecidesTheLogsSequentialGate(t *testing.T) {
	t.Parallel()
	var d dataset.Slice[int]
	for i := range 600 {
		d = append(d, dataset.Sample[int]{ID: fmt.Sprintf("s%03d", i), Input: i})
	}
	h := harness.Func[int, int](func(_ context.Context, ep *harness.Episode[int]) (int, error) {
		time.Sleep(100 * time.Microsecond) // as an agent takes a moment: the run stops before the dataset's end
		return ep.Sample.Input, nil
	})
	j := judge.Func[int, int](func(_ context.Context, ep *harness.Episode[int], out int) (judge.Verdict, error) {
		if out%10 == 3 {
			return judge.Fail("wrong"), nil
		}
		return judge.Pass("right"), nil
	})
	log := filepath.Join(t.TempDir(), "run.jsonl")
	e := &eval.Eval[int, int]{Name: "cli", Dataset: d, Harness: h, Judge: j}
	want, err := e.Run(context.Background(), eval.Config{Log: log, Seed: 2, Concurrency: 4, Quiet: true, Sequential: &report.Sequential{Bar: 0.7}})
	require.NoError(t, err)
	require.Equal(t, report.DecidedPass, want.Sequential.Decision)

	code, out, errs := cli("report", "-json", log)
	require.Zero(t, code, errs)
	var got report.Report
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.NotNil(t, got.Sequential, "the report decides the gate its manifest names")
	require.Equal(t, *want.Sequential, *got.Sequential)

	code, out, _ = cli("report", log)
	require.Zero(t, code)
	require.Contains(t, out, "sequential gate     PASS: pass rate ≥ 70.0%")
}

// TestReportExitsWithTheGatesCodes: `proctor report` exited 0 on a log
// whose sequential gate decided "fail" and on one over the no-verdict
// threshold, so CI could not gate a log it did not run. It exits 1, as
// the run did; and on a log whose judge gave no verdict on any call even
// when the threshold is off.
func TestReportExitsWithTheGatesCodes(t *testing.T) {
	t.Parallel()
	var d dataset.Slice[int]
	for i := range 400 {
		d = append(d, dataset.Sample[int]{ID: fmt.Sprintf("s%03d", i), Input: i})
	}
	h := harness.Func[int, int](func(_ context.Context, ep *harness.Episode[int]) (int, error) { return ep.Sample.Input, nil })
	run := func(j judge.Func[int, int], cfg eval.Config) string {
		cfg.Log, cfg.Quiet, cfg.Seed = filepath.Join(t.TempDir(), "run.jsonl"), true, 2
		_, err := (&eval.Eval[int, int]{Name: "cli", Dataset: d, Harness: h, Judge: j}).Run(context.Background(), cfg)
		require.NoError(t, err)
		return cfg.Log
	}

	failing := run(func(_ context.Context, _ *harness.Episode[int], out int) (judge.Verdict, error) {
		if out%2 == 0 {
			return judge.Fail("wrong"), nil
		}
		return judge.Pass("right"), nil
	}, eval.Config{Sequential: &report.Sequential{Bar: 0.7}})
	code, _, errs := cli("report", failing)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "the sequential gate did not pass: fail")

	unscored := run(func(_ context.Context, _ *harness.Episode[int], out int) (judge.Verdict, error) {
		if out%10 == 0 {
			return judge.Verdict{}, judge.ErrUnscored
		}
		return judge.Pass("right"), nil
	}, eval.Config{})
	code, _, errs = cli("report", unscored)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "over -max-no-verdict")
	code, _, _ = cli("report", "-max-no-verdict", "0.2", unscored)
	require.Zero(t, code)

	broken := run(func(context.Context, *harness.Episode[int], int) (judge.Verdict, error) {
		return judge.Verdict{}, errors.New("grader unreachable")
	}, eval.Config{Retries: -1, MaxErrorRate: -1})
	code, _, errs = cli("report", "-max-no-verdict", "-1", broken)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "the judge gave no verdict on any of its calls (judge)")
}
