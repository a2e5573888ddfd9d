package eval_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
)

// TestInfrastructureFaultsBySimulation: 400 engine runs of 200 samples
// (pass probability 0.6), 5% of attempts hit by an infrastructure fault
// (an OOM kill, independent of the outcome). Without retries the faults
// are final errors: the reported pass rate (over scored episodes) stays
// unbiased and its 95% interval covers the truth about 95% of the time,
// where counting the faults as fails is off by the fault rate (0.6 × 5% =
// 3 points low). With the default retries almost none survive.
func TestInfrastructureFaultsBySimulation(t *testing.T) {
	t.Parallel()
	const runs, n, p, faults = 400, 200, 0.6, 0.05
	d := make(dataset.Slice[int], n)
	for i := range d {
		d[i] = dataset.Sample[int]{ID: fmt.Sprint(i), Input: i}
	}
	sim := func(run int, retries int) (rate, asFails float64, covered bool, errored int) {
		e := &eval.Eval[int, bool]{Name: "infra", Dataset: d,
			Harness: harness.Func[int, bool](func(_ context.Context, ep *harness.Episode[int]) (bool, error) {
				r := rand.New(rand.NewPCG(ep.Seed, uint64(ep.Attempt)))
				if r.Float64() < faults {
					return false, fmt.Errorf("agent: %w", sandbox.ErrOOM)
				}
				return rand.New(rand.NewPCG(ep.Seed, 99)).Float64() < p, nil
			}),
			Judge: judge.Func[int, bool](func(_ context.Context, _ *harness.Episode[int], ok bool) (judge.Verdict, error) {
				return judge.Verdict{Pass: ok}, nil
			})}
		rep, err := e.Run(context.Background(), eval.Config{Seed: uint64(run), Retries: retries, Backoff: 1, MaxErrorRate: -1, Quiet: true,
			Report: report.Options{Resamples: -1}})
		require.NoError(t, err)
		asFails = float64(rep.Passed) / float64(rep.Episodes)
		return rep.PassRate, asFails, rep.Interval.Lo <= p && p <= rep.Interval.Hi, rep.Errored
	}
	var sumRate, sumFails float64
	covered, errored, retriedErrored := 0, 0, 0
	for run := range runs {
		rate, asFails, cov, e := sim(run, -1)
		sumRate += rate
		sumFails += asFails
		errored += e
		if cov {
			covered++
		}
	}
	for run := range 20 {
		_, _, _, e := sim(runs+run, 0) // the default: 2 retries
		retriedErrored += e
	}
	meanRate, meanFails := sumRate/runs, sumFails/runs
	// The mean of 400 runs of 200 has a standard error of about 0.0018.
	require.InDelta(t, p, meanRate, 0.006, "the reported pass rate is unbiased")
	require.InDelta(t, p*(1-faults), meanFails, 0.006, "faults counted as fails: low by the fault rate")
	require.Greater(t, p-meanFails, 0.02, "counting faults as fails is biased")
	require.InDelta(t, faults, float64(errored)/(runs*n), 0.005, "the share of episodes in error is the fault rate")
	require.InDelta(t, 0.95, float64(covered)/runs, 0.035, "coverage of the 95%% interval: %d of %d", covered, runs)
	require.LessOrEqual(t, retriedErrored, 5, "with retries, a fault survives three attempts at 0.05³")
	t.Logf("mean pass rate %.4f (truth %.2f), faults as fails %.4f, coverage %d/%d, errors without retries %d, with %d (20 runs)",
		meanRate, p, meanFails, covered, runs, errored, retriedErrored)
}
