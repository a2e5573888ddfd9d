package evaltest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/evaltest"
)

// baseLog runs the always-right adder into a log and returns its path.
func baseLog(t *testing.T, badDigit int) string {
	t.Helper()
	log := filepath.Join(t.TempDir(), "base.jsonl")
	_, err := arithmetic(adder(badDigit)).Run(t.Context(), eval.Config{Log: log})
	require.NoError(t, err)
	return log
}

func TestNoRegression(t *testing.T) {
	t.Parallel()
	perfect, flawed := baseLog(t, -1), baseLog(t, 0) // 100% and 80% (wrong on sums ending in 0)
	tests := []struct {
		name     string
		base     string
		badDigit int // the head's
		margin   float64
		fails    bool
	}{
		{"identical runs pass", perfect, -1, 0, false},
		{"an improvement passes", flawed, -1, 0, false},
		{"40 regressions fail", perfect, 0, 0.05, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{TB: t}
			head, err := arithmetic(adder(tc.badDigit)).Run(t.Context(), eval.Config{})
			require.NoError(t, err)
			c := evaltest.NoRegression(rec, tc.base, head, tc.margin)
			require.NotNil(t, c)
			require.Equal(t, 200, c.Paired)
			require.Equal(t, !tc.fails, c.NonInferior)
			if !tc.fails {
				require.Empty(t, rec.errors)
				return
			}
			require.Len(t, rec.errors, 1)
			msg := rec.errors[0]
			t.Log(msg)
			for _, s := range []string{
				"eval addition regressed against base log " + tc.base + ": not non-inferior at margin 5.0 points",
				"pass rate 100.0% (base run ",
				"→ 80.0% (head run ",
				"difference -20.0 points, 95% CI [",
				"(paired t over samples): lower bound ≤ -5.0",
				"McNemar exact p = ",
				"40 samples pass→fail, 0 fail→pass",
				"regression  q0: 100% → 0%",
			} {
				require.Contains(t, msg, s)
			}
			require.Less(t, strings.Index(msg, "regression  q0"), strings.Index(msg, "regression  q5"), "flips in sample order")
		})
	}
}

func TestNoRegressionMissingBaseLog(t *testing.T) {
	t.Parallel()
	rec := &recorder{TB: t}
	head, err := arithmetic(adder(-1)).Run(t.Context(), eval.Config{})
	require.NoError(t, err)
	require.Nil(t, evaltest.NoRegression(rec, filepath.Join(t.TempDir(), "none.jsonl"), head, 0.05))
	require.Len(t, rec.errors, 1)
	require.Contains(t, rec.errors[0], "evaltest: base log: ")
}

// TestRunAgainst is what a regression gate looks like in an agent
// repository: the run must clear its gate and not be worse than the
// baseline's log by 3 points or more.
func TestRunAgainst(t *testing.T) {
	t.Parallel()
	base := evaltest.Baseline{Log: baseLog(t, -1), Margin: 0.03}
	t.Run("pass", func(t *testing.T) {
		t.Parallel()
		rep, c := evaltest.RunAgainst(t, arithmetic(adder(-1)), eval.Config{}, evaltest.Gate{MinLowerBound: 0.9}, base)
		require.Equal(t, 200, rep.Passed)
		require.True(t, c.NonInferior)
	})
	t.Run("regressed but over the gate", func(t *testing.T) {
		t.Parallel()
		rec := &recorder{TB: t}
		rep, c := evaltest.RunAgainst(rec, arithmetic(adder(0)), eval.Config{}, evaltest.Gate{MinLowerBound: 0.7}, base)
		require.Equal(t, 160, rep.Passed)
		require.True(t, c.Regressed)
		require.Len(t, rec.errors, 1, "the gate passes, the regression check fails")
		require.Contains(t, rec.errors[0], "regressed against base log")
	})
}
