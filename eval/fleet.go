package eval

// The run's budgets on the model gateway's wire across a distributed
// run's workers (distrib.RunSpend): each worker counts what it spends into
// the run's spend, which package cluster shares among the workers, and
// holds the run's budgets against the whole run's.

import (
	"context"
	"time"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/distrib"
)

// fleetBudget is a worker's share of the run's budgets: the whole run's
// spend and the run's budgets (0: none), which a worker's Config no longer
// holds (they are the coordinator's stop).
type fleetBudget struct {
	spend  distrib.RunSpend
	tokens int64
	usd    float64
}

// shareSpend makes a worker hold the run's budgets against the spend it
// shares with the run's other workers; nothing without one.
func (s *scheduler[T, O]) shareSpend(f fleetBudget) {
	if f.spend == nil {
		return
	}
	s.fleet = &f
	s.live.fleet = f.spend
}

// runBudget is the run's budgets the gateway holds: Config's, or on a
// worker the run's.
func (s *scheduler[T, O]) runBudget() (tokens int64, usd float64) {
	if s.fleet != nil {
		return s.fleet.tokens, s.fleet.usd
	}
	return s.cfg.MaxTokens, s.cfg.MaxCostUSD
}

// runSpent is what the run spent, held against its budgets on the wire:
// this process's attempts, finished and in flight; on a worker, every
// worker's.
func (s *scheduler[T, O]) runSpent() (usd float64, tokens int64) {
	if s.fleet != nil {
		tokens, nano := s.fleet.spend.Spent()
		return float64(nano) / 1e9, tokens
	}
	usd, tokens = s.spent()
	return usd + float64(s.live.nanoUSD.Load())/1e9, tokens + s.live.tokens.Load()
}

// add counts an attempt's whole usage into the run's spend.
func (f *fleetBudget) add(u harness.Usage) {
	if f != nil {
		f.spend.Add(u.Tokens(), int64(u.CostUSD*1e9))
	}
}

// add counts what a call of an attempt in flight spent (negative: taken
// back as its attempt's record counts it).
func (l *liveSpend) add(tokens, nanoUSD int64) {
	l.tokens.Add(tokens)
	l.nanoUSD.Add(nanoUSD)
	if l.fleet != nil {
		l.fleet.Add(tokens, nanoUSD)
	}
}

// exhausted reports whether the run's spend reached a budget.
func (f *fleetBudget) exhausted() bool {
	tokens, nano := f.spend.Spent()
	return f.tokens > 0 && tokens >= f.tokens || f.usd > 0 && float64(nano)/1e9 >= f.usd
}

// allows waits, before an episode starts on a worker, while the run's
// budget is spent: its first model call would be refused. The
// coordinator, which reads the same spend, stops the run then, and this
// worker with it; a coordinator started again on the log starts the
// spend afresh. It returns false when ctx ends first.
func (f *fleetBudget) allows(ctx context.Context) bool {
	if f == nil || !f.exhausted() {
		return true
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for f.exhausted() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}
