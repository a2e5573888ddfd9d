package cli

// The run command's gate: what the exit status says of a pass rate.

import (
	"flag"
	"fmt"
	"io"

	"github.com/proctor-evals/proctor/eval/report"
)

// gate is the run command's -min-lower-bound and -exclude-errors.
type gate struct {
	minLowerBound float64
	excludeErrors bool
}

func (g *gate) bindFlags(fs *flag.FlagSet) {
	fs.Float64Var(&g.minLowerBound, "min-lower-bound", 0, "exit 1 when the pass rate's interval has its lower bound under this `fraction`, errored and unscored episodes counted as failures (0: no gate)")
	fs.BoolVar(&g.excludeErrors, "exclude-errors", false, "with -min-lower-bound, leave errored and unscored episodes out instead of counting them as failures")
}

// check reports whether rep passes the gate, saying why not on stderr.
func (g *gate) check(stderr io.Writer, rep *report.Report) bool {
	if g.minLowerBound <= 0 {
		return true
	}
	if lo, variant := rep.GateBoundVariant(g.excludeErrors); lo < g.minLowerBound {
		how := "the lower bound"
		if variant != "" {
			// A log of variants: the gate holds for each variant the run
			// did not eliminate, and this one is the lowest.
			how = "variant " + variant + "'s lower bound"
			rep = rep.VariantReport(variant)
		}
		if rep.WorstCase != nil && !g.excludeErrors {
			how = "the worst case's lower bound (errored and unscored episodes as failures; -exclude-errors leaves them out)"
		}
		fmt.Fprintf(stderr, "%s: gate failed: %s\n%s: %s %s is under -min-lower-bound %s\n",
			prog(), rep.Headline(), prog(), how, pctOf(lo), pctOf(g.minLowerBound))
		return false
	}
	return true
}

func pctOf(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }
