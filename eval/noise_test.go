package eval_test

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

// stochasticAgent passes sample i with probability p(i) + lift, drawn from
// the episode's seed: the same agent (lift 0) run twice differs by chance
// alone.
func stochasticAgent(n int, lift float64) *eval.Eval[int, bool] {
	var d dataset.Slice[int]
	for i := range n {
		d = append(d, dataset.Sample[int]{ID: "s" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Input: i})
	}
	return &eval.Eval[int, bool]{Name: "noise", Dataset: d,
		Harness: harness.Func[int, bool](func(_ context.Context, ep *harness.Episode[int]) (bool, error) {
			p := 0.2 + 0.6*float64(ep.Sample.Input%7)/6 + lift
			// The episode's seed alone (it follows Config.Seed): the draws,
			// and so the test, are the same on every run of it.
			r := rand.New(rand.NewPCG(ep.Seed, 0x6e6f697365))
			return r.Float64() < p, nil
		}),
		Judge: judge.Func[int, bool](func(_ context.Context, _ *harness.Episode[int], ok bool) (judge.Verdict, error) {
			return judge.Verdict{Pass: ok}, nil
		})}
}

// The report and the comparison state the run-to-run noise floor: two
// runs of the same agent differ inside it, and the comparison says so; a
// real 25-point lift lands outside it.
func TestNoiseFloorBesideADifference(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(name string, seed uint64, lift float64) (*report.Report, string) {
		log := filepath.Join(dir, name+".jsonl")
		rep, err := stochasticAgent(200, lift).Run(context.Background(), eval.Config{Log: log, Epochs: 5, Seed: seed, Quiet: true})
		require.NoError(t, err)
		return rep, log
	}
	a, aLog := run("a", 1, 0)
	_, bLog := run("b", 2, 0)
	_, cLog := run("c", 3, 0.25)
	nf := a.NoiseFloor
	require.NotNil(t, nf)
	// The floor from the formula, by hand: p ∈ {0.2, 0.3, …, 0.8} evenly,
	// within-sample variance ≈ mean p(1−p) ≈ 0.193; n = 200, 5 epochs.
	want := 1.96 * math.Sqrt(2*0.193/(200*5))
	require.InDelta(t, want, nf.HalfWidth, 0.006, "noise floor %+v", nf)
	require.Contains(t, a.String(), "noise floor")

	same, err := report.CompareLogs(aLog, bLog, nil)
	require.NoError(t, err)
	require.NotNil(t, same.NoiseFloor)
	require.True(t, same.NoiseFloor.Within(same.PassRate.Mean), "two runs of one agent: %+v beside %+v", same.PassRate, same.NoiseFloor)
	require.Contains(t, same.String(), "is INSIDE the noise floor")

	lifted, err := report.CompareLogs(aLog, cLog, nil)
	require.NoError(t, err)
	require.False(t, lifted.NoiseFloor.Within(lifted.PassRate.Mean))
	require.Contains(t, lifted.String(), "is outside the noise floor")
	require.False(t, strings.Contains(lifted.String(), "INSIDE"))
}

// One epoch does not measure the noise: no floor is stated.
func TestNoNoiseFloorFromOneEpoch(t *testing.T) {
	t.Parallel()
	rep, err := stochasticAgent(20, 0).Run(context.Background(), eval.Config{Quiet: true})
	require.NoError(t, err)
	require.Nil(t, rep.NoiseFloor)
	require.NotContains(t, rep.String(), "noise floor")
}

// Two runs of one agent, one epoch each: the comparison takes them as
// runs of one agent when their manifests name the same versions (or when
// told, CompareOptions.SameAgent) and states the floor from each sample's
// spread across both runs; runs under other versions get none.
func TestNoiseFloorOfTwoSingleEpochRunsOfOneAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(name string, seed uint64, lift float64, harness string) (*report.Report, string) {
		log := filepath.Join(dir, name+".jsonl")
		e := stochasticAgent(200, lift)
		e.Versions.Harness = harness
		rep, err := e.Run(context.Background(), eval.Config{Log: log, Seed: seed, Quiet: true})
		require.NoError(t, err)
		return rep, log
	}
	a, aLog := run("a", 1, 0, "v1")
	b, bLog := run("b", 2, 0, "v1")
	_, cLog := run("c", 3, 0.25, "v2")
	_, dLog := run("d", 4, 0, "")
	require.Nil(t, a.NoiseFloor, "one run of one epoch measures no noise")
	require.Equal(t, "v1", a.Versions.Harness, "the run's report names its versions")

	for name, c := range map[string]*report.Comparison{
		"logs":    must(report.CompareLogs(aLog, bLog, nil)),
		"reports": report.Compare(a, b, nil),
	} {
		require.True(t, c.SameAgent, name)
		require.NotNil(t, c.NoiseFloor, name)
		// Within-sample variance ≈ mean p(1−p) ≈ 0.193; n = 200, 1 epoch each.
		require.InDelta(t, 1.96*math.Sqrt(2*0.193/200), c.NoiseFloor.HalfWidth, 0.02, "%s: %+v", name, c.NoiseFloor)
		require.True(t, c.NoiseFloor.Within(c.PassRate.Mean), "%s: %+v beside %+v", name, c.PassRate, c.NoiseFloor)
		require.Contains(t, c.String(), "across both runs, taken as runs of one agent", name)
	}

	other, err := report.CompareLogs(aLog, cLog, nil)
	require.NoError(t, err)
	require.False(t, other.SameAgent, "other versions: another agent")
	require.Nil(t, other.NoiseFloor)

	unversioned, err := report.CompareLogs(dLog, bLog, nil)
	require.NoError(t, err)
	require.False(t, unversioned.SameAgent, "no harness version: nothing says it is one agent")
	require.Nil(t, unversioned.NoiseFloor)
	told, err := report.CompareLogs(dLog, bLog, &report.CompareOptions{SameAgent: true})
	require.NoError(t, err)
	require.True(t, told.SameAgent)
	require.NotNil(t, told.NoiseFloor)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
