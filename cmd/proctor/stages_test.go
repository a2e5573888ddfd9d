package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

// TestAStageThatNeverGaveAVerdictFailsTheGate: a cascade whose expensive
// stage is broken, called on 3 episodes of 200 (1.5%, under the 5%
// no-verdict share), fails the run's own gate and `proctor report`'s,
// naming the stage; the same cascade with a working stage passes both.
func TestAStageThatNeverGaveAVerdictFailsTheGate(t *testing.T) {
	t.Parallel()
	var d dataset.Slice[int]
	for i := range 200 {
		d = append(d, dataset.Sample[int]{ID: fmt.Sprintf("s%03d", i), Input: i})
	}
	h := harness.Func[int, int](func(_ context.Context, ep *harness.Episode[int]) (int, error) { return ep.Sample.Input, nil })
	cheap := judge.Func[int, int](func(_ context.Context, _ *harness.Episode[int], out int) (judge.Verdict, error) {
		if out%67 == 0 { // 0, 67, 134: escalated
			return judge.Fail("not an exact match"), nil
		}
		return judge.Pass("exact match"), nil
	})
	run := func(expensive judge.Func[int, int]) (log, why string) {
		log = filepath.Join(t.TempDir(), "run.jsonl")
		e := &eval.Eval[int, int]{Name: "stages", Dataset: d, Harness: h,
			Judge: judge.Cascade(cheap, judge.Named("grader", judge.Judge[int, int](expensive)), judge.PassSettles)}
		rep, err := e.Run(context.Background(), eval.Config{Log: log, Quiet: true, Retries: -1})
		require.NoError(t, err)
		return log, rep.GateFailure()
	}

	broken, why := run(func(context.Context, *harness.Episode[int], int) (judge.Verdict, error) {
		return judge.Verdict{}, errors.New("grader unreachable")
	})
	require.Contains(t, why, "judge/cascade.expensive/grader gave no verdict on any of its 3 calls")
	code, _, errs := cli("report", broken)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "judge/cascade.expensive/grader gave no verdict on any of its 3 calls")

	working, why := run(func(context.Context, *harness.Episode[int], int) (judge.Verdict, error) {
		return judge.Pass("a paraphrase"), nil
	})
	require.Empty(t, why)
	code, _, errs = cli("report", working)
	require.Zero(t, code, errs)
}
