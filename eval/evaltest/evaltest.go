// Package evaltest makes `go test` an evaluation gate: Run runs an eval
// inside a test and fails the test when the lower bound of the pass rate's
// confidence interval is under a threshold — not the point estimate, which
// a lucky run can lift over any bar — printing the failures with links to
// their transcripts.
//
//	func TestAgent(t *testing.T) {
//		evaltest.Run(t, myEval, eval.Config{Epochs: 3}, evaltest.Gate{MinLowerBound: 0.8})
//	}
package evaltest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
)

// Gate is what a run must show for the test to pass.
type Gate struct {
	// MinLowerBound fails the test when the lower bound of the pass rate's
	// interval (Config.Report.Level, default 95%) is below it: in the
	// worst case, with errored and unscored episodes counted as failures
	// (report.Report.GateBound), unless ExcludeErrors.
	MinLowerBound float64
	// ExcludeErrors decides on the pass rate over scored episodes alone,
	// leaving errored and unscored episodes out, instead of counting them
	// as failures; and, in RunAgainst, on the samples both runs scored.
	ExcludeErrors bool
	// MaxErrorRate fails the test when more than this fraction of episodes
	// ended in error or unscored: infrastructure that broke must not pass
	// a gate by shrinking its denominator. Default
	// report.DefaultMaxNoVerdict (5%), the command line's -max-no-verdict
	// default; 1 disables. A judge that gave no verdict on any of its calls
	// fails the test whatever the share (report.Report.BrokenJudge).
	MaxErrorRate float64
	// Sequential makes the gate sequential (eval.Config.Sequential, unless
	// the config sets its own): the run claims samples in a seeded random
	// order and stops as soon as the pass rate is shown at or above
	// MinLowerBound, or below it, at error rate Alpha under continuous
	// monitoring. The test then passes only on a decided pass: a run that
	// ends undecided fails it. See docs/stopping-early.md.
	Sequential bool
	// Alpha is the sequential gate's error rate; default 0.05.
	Alpha float64
	// Reviewed decides MinLowerBound on the prediction-powered pass rate
	// of the human reviews beside the log (see package review and
	// reviewed.go) instead of the judge's: a gate a biased judge cannot
	// pass alone. Run fails the test when there are no reviews to use.
	Reviewed bool
}

// Run runs e with cfg inside t and checks the gate. When cfg.Log is empty
// the log goes to a directory under os.TempDir(): a failing test's log
// outlives it, so that the transcript links printed for its failures still
// resolve afterwards; a passing test's log and the files beside it are
// removed when the test ends. The report is logged with t.Log and
// returned.
func Run[T, O any](t testing.TB, e *eval.Eval[T, O], cfg eval.Config, g Gate) *report.Report {
	t.Helper()
	if cfg.Log == "" {
		dir := filepath.Join(os.TempDir(), "proctor-evaltest")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("evaltest: %v", err)
		}
		name := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")
		base := filepath.Join(dir, fmt.Sprintf("%s-%s", name, time.Now().UTC().Format("20060102T150405.000000000")))
		cfg.Log = base + ".jsonl"
		t.Cleanup(func() {
			if t.Failed() {
				return
			}
			// The log and its neighbours (transcripts, manifest, lock):
			// the name is this run's alone, to the nanosecond.
			entries, _ := os.ReadDir(dir)
			for _, f := range entries {
				if strings.HasPrefix(f.Name(), filepath.Base(base)+".") {
					os.Remove(filepath.Join(dir, f.Name()))
				}
			}
		})
	}
	if g.Sequential && cfg.Sequential == nil {
		cfg.Sequential = &report.Sequential{Bar: g.MinLowerBound, Alpha: g.Alpha}
	}
	ctx := context.Background()
	if d, ok := t.(interface{ Context() context.Context }); ok {
		ctx = d.Context()
	}
	rep, err := e.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("evaltest: %s: %v", e.Name, err)
		return rep
	}
	t.Logf("evaltest: log %s%s\n%s", cfg.Log, reuseSummary(rep), rep)
	Check(t, rep, g)
	if g.Reviewed {
		checkReviewed(t, cfg.Log, rep, g)
	}
	return rep
}

// reuseSummary says how much of a run earlier runs did, for the line
// that names the log: a gate passed on reused results should say so.
func reuseSummary(rep *report.Report) string {
	if rep.Reused == 0 && rep.Rejudged == 0 {
		return ""
	}
	s := fmt.Sprintf(" (%d of %d episodes reused from earlier runs", rep.Reused, rep.Episodes)
	if rep.Rejudged > 0 {
		s += fmt.Sprintf(", %d earlier outputs judged again", rep.Rejudged)
	}
	return s + ")"
}

// Check applies the gate to a report, failing t (without stopping it) for
// each condition it misses. A report of a sequential run (rep.Sequential)
// is judged on its decision, not on its interval: a run that stopped when
// its data said so has no fixed-sample interval to speak of.
func Check(t testing.TB, rep *report.Report, g Gate) {
	t.Helper()
	if g.MaxErrorRate == 0 {
		g.MaxErrorRate = report.DefaultMaxNoVerdict
	}
	var problems []string
	if lb := rep.Leaderboard; lb != nil {
		// A run of variants: the gate holds for each variant the run did
		// not eliminate, on its own records.
		for _, st := range lb.Variants {
			if st.Eliminated != nil {
				continue
			}
			for _, p := range gateProblems(rep.VariantReport(st.Variant), g) {
				problems = append(problems, "variant "+st.Variant+": "+p)
			}
		}
	} else {
		problems = gateProblems(rep, g)
	}
	if len(problems) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "eval %s failed its gate:\n", rep.Eval)
	for _, p := range problems {
		fmt.Fprintf(&b, "  - %s\n", p)
	}
	for _, s := range rep.ErrorSources {
		src := s.Source
		if src == "" {
			src = "(source not recorded)"
		}
		fmt.Fprintf(&b, "  %d %s from %s, first: %s\n", s.Count, s.Status, src, firstLine(s.First))
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintf(&b, "failures (%d listed, %d more):\n", len(rep.Failures), rep.FailuresOmitted)
		for _, f := range rep.Failures {
			if f.Variant != "" {
				fmt.Fprintf(&b, "  variant %s", f.Variant)
			}
			fmt.Fprintf(&b, "  %s epoch %d: %s", f.SampleID, f.Epoch, f.Status)
			if f.ErrorKind != "" {
				fmt.Fprintf(&b, "/%s", f.ErrorKind)
			}
			fmt.Fprintf(&b, ": %s", firstLine(f.Reason))
			if f.Transcript != "" {
				fmt.Fprintf(&b, "\n      trace: %s", f.Transcript)
			}
			b.WriteByte('\n')
		}
	}
	t.Error(b.String())
}

// gateProblems lists the conditions of g that rep misses.
func gateProblems(rep *report.Report, g Gate) []string {
	var problems []string
	if s := rep.Sequential; s != nil {
		if !s.Passed() {
			problems = append(problems, sequentialProblem(s))
		}
	} else if scored := rep.Passed + rep.Failed; scored == 0 {
		problems = append(problems, "no episode was scored")
	} else if lo := rep.GateBound(g.ExcludeErrors); lo < g.MinLowerBound && !g.Reviewed {
		if lo == rep.Interval.Lo {
			problems = append(problems, fmt.Sprintf("pass rate %.1f%%, %.0f%% CI [%.1f%%, %.1f%%] (%s): lower bound under the gate's %.1f%%",
				100*rep.PassRate, 100*rep.Interval.Level, 100*rep.Interval.Lo, 100*rep.Interval.Hi, rep.Interval.Method, 100*g.MinLowerBound))
		} else {
			wc := rep.WorstCase.Lower
			problems = append(problems, fmt.Sprintf("%s: the worst case's lower bound %.1f%% (the %d errored and unscored episodes as failures: %.1f%%, %.0f%% CI [%.1f%%, %.1f%%]) is under the gate's %.1f%% (Gate.ExcludeErrors leaves them out instead)",
				rep.Headline(), 100*lo, rep.WorstCase.NoVerdict, 100*wc.PassRate, 100*wc.Interval.Level, 100*wc.Interval.Lo, 100*wc.Interval.Hi, 100*g.MinLowerBound))
		}
	}
	if rep.Episodes > 0 {
		if bad := float64(rep.Errored+rep.Unscored) / float64(rep.Episodes); bad > g.MaxErrorRate {
			problems = append(problems, fmt.Sprintf("%d errored and %d unscored of %d episodes (%.1f%%): over the gate's %.1f%%",
				rep.Errored, rep.Unscored, rep.Episodes, 100*bad, 100*g.MaxErrorRate))
		}
	}
	if src := rep.BrokenJudge(); src != "" {
		problems = append(problems, fmt.Sprintf("the judge gave no verdict on any of its calls (%s)", src))
	}
	return problems
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// sequentialProblem says why a sequential gate did not pass.
func sequentialProblem(s *report.SequentialResult) string {
	what := fmt.Sprintf("a pass rate of at least %.1f%%", 100*s.Bar)
	if s.Baseline != "" {
		what = fmt.Sprintf("non-inferiority to %s within %.1f points", s.Baseline, 100*s.Margin)
	}
	switch {
	case s.Problem != "":
		return "sequential gate: " + s.Problem
	case s.Decision == report.Undecided:
		return fmt.Sprintf("sequential gate undecided after %d samples: %s was not shown at α = %g (bounds [%.3f, %.3f])",
			s.Samples, what, s.Alpha, s.Bounds.Lo, s.Bounds.Hi)
	}
	return fmt.Sprintf("sequential gate decided against %s after %d samples, at α = %g (bounds [%.3f, %.3f])",
		what, s.Samples, s.Alpha, s.Bounds.Lo, s.Bounds.Hi)
}
