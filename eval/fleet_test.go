package eval_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/distrib"
)

// runSpend is a run's spend: what the other workers spent, set by the
// test, and what this one added.
type runSpend struct{ others, own atomic.Int64 }

func (s *runSpend) Add(tokens, _ int64)         { s.own.Add(tokens) }
func (s *runSpend) Spent() (tokens, nano int64) { return s.others.Load() + s.own.Load(), 0 }

// TestAWorkerStartsNothingWhileTheRunsBudgetIsSpent: a worker whose run
// spent its budget (on other workers) holds its work unstarted; once the
// spend is under the budget again (a coordinator started again on the
// log counts from nothing) it runs it, and counts what it spent into the
// run's spend.
func TestAWorkerStartsNothingWhileTheRunsBudgetIsSpent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		spend := &runSpend{}
		spend.others.Store(100)
		var ran atomic.Int64
		e := seeded(3)
		e.Harness = harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
			ran.Add(1)
			ep.AddUsage(harness.Usage{InputTokens: 5, OutputTokens: 2})
			return "ok", nil
		})
		work := make(chan distrib.Assignment, 1)
		work <- distrib.Assignment{SampleID: "task-000", Epochs: []int{0}}
		close(work)
		var done atomic.Int64
		worked := make(chan error, 1)
		go func() {
			worked <- distrib.Work(e, context.Background(), eval.Config{MaxTokens: 100, Quiet: true}, spend, work, func(distrib.Finished) { done.Add(1) })
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Zero(t, ran.Load(), "an episode started while the run's budget was spent")

		spend.others.Store(0)
		require.NoError(t, <-worked)
		require.Equal(t, int64(1), ran.Load())
		require.Equal(t, int64(1), done.Load())
		require.Equal(t, int64(7), spend.own.Load(), "the attempt's usage counts into the run's spend")
	})
}

// TestARunBudgetLimitNamesTheRunsBudget: an episode stopped by the run's
// budget says which budget is spent, not its own usage measured against
// it (before: "$0.0000 over Config.MaxCostUSD $0.0000" for a token budget).
func TestARunBudgetLimitNamesTheRunsBudget(t *testing.T) {
	t.Parallel()
	msg := (&eval.LimitError{Agent: harness.Usage{InputTokens: 300}, MaxTokens: 2050, Run: true}).Error()
	require.Equal(t, "eval: episode stopped at the run's budget: Config.MaxTokens 2050 is spent (agent 300 tokens $0.0000, judge 0 tokens $0.0000)", msg)
	msg = (&eval.LimitError{Agent: harness.Usage{CostUSD: 0.5}, MaxTokens: 2050, MaxCostUSD: 3, Run: true}).Error()
	require.Contains(t, msg, "Config.MaxTokens 2050 or Config.MaxCostUSD $3.0000 is spent")
}
