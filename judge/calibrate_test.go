package judge_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

func TestCalibrate(t *testing.T) {
	t.Parallel()
	// Outputs "P"/"F" are the judge's call; the human labels follow a
	// fixed pattern so the confusion counts are known.
	var golden []judge.Labelled[string, string]
	add := func(n int, judgeSays, humanSays bool) {
		for range n {
			out := "F"
			if judgeSays {
				out = "P"
			}
			h := judge.Fail("human")
			if humanSays {
				h = judge.Pass("human")
			}
			golden = append(golden, judge.Labelled[string, string]{
				Sample: dataset.Sample[string]{ID: fmt.Sprint(len(golden))}, Output: out, Human: h})
		}
	}
	add(40, true, true)
	add(10, true, false)
	add(5, false, true)
	add(45, false, false)
	golden = append(golden, judge.Labelled[string, string]{Sample: dataset.Sample[string]{ID: "u"}, Output: "?"})
	j := judge.Func[string, string](func(_ context.Context, _ *harness.Episode[string], out string) (judge.Verdict, error) {
		switch out {
		case "P":
			return judge.Pass(""), nil
		case "F":
			return judge.Fail(""), nil
		}
		return judge.Verdict{}, judge.Unscored("?")
	})
	c, err := judge.Calibrate(context.Background(), j, golden, judge.CalibrateConfig{Resamples: 200})
	require.NoError(t, err)
	require.Equal(t, judge.Confusion{BothPass: 40, FalsePass: 10, FalseFail: 5, BothFail: 45}, c.Confusion)
	require.Equal(t, 101, c.N)
	require.Equal(t, 1, c.Unscored)
	require.Equal(t, 100, c.Scored)
	require.InDelta(t, 0.85, c.Agreement, 1e-12)
	require.True(t, c.AgreementCI.Lo < 0.85 && 0.85 < c.AgreementCI.Hi)
	// p_o = .85, p_e = .5·.45 + .5·.55 = .5 → κ = .7
	require.InDelta(t, 0.7, c.Kappa, 1e-9)
	require.True(t, c.KappaCI.Lo < 0.7 && 0.7 < c.KappaCI.Hi, "%+v", c.KappaCI)
	require.False(t, math.IsNaN(c.Spearman))
	require.True(t, strings.HasPrefix(c.String(), "calibration: 101 items"))

	_, err = judge.Calibrate(context.Background(), fixed(judge.Verdict{}, errBoom, nil), golden, judge.CalibrateConfig{})
	require.ErrorIs(t, err, errBoom)
	require.ErrorContains(t, err, "judge: calibrate")
}
