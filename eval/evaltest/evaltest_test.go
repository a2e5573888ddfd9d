package evaltest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/evaltest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/scorer"
)

type question struct{ A, B int }

// adder is an agent under test: right unless the sum ends in the digit
// it is bad at.
func adder(badDigit int) harness.Harness[question, string] {
	return harness.Func[question, string](func(_ context.Context, ep *harness.Episode[question]) (string, error) {
		q := ep.Sample.Input
		sum := q.A + q.B
		ep.AddEvent(harness.Event{Kind: "model", Name: "adder"})
		if badDigit >= 0 && sum%10 == badDigit {
			sum++
		}
		return strconv.Itoa(sum), nil
	})
}

func arithmetic(agent harness.Harness[question, string]) *eval.Eval[question, string] {
	var d dataset.Slice[question]
	for i := range 200 {
		d = append(d, dataset.Sample[question]{ID: fmt.Sprintf("q%d", i), Input: question{i, 3 * i}})
	}
	return &eval.Eval[question, string]{Name: "addition", Dataset: d, Harness: agent,
		Judge: scorer.Exact(func(q question) string { return strconv.Itoa(q.A + q.B) })}
}

// TestAdditionAgent is what a gate looks like in an agent repository: the
// eval runs under `go test`, and the test fails when the pass rate's lower
// confidence bound drops under 90%.
func TestAdditionAgent(t *testing.T) {
	rep := evaltest.Run(t, arithmetic(adder(-1)), eval.Config{Epochs: 2}, evaltest.Gate{MinLowerBound: 0.9})
	require.Equal(t, 400, rep.Passed)
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Error(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprint(args...))
}

func (r *recorder) Errorf(format string, args ...any) { r.Error(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.Error(fmt.Sprintf(format, args...)) }
func (r *recorder) Helper()                           {}
func (r *recorder) Logf(string, ...any)               {}

func TestGateUsesTheLowerBoundNotThePointEstimate(t *testing.T) {
	t.Parallel()
	// Wrong on sums ending in 0: with these samples 80% pass, so the point
	// estimate clears 0.77 while the interval's lower bound does not.
	rec := &recorder{TB: t}
	rep := evaltest.Run(rec, arithmetic(adder(0)), eval.Config{}, evaltest.Gate{MinLowerBound: 0.77})
	require.InDelta(t, 0.8, rep.PassRate, 1e-9)
	require.Less(t, rep.Interval.Lo, 0.77)
	require.Len(t, rec.errors, 1, "the gate fails")
	msg := rec.errors[0]
	require.Contains(t, msg, "lower bound under the gate's 77.0%")
	require.Contains(t, msg, "q0 epoch 0: fail")
	require.Contains(t, msg, "trace: ", "failures come with their transcript links")
	require.Contains(t, msg, ".traces.jsonl#")

	// The same run passes a gate its lower bound clears.
	rec = &recorder{TB: t}
	evaltest.Check(rec, rep, evaltest.Gate{MinLowerBound: 0.7})
	require.Empty(t, rec.errors)
}

func TestGateFailsWhenInfrastructureBreaks(t *testing.T) {
	t.Parallel()
	broken := harness.Func[question, string](func(_ context.Context, ep *harness.Episode[question]) (string, error) {
		if ep.Sample.Input.A%4 == 0 {
			return "", fmt.Errorf("provider unavailable")
		}
		return strconv.Itoa(ep.Sample.Input.A + ep.Sample.Input.B), nil
	})
	rec := &recorder{TB: t}
	evaltest.Run(rec, arithmetic(broken), eval.Config{Retries: -1}, evaltest.Gate{MinLowerBound: 0.5})
	require.Len(t, rec.errors, 1)
	require.True(t, strings.Contains(rec.errors[0], "50 errored and 0 unscored of 200 episodes"), rec.errors[0])
}

// TestGateFailsOnAStageThatNeverGaveAVerdict: a cascade's grader that
// fails on each of the 2 episodes it is called on (1% of 200, under the
// no-verdict share) fails the gate, named.
func TestGateFailsOnAStageThatNeverGaveAVerdict(t *testing.T) {
	t.Parallel()
	e := arithmetic(adder(-1))
	exact := e.Judge
	cheap := judge.Func[question, string](func(ctx context.Context, ep *harness.Episode[question], out string) (judge.Verdict, error) {
		if ep.Sample.Input.A%100 == 7 { // q7, q107: the cheap check cannot settle these
			return judge.Fail("no exact match"), nil
		}
		return exact.Judge(ctx, ep, out)
	})
	grader := judge.Func[question, string](func(context.Context, *harness.Episode[question], string) (judge.Verdict, error) {
		return judge.Verdict{}, errors.New("grader unreachable")
	})
	e.Judge = judge.Cascade(cheap, judge.Named("grader", judge.Judge[question, string](grader)), judge.PassSettles)
	rec := &recorder{TB: t}
	evaltest.Run(rec, e, eval.Config{Retries: -1}, evaltest.Gate{MinLowerBound: 0.5})
	require.Len(t, rec.errors, 1)
	require.Contains(t, rec.errors[0], "judge/cascade.expensive/grader")
}

func TestSequentialGateStopsEarlyAndDecides(t *testing.T) {
	t.Parallel()
	// Always right: shown at or above 90% long before the 200 samples run.
	// Episodes take a moment, as an agent's do.
	rec := &recorder{TB: t}
	rep := evaltest.Run(rec, arithmetic(slow(adder(-1))), eval.Config{Concurrency: 2}, evaltest.Gate{MinLowerBound: 0.9, Sequential: true})
	require.Empty(t, rec.errors)
	require.Equal(t, report.DecidedPass, rep.Sequential.Decision)
	require.Less(t, rep.Episodes, 100, "the run stopped once decided")

	// Wrong on sums ending in 0 to 4: 50%, shown below 90%; the test fails.
	rec = &recorder{TB: t}
	rep = evaltest.Run(rec, arithmetic(adder5()), eval.Config{Concurrency: 2}, evaltest.Gate{MinLowerBound: 0.9, Sequential: true})
	require.Equal(t, report.DecidedFail, rep.Sequential.Decision)
	require.Len(t, rec.errors, 1)
	require.Contains(t, rec.errors[0], "sequential gate decided against a pass rate of at least 90.0%")

	// An undecided report fails the gate too, though its pass rate clears
	// the bar: nothing was shown.
	rep.Sequential.Decision = report.Undecided
	rep.PassRate, rep.Interval.Lo = 0.95, 0.93
	rec = &recorder{TB: t}
	evaltest.Check(rec, rep, evaltest.Gate{MinLowerBound: 0.9})
	require.Len(t, rec.errors, 1)
	require.Contains(t, rec.errors[0], "sequential gate undecided")
}

func slow(h harness.Harness[question, string]) harness.Harness[question, string] {
	return harness.Func[question, string](func(ctx context.Context, ep *harness.Episode[question]) (string, error) {
		time.Sleep(time.Millisecond)
		return h.Run(ctx, ep)
	})
}

// adder5 is wrong on every sum ending in 0 to 4.
func adder5() harness.Harness[question, string] {
	return harness.Func[question, string](func(_ context.Context, ep *harness.Episode[question]) (string, error) {
		sum := ep.Sample.Input.A + ep.Sample.Input.B
		if sum%10 < 5 {
			sum++
		}
		return strconv.Itoa(sum), nil
	})
}

// scoped is a recorder that runs its cleanups when told and keeps the
// log line Run writes.
type scoped struct {
	recorder
	cleanups []func()
	logs     []string
}

func (s *scoped) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }
func (s *scoped) Failed() bool     { return len(s.errors) > 0 }
func (s *scoped) Logf(format string, args ...any) {
	s.logs = append(s.logs, fmt.Sprintf(format, args...))
}
func (s *scoped) end() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// TestRunKeepsOnlyTheLogsOfFailures: Run left the log of every test it
// ran (with its transcripts, manifest and lock) in the temporary
// directory, forever. Now a passing test's are removed when it ends; a
// failing test's stay, since its failures link to them.
func TestRunKeepsOnlyTheLogsOfFailures(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		bad  int
		kept bool
	}{{-1, false}, {0, true}} {
		tb := &scoped{recorder: recorder{TB: t}}
		evaltest.Run(tb, arithmetic(adder(c.bad)), eval.Config{}, evaltest.Gate{MinLowerBound: 0.9})
		require.Equal(t, c.kept, tb.Failed())
		require.NotEmpty(t, tb.logs)
		log := strings.Fields(strings.TrimPrefix(tb.logs[0], "evaltest: log "))[0]
		base := strings.TrimSuffix(log, ".jsonl")
		before, _ := filepath.Glob(base + ".*")
		require.GreaterOrEqual(t, len(before), 3, "the log, its transcripts and its manifest")
		tb.end()
		after, _ := filepath.Glob(base + ".*")
		if c.kept {
			require.Equal(t, before, after, "a failing test's files stay")
			for _, f := range after {
				os.Remove(f)
			}
		} else {
			require.Empty(t, after, "a passing test leaves nothing")
		}
	}
}

// TestGateNoVerdictDefaultIsTheCommandLines: the gate allowed 10% of
// episodes without a verdict where the command line allows 5%: one default,
// report.DefaultMaxNoVerdict. 8% unscored fails the gate; a judge that
// gave no verdict on any call fails it even when the share is not checked.
func TestGateNoVerdictDefaultIsTheCommandLines(t *testing.T) {
	t.Parallel()
	e := arithmetic(adder(-1))
	e.Judge = judge.Func[question, string](func(_ context.Context, ep *harness.Episode[question], _ string) (judge.Verdict, error) {
		if ep.Sample.Input.A%25 < 2 {
			return judge.Verdict{}, judge.ErrUnscored
		}
		return judge.Pass("right"), nil
	})
	rec := &recorder{TB: t}
	rep := evaltest.Run(rec, e, eval.Config{Quiet: true}, evaltest.Gate{MinLowerBound: 0.5, ExcludeErrors: true})
	require.Equal(t, 16, rep.Unscored)
	require.Len(t, rec.errors, 1, "8%% without a verdict is over the 5%% default")
	require.Contains(t, rec.errors[0], "over the gate's 5.0%")

	e.Judge = judge.Func[question, string](func(context.Context, *harness.Episode[question], string) (judge.Verdict, error) {
		return judge.Verdict{}, errors.New("grader unreachable")
	})
	rec = &recorder{TB: t}
	evaltest.Run(rec, e, eval.Config{Quiet: true, Retries: -1, MaxErrorRate: -1}, evaltest.Gate{MinLowerBound: 0, ExcludeErrors: true, MaxErrorRate: 1})
	require.Len(t, rec.errors, 1)
	require.Contains(t, rec.errors[0], "the judge gave no verdict on any of its calls (judge)")
}
