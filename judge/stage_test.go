package judge_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/judging"
	"github.com/proctor-evals/proctor/judge"
)

// TestStagesAreCountedUnderTheirErrorsPaths: each stage's calls and
// verdicts are counted on the episode under the path its errors are
// named by (judge.Source), however deep it is held.
func TestStagesAreCountedUnderTheirErrorsPaths(t *testing.T) {
	t.Parallel()
	pass := judge.Func[int, int](func(context.Context, *harness.Episode[int], int) (judge.Verdict, error) { return judge.Pass("ok"), nil })
	broken := judge.Func[int, int](func(context.Context, *harness.Episode[int], int) (judge.Verdict, error) {
		return judge.Verdict{}, judge.Unscored("no grade")
	})
	j := judge.Cascade(judge.Judge[int, int](broken), judge.Vote(2, judge.All(pass, judge.Named("flaky", judge.Judge[int, int](broken)))), judge.PassSettles)
	ep := &harness.Episode[int]{}
	_, err := j.Judge(context.Background(), ep, 0)
	require.Equal(t, "cascade.expensive", judge.Source(err)) // a vote of abstentions is the vote's own
	require.Equal(t, "judge/cascade.cheap=1/0,judge/cascade.expensive=1/0,judge/cascade.expensive/vote[0]=2/0,"+
		"judge/cascade.expensive/vote[0]/all[0]=2/2,judge/cascade.expensive/vote[0]/all[1]=2/0,"+
		"judge/cascade.expensive/vote[0]/all[1]/flaky=2/0", judging.Stages(ep))
	require.False(t, errors.Is(err, judge.ErrNotSampled))
}
