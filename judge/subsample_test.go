package judge_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

func TestSampleRouting(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	expensive := fixed(judge.Verdict{Score: 0, Reason: "model: wrong"}, nil, &calls)
	const rate = 0.25

	// A suspected failure always goes to the expensive judge, weight 1.
	for seed := range uint64(50) {
		v, err := judge.Subsample(fixed(fail, nil, nil), expensive, rate, 7).Judge(context.Background(), ep(seed), "")
		require.NoError(t, err)
		require.Equal(t, 0.0, v.Weight)
		require.Equal(t, 1.0, v.Scores["sampled"])
		require.Equal(t, 0.0, v.Scores["suspect_pass"])
	}
	require.EqualValues(t, 50, calls.Load())

	// An unscored suspect counts as a suspected failure.
	_, err := judge.Subsample(fixed(judge.Verdict{}, unscored, nil), expensive, rate, 7).Judge(context.Background(), ep(1), "")
	require.NoError(t, err)
	// An error of the suspect is returned.
	_, err = judge.Subsample(fixed(judge.Verdict{}, errBoom, nil), expensive, rate, 7).Judge(context.Background(), ep(1), "")
	require.ErrorIs(t, err, errBoom)

	// Suspected successes: about rate of them, reproducibly from the seed.
	calls.Store(0)
	s := judge.Subsample(fixed(pass, nil, nil), expensive, rate, 7)
	const n = 4000
	sampled := 0
	for seed := range uint64(n) {
		v, err := s.Judge(context.Background(), ep(seed), "")
		again, err2 := s.Judge(context.Background(), ep(seed), "")
		require.Equal(t, err == nil, err2 == nil, "the decision depends on the seeds only")
		require.Equal(t, v, again)
		require.Equal(t, err == nil, judge.Sampled(seed, 7, rate))
		if err == nil {
			sampled++
			require.Equal(t, 1/rate, v.Weight)
			require.Equal(t, rate, v.Scores["inclusion_probability"])
			require.Contains(t, v.Reason, "[sampled 1/4]")
			continue
		}
		require.ErrorIs(t, err, judge.ErrNotSampled)
		require.ErrorIs(t, err, judge.ErrUnscored, "an engine that knows only unscored excludes it")
		var ue *judge.UnscoredError
		require.True(t, errors.As(err, &ue))
		require.True(t, v.Pass, "the suspect's verdict is returned beside the error")
		require.Equal(t, 0.0, v.Scores["sampled"])
	}
	require.EqualValues(t, 2*sampled, calls.Load(), "each episode was judged twice")
	require.InDelta(t, rate, float64(sampled)/n, 0.03)

	// Another seed draws another sample.
	diff := 0
	for seed := range uint64(1000) {
		if judge.Sampled(seed, 7, rate) != judge.Sampled(seed, 8, rate) {
			diff++
		}
	}
	require.Greater(t, diff, 100)

	require.Panics(t, func() { judge.Subsample(expensive, expensive, 0, 1) })
	require.Panics(t, func() { judge.Subsample(expensive, expensive, 1.5, 1) })
}

// TestSampleIPWIsUnbiased simulates many runs of an eval where a cheap
// judge lets through 30% of the wrong answers and misses 5% of the right
// ones, and the expensive judge knows the truth. The report's estimator,
// Σ w·pass / Σ w over scored records, averages to the true pass rate; the
// naive estimates (keep the cheap pass of unsampled episodes, or ignore
// the weights) do not.
func TestSampleIPWIsUnbiased(t *testing.T) {
	t.Parallel()
	const (
		runs     = 400
		episodes = 500
		pTrue    = 0.6
		rate     = 0.2
	)
	var sumIPW, sumNaive, sumUnweighted, sumTruth float64
	for run := range uint64(runs) {
		rng := rand.New(rand.NewPCG(run, 99))
		// Output "1" is right, "0" wrong; the suspect errs on some.
		truth := judge.Func[string, string](func(_ context.Context, _ *harness.Episode[string], out string) (judge.Verdict, error) {
			if out == "1" {
				return judge.Pass("right"), nil
			}
			return judge.Fail("wrong"), nil
		})
		var wPass, wSum, naive, unweightedPass, unweightedN, real float64
		for e := range episodes {
			right := rng.Float64() < pTrue
			suspectPass := (right && rng.Float64() < 0.95) || (!right && rng.Float64() < 0.3)
			out := "0"
			if right {
				out, real = "1", real+1
			}
			suspect := fixed(judge.Verdict{Pass: suspectPass, Score: b2f(suspectPass)}, nil, nil)
			v, err := judge.Subsample(suspect, truth, rate, run).Judge(context.Background(), ep(rng.Uint64()+uint64(e)), out)
			switch {
			case errors.Is(err, judge.ErrNotSampled):
				naive += b2f(v.Pass) // the cheap verdict, weight 1
			case err != nil:
				t.Fatal(err)
			default:
				w := v.Weight
				if w == 0 {
					w = 1
				}
				wPass += w * b2f(v.Pass)
				wSum += w
				naive += b2f(v.Pass)
				unweightedPass += b2f(v.Pass)
				unweightedN++
			}
		}
		sumIPW += wPass / wSum
		sumNaive += naive / episodes
		sumUnweighted += unweightedPass / unweightedN
		sumTruth += real / episodes
	}
	truthMean := sumTruth / runs
	ipw, naive, unweighted := sumIPW/runs, sumNaive/runs, sumUnweighted/runs
	t.Logf("true %.4f  ipw %.4f  naive %.4f  unweighted %.4f", truthMean, ipw, naive, unweighted)
	require.InDelta(t, truthMean, ipw, 0.006, "the weighted estimate is unbiased")
	require.Greater(t, math.Abs(naive-truthMean), 0.05, "keeping unsampled cheap passes is biased")
	require.Greater(t, math.Abs(unweighted-truthMean), 0.05, "ignoring the weights is biased")
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
