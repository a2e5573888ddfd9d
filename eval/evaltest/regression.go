package evaltest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// Baseline is the run a new run must not be worse than: the JSONL log of
// a base run of the same eval, and the non-inferiority margin as a
// pass-rate difference (0.03 = 3 points). See [NoRegression].
type Baseline struct {
	Log    string
	Margin float64
}

// NoRegression compares head with the run recorded in baseLog, sample by
// sample ([report.Compare]), and fails t (without stopping it) unless the head
// is non-inferior: unless the lower bound of the interval of the paired
// pass-rate difference, head − base, is above −margin. The interval's level
// is the one head's report used. A margin of 0 asks for evidence that the
// head is at least as good, which a head no better than the base fails
// almost always; a gate wants a small positive margin.
//
// When either run has errored or unscored episodes, it decides on the
// worst case for the head: its errored and unscored episodes counted as
// failures, the base's as passes ([report.Comparison.Decision]).
//
// The failure prints the evidence: the difference and its interval, the
// McNemar p-value, and the samples that flipped, regressions first. The
// comparison is logged with t.Log and returned; it is nil when baseLog
// cannot be read, which fails t too.
func NoRegression(t testing.TB, baseLog string, head *report.Report, margin float64) *report.Comparison {
	t.Helper()
	return noRegression(t, baseLog, head, margin, false)
}

func noRegression(t testing.TB, baseLog string, head *report.Report, margin float64, excludeErrors bool) *report.Comparison {
	t.Helper()
	opts := report.CompareOptions{Level: head.Interval.Level, Margin: margin}
	base, err := report.FromRecords(jsonl.Records(baseLog), &report.Options{Level: opts.Level, Resamples: -1})
	if err != nil {
		t.Errorf("evaltest: base log: %v", err)
		return nil
	}
	c := report.Compare(base, head, &opts)
	t.Logf("evaltest: against base log %s\n%s", baseLog, c)
	if nonInferior, _ := c.Decision(excludeErrors); nonInferior {
		return c
	}
	msg := regressionMessage(baseLog, c)
	if c.WorstCase != nil && !excludeErrors {
		msg += "  decided on the " + c.WorstCase.String() + " (Gate.ExcludeErrors leaves them out instead)\n"
	}
	t.Error(msg)
	return c
}

// RunAgainst is [Run] followed by [NoRegression] against the baseline: it
// runs e with cfg inside t, checks the gate, then compares the run with
// the baseline's log (on the samples both scored when g.ExcludeErrors).
// Either check that fails fails t.
func RunAgainst[T, O any](t testing.TB, e *eval.Eval[T, O], cfg eval.Config, g Gate, base Baseline) (*report.Report, *report.Comparison) {
	t.Helper()
	rep := Run(t, e, cfg, g)
	if rep == nil {
		return nil, nil
	}
	return rep, noRegression(t, base.Log, rep, base.Margin, g.ExcludeErrors)
}

func regressionMessage(baseLog string, c *report.Comparison) string {
	var b strings.Builder
	d := c.PassRate
	fmt.Fprintf(&b, "eval %s regressed against base log %s: not non-inferior at margin %.1f points\n", c.HeadEval, baseLog, 100*c.Margin)
	if math.IsNaN(d.Lo) {
		fmt.Fprintf(&b, "  %d samples were scored in both runs: too few for an interval\n", c.Paired)
	} else {
		fmt.Fprintf(&b, "  pass rate %.1f%% (base run %s) → %.1f%% (head run %s) over %d paired samples\n",
			100*d.MeanA, c.BaseRunID, 100*d.MeanB, c.HeadRunID, c.Paired)
		fmt.Fprintf(&b, "  difference %+.1f points, %g%% CI [%+.1f, %+.1f] (%s): lower bound ≤ %+.1f\n",
			100*d.Mean, 100*c.Level, 100*d.Lo, 100*d.Hi, report.MethodPairedT, -100*c.Margin)
	}
	fmt.Fprintf(&b, "  McNemar exact p = %.4g: %d samples pass→fail, %d fail→pass\n", c.McNemarP, c.Regressions, c.Improvements)
	const show = 20 // flips printed; the comparison (logged) lists more
	for _, f := range c.Flips[:min(show, len(c.Flips))] {
		kind := "improvement"
		if f.Regression {
			kind = "regression "
		}
		fmt.Fprintf(&b, "  %s %s: %.0f%% → %.0f%%\n", kind, f.SampleID, 100*f.Base, 100*f.Head)
	}
	if more := c.Regressions + c.Improvements - min(show, len(c.Flips)); more > 0 {
		fmt.Fprintf(&b, "  … %d more flipped samples\n", more)
	}
	for _, w := range c.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", w)
	}
	return b.String()
}
