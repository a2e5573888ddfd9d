package judge

import (
	"context"
	"errors"

	"github.com/proctor-evals/proctor/harness"
)

// SourceError is a judge's error marked with where it came from: the
// path of the failing judge through the combinators that hold it, its
// steps joined by "/", outermost first ("cascade.expensive/rubric"). The
// engine records it (the record's error_source) and the report counts
// errors by it, so that an unreachable grader behind a cheap check reads
// as the grader's fault, not the agent's. Its message is the wrapped
// error's: marking an error changes no text, only what [Source] finds.
//
// [Rubric] marks its errors with its name, and the combinators mark
// their judges' errors with their step: "cascade.cheap",
// "cascade.expensive", "all[i]", "any[i]", "weighted.NAME", "vote[i]",
// "subsample.suspect", "subsample.expensive". [Named] marks any judge's.
type SourceError struct {
	Path string
	Err  error
}

func (e *SourceError) Error() string { return e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }

// Source returns the path of the judge err came from, "" when no judge
// marked it.
func Source(err error) string {
	var se *SourceError
	if errors.As(err, &se) {
		return se.Path
	}
	return ""
}

// within marks err as coming from step, in front of the path it holds;
// nil stays nil.
func within(step string, err error) error {
	if err == nil {
		return nil
	}
	if p := Source(err); p != "" {
		step += "/" + p
	}
	return &SourceError{Path: step, Err: err}
}

// Named returns j with its errors (unscored ones included) marked as
// coming from name, so that the report names it where they are counted.
func Named[T, O any](name string, j Judge[T, O]) Judge[T, O] {
	return Func[T, O](func(ctx context.Context, ep *harness.Episode[T], out O) (Verdict, error) {
		v, err := callStage(ctx, name, j, ep, out)
		return v, within(name, err)
	})
}
