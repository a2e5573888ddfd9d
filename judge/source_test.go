package judge_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/judge"
)

// TestSourceNamesTheFailingJudge: a combinator marks its judges' errors
// (unscored ones included) with their step, in front of the path they
// carry, and leaves their messages and what errors.Is finds unchanged.
func TestSourceNamesTheFailingJudge(t *testing.T) {
	t.Parallel()
	down := judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) { return judge.Response{}, errBoom })
	garbled := judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) {
		return judge.Response{Text: "I think it is fine."}, nil
	})
	rubric := func(m judge.Model, name string) J {
		return judge.Rubric[string, string](m, &judge.RubricOptions[string]{Name: name})
	}
	for _, c := range []struct {
		name     string
		j        J
		path     string
		unscored bool
	}{
		{"rubric", rubric(down, "my-grader"), "my-grader", false},
		{"cascade, the grader down", judge.Cascade(fixed(fail, nil, nil), rubric(down, "rubric"), judge.PassSettles), "cascade.expensive/rubric", false},
		{"cascade, the grade unreadable", judge.Cascade(fixed(fail, nil, nil), rubric(garbled, "rubric"), judge.PassSettles), "cascade.expensive/rubric", true},
		{"cascade, the cheap check down", judge.Cascade(fixed(pass, errBoom, nil), rubric(down, "rubric"), judge.PassSettles), "cascade.cheap", false},
		{"all", judge.All(fixed(pass, nil, nil), fixed(pass, errBoom, nil)), "all[1]", false},
		{"any", judge.Any(fixed(fail, nil, nil), fixed(pass, unscored, nil)), "any[1]", true},
		{"weighted", judge.Weighted(0.5, judge.Criterion[string, string]{Name: "style", Weight: 1, Judge: fixed(pass, errBoom, nil)}), "weighted.style", false},
		{"vote", judge.Vote(1, fixed(pass, nil, nil), fixed(pass, errBoom, nil)), "vote[1]", false},
		{"subsample", judge.Subsample(fixed(fail, nil, nil), rubric(down, "rubric"), 0.5, 1), "subsample.expensive/rubric", false},
		{"named", judge.Named("mine", judge.Cascade(fixed(fail, nil, nil), rubric(down, "rubric"), judge.PassSettles)), "mine/cascade.expensive/rubric", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.j.Judge(t.Context(), ep(1), "out")
			require.Error(t, err)
			require.Equal(t, c.path, judge.Source(err))
			require.Equal(t, c.unscored, errors.Is(err, judge.ErrUnscored))
			if !c.unscored {
				require.ErrorIs(t, err, errBoom)
				require.Contains(t, err.Error(), errBoom.Error())
				require.NotContains(t, err.Error(), c.path, "marking changes no message")
			}
		})
	}
	require.Equal(t, "", judge.Source(errBoom))
	require.Equal(t, "", judge.Source(nil))
}
