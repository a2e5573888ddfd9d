package eval

// Progress of what a run spends: what is left of its budgets, and a
// projection of its total cost.

import (
	"github.com/proctor-evals/proctor/internal/costproj"
	"github.com/proctor-evals/proctor/internal/numfmt"
)

// Budget is a run's budgets and what its attempts have spent against
// them (in a distributed run, what its committed records spent).
type Budget struct {
	MaxCostUSD float64 // Config.MaxCostUSD; 0: none
	MaxTokens  int64   // Config.MaxTokens; 0: none
	SpentUSD   float64
	// SpentTokens counts input and output tokens, agent and judge.
	SpentTokens int64
}

// LeftUSD is what is left of MaxCostUSD (0 when spent or when there is
// no such budget).
func (b Budget) LeftUSD() float64 { return max(0, b.MaxCostUSD-b.SpentUSD) }

// LeftTokens is what is left of MaxTokens.
func (b Budget) LeftTokens() int64 { return max(0, b.MaxTokens-b.SpentTokens) }

// CostRange is a projection of a run's total cost, in US dollars: the
// cost of its final records so far plus, for each episode left, the mean
// cost per final record, with a 95% prediction interval for the cost of
// the episodes left (their spread and the uncertainty of the mean),
// never below what is spent. It assumes the episodes left cost what the
// finished ones did; costs skewed to the right make it a little narrow
// (93.2–94.3% coverage of the true total in 5 × 2,000 simulated runs of
// exponential costs, projected from 60 of 500:
// TestProjectedCostCoversTheTotal). Zero until 10 episodes with a cost
// have finished.
type CostRange struct{ Low, High float64 }

// Known reports whether the range was projected.
func (c CostRange) Known() bool { return c.High > 0 }

// projectCost projects the total cost of a run with remaining episodes
// left from its tally.
func projectCost(t *tally, remaining int64) CostRange {
	lo, hi, ok := costproj.Total(t.costUSD, t.costSq, t.pass+t.fail+t.errored+t.unscored, remaining)
	if !ok {
		return CostRange{}
	}
	return CostRange{lo, hi}
}

// budgetParts are the progress line's parts about money: what is left of
// the budgets and the projected total.
func (p *Progress) budgetParts(add func(rank int, format string, args ...any)) {
	if b := p.Budget; b != nil {
		if b.MaxCostUSD > 0 {
			add(6, "%s of %s left", numfmt.USD(b.LeftUSD()), numfmt.USD(b.MaxCostUSD))
		}
		if b.MaxTokens > 0 {
			add(6, "%s of %s tokens left", shortCount(float64(b.LeftTokens())), shortCount(float64(b.MaxTokens)))
		}
	}
	if c := p.ProjectedCostUSD; c.Known() && !p.Final {
		add(6, "projected %s", c)
	}
}

// String writes the range as $low–$high.
func (c CostRange) String() string {
	lo, hi := numfmt.USD(c.Low), numfmt.USD(c.High)
	if lo == hi {
		return "~" + hi
	}
	return lo + "–" + hi
}
