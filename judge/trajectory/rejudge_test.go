package trajectory_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/trajectory"
)

// TestRejudgedIsUnscored: a rejudged episode's transcript is a link to the
// original, not its calls. Judged over nothing, Never held and the agent
// that ran rm -rf passed; now the verdict is unscored.
func TestRejudgedIsUnscored(t *testing.T) {
	t.Parallel()
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		ep.AddEvent(harness.Event{Kind: "tool", Name: "shell", Input: []byte(`"rm -rf tests"`)})
		return "done", nil
	})
	never := trajectory.Judge[string, string](nil, trajectory.Never(trajectory.Call{Name: "shell", Args: trajectory.Matches(`rm -rf`)}))
	e := &eval.Eval[string, string]{Name: "e", Harness: h, Dataset: dataset.Slice[string]{{ID: "s", Input: "clean up"}},
		Judge: judge.Func[string, string](func(context.Context, *harness.Episode[string], string) (judge.Verdict, error) {
			return judge.Pass("ok"), nil
		})}
	dir := t.TempDir()
	rep, err := e.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "run.jsonl")})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Passed)

	e.Judge = never
	rep, err = e.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "again.jsonl")})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Failed, "in a run, the judge sees the call")

	rep, err = e.Rejudge(context.Background(), filepath.Join(dir, "run.jsonl"), eval.Config{Log: filepath.Join(dir, "rejudged.jsonl")})
	require.NoError(t, err)
	require.Equal(t, 0, rep.Passed, "a rejudged trajectory must not pass over nothing")
	require.Equal(t, 1, rep.Unscored)
}
