// Package judge decides whether an episode's output is right: the [Verdict],
// the [Judge] interface, the [Func] adapter, and combinators that take and
// return judges.
//
// # Combinators
//
// [All] and [Any] are AND and OR in three-valued logic (pass, fail,
// unscored) and short-circuit in order; [Weighted] averages scored
// criteria; [Cascade] runs a cheap judge first and an expensive one only
// for what the cheap one cannot settle; [Subsample] sends every suspected
// failure and a seeded fraction of suspected successes to an expensive
// judge, with inverse-probability weights that keep the pass rate
// unbiased; [Vote] takes a majority of several judges or of repeated calls.
//
// # Model-graded judges
//
// [Rubric] asks a [Model] to grade an output against a prompt template and
// reads a final "GRADE: X" line; an unreadable, refused or truncated answer
// is unscored, never a failure. The grader sees the input as JSON and the
// reference answer only where [RubricOptions] says which it is, and the
// episode's transcript only when [RubricOptions].Transcript asks for it,
// within a token budget ([RenderTranscript]). Providers
// live in subpackages: judge/openai (Chat Completions and compatible
// servers) and judge/anthropic (Messages); each call is one HTTP request.
// Decorators add what every provider needs alike: [Retry] (backoff with
// jitter, Retry-After, bounded attempts) and [Limit] (requests in flight):
//
//	grader := judge.Retry(judge.Limit(openai.New(nil), 8), nil)
//
// # Permanent errors
//
// An error is permanent when errors.As finds in it a value with a method
// Permanent() bool returning true: a provider's [*APIError] for 400, 401,
// 403, 404, 422 and the like, or any error wrapped by [Permanent]. [Retry]
// and the eval engine never try a permanent error again; 429, 5xx and
// timeouts are transient.
//
// # Calibration
//
// [Calibrate] measures a judge's agreement with human labels before it is
// trusted.
package judge

import (
	"context"
	"errors"

	"github.com/proctor-evals/proctor/harness"
)

// Verdict is a judge's decision on one episode.
type Verdict struct {
	Pass   bool
	Score  float64            // in [0,1]
	Reason string             // why; shown in the report for failures
	Scores map[string]float64 // optional sub-scores
	// Weight is the inverse-probability weight of a sampled verdict (see
	// asymmetric sampling); 0 means 1. The report weights pass rates by it.
	Weight float64
}

// Judge decides on one episode's output. An error means the judge could not
// run (an infrastructure fault: the grader's API was down); the engine
// retries the episode. A judge that ran but cannot decide (an unparseable
// grade, a refusal) returns an error made by [Unscored].
//
// Judge is called concurrently for different episodes and must honour ctx.
type Judge[T, O any] interface {
	Judge(ctx context.Context, ep *harness.Episode[T], out O) (Verdict, error)
}

// Func adapts a function to a Judge.
type Func[T, O any] func(ctx context.Context, ep *harness.Episode[T], out O) (Verdict, error)

// Judge calls f(ctx, ep, out).
func (f Func[T, O]) Judge(ctx context.Context, ep *harness.Episode[T], out O) (Verdict, error) {
	return f(ctx, ep, out)
}

// ErrUnscored marks a judge's inability to decide: the episode is recorded
// as "unscored", not as a failure of the agent nor of the infrastructure.
var ErrUnscored = errors.New("judge: unscored")

// UnscoredError carries why a judge could not decide.
type UnscoredError struct{ Reason string }

func (e *UnscoredError) Error() string { return "judge: unscored: " + e.Reason }

// Is makes errors.Is(err, ErrUnscored) true.
func (e *UnscoredError) Is(target error) bool { return target == ErrUnscored }

// Unscored returns the error a judge returns when it cannot decide.
func Unscored(reason string) error { return &UnscoredError{Reason: reason} }

// Pass returns a passing verdict with score 1.
func Pass(reason string) Verdict { return Verdict{Pass: true, Score: 1, Reason: reason} }

// Fail returns a failing verdict with score 0.
func Fail(reason string) Verdict { return Verdict{Reason: reason} }
