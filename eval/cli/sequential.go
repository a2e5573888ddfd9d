package cli

import (
	"flag"
	"strconv"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
)

// bindSequentialFlags defines the flags of a sequential gate:
// -sequential BAR or -sequential-baseline LOG, with -margin, -alpha and
// -sequential-method.
func bindSequentialFlags(fs *flag.FlagSet, cfg *eval.Config) {
	copied := false // a flag changes a copy of the program's gate, never the program's
	gate := func() *report.Sequential {
		if !copied {
			var s report.Sequential
			if cfg.Sequential != nil {
				s = *cfg.Sequential
			}
			cfg.Sequential, copied = &s, true
		}
		return cfg.Sequential
	}
	number := func(set func(*report.Sequential, float64)) func(string) error {
		return func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			set(gate(), f)
			return err
		}
	}
	fs.Func("sequential", "stop as soon as the pass rate is shown at or above this `bar`, or below it, at -alpha (a sequential gate; exit 1 unless it passes)",
		number(func(s *report.Sequential, f float64) { s.Bar = f }))
	fs.Func("sequential-baseline", "a sequential gate against the base run logged at `log`: stop once non-inferiority within -margin, or a regression, is shown",
		func(v string) error { gate().Baseline = v; return nil })
	fs.Func("margin", "the sequential gate's non-inferiority `margin` against -sequential-baseline, a pass-rate difference (0.03: 3 points)",
		number(func(s *report.Sequential, f float64) { s.Margin = f }))
	fs.Func("alpha", "the sequential gate's error `rate` (default 0.05)",
		number(func(s *report.Sequential, f float64) { s.Alpha = f }))
	fs.Func("sequential-method", "the sequential gate's confidence sequence: betting (default) or empirical-bernstein",
		func(v string) error { gate().Method = v; return nil })
}
