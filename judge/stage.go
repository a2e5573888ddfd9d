package judge

import (
	"context"
	"errors"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/judging"
)

// stagePathKey carries in a judge's context the path of the stage that
// called it ("judge/cascade.expensive"), so that the stages it holds name
// theirs as their errors are named (SourceError).
type stagePathKey struct{}

// callStage calls j as the stage step of the judge that holds it, and
// counts the call, and whether it gave a verdict, on ep: the record's
// judge_stages, from which a report tells a stage that never gave a
// verdict, however few episodes reached it. The caller marks the error
// with step (within), as before.
func callStage[T, O any](ctx context.Context, step string, j Judge[T, O], ep *harness.Episode[T], out O) (Verdict, error) {
	path := stagePath(ctx, step)
	v, err := j.Judge(context.WithValue(ctx, stagePathKey{}, path), ep, out)
	// An episode a Subsample left out was not judged by choice: neither
	// a verdict nor a failure to give one.
	if ep != nil && !errors.Is(err, ErrNotSampled) {
		judging.Called(ep, path, err == nil)
	}
	return v, err
}

// stagePath is the path of the stage step under the stage ctx is in.
func stagePath(ctx context.Context, step string) string {
	if p, ok := ctx.Value(stagePathKey{}).(string); ok {
		return p + "/" + step
	}
	return "judge/" + step
}
