package eval

// Per-episode caps on tokens and cost (Config.MaxEpisodeTokens,
// MaxEpisodeCostUSD): checked when the harness and the judge return, and
// by the watchdog while they run, which stops an attempt whose episode
// has passed a cap.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/proctor-evals/proctor/harness"
)

// errOverCap is the cancellation cause of an attempt the watchdog stopped
// at its episode's cap.
var errOverCap = errors.New("episode over its cap")

// cappedAttempt is what the watchdog needs to stop a running attempt at
// its episode's cap: its episode, what the episode's earlier attempts
// spent, and its context's cancel.
type cappedAttempt[T any] struct {
	ep      *harness.Episode[T]
	earlier harness.Usage
	cancel  context.CancelCauseFunc
}

func (s *scheduler[T, O]) capped() bool {
	return s.cfg.MaxEpisodeTokens > 0 || s.cfg.MaxEpisodeCostUSD > 0
}

// overCap returns a *LimitError when the episode's usage, over all its
// attempts so far, passes a per-episode cap.
func (s *scheduler[T, O]) overCap(ep *harness.Episode[T], j *job) error {
	if !s.capped() {
		return nil
	}
	agent, jdg := s.usageSoFar(ep, j)
	if s.over(agent.Add(jdg)) {
		return &LimitError{Agent: agent, Judge: jdg, MaxTokens: s.cfg.MaxEpisodeTokens, MaxCostUSD: s.cfg.MaxEpisodeCostUSD}
	}
	return nil
}

// usageSoFar is the episode's usage over all its attempts so far, split
// between the agent and the judge.
func (s *scheduler[T, O]) usageSoFar(ep *harness.Episode[T], j *job) (agent, jdg harness.Usage) {
	agent, jdg = ep.UsageByRole()
	earlier := j.usage
	earlier.InputTokens -= j.judgeUsage.InputTokens
	earlier.OutputTokens -= j.judgeUsage.OutputTokens
	earlier.CostUSD -= j.judgeUsage.CostUSD
	return earlier.Add(agent), j.judgeUsage.Add(jdg)
}

func (s *scheduler[T, O]) over(total harness.Usage) bool {
	return s.cfg.MaxEpisodeTokens > 0 && total.Tokens() > s.cfg.MaxEpisodeTokens ||
		s.cfg.MaxEpisodeCostUSD > 0 && total.CostUSD > s.cfg.MaxEpisodeCostUSD
}

// stopOverCap cancels c's attempt when its episode has passed a cap; the
// attempt then ends as an error of kind limit when its harness or judge
// returns. A stale c (its attempt over) cancels a context already done.
func (s *scheduler[T, O]) stopOverCap(c *cappedAttempt[T]) {
	if s.over(c.ep.Usage().Add(c.earlier)) {
		c.cancel(errOverCap)
	}
}

// What one attempt may report spending: far above any real episode, and
// far below what would overflow the run's counters (nano-dollars and
// tokens in an int64). A figure past these, negative or not finite is a
// fault of whoever reported it, never a cost: counted, it would turn the
// budget off (an overflowed counter reads negative) or stop the encoder
// of the transcript it is in.
const (
	maxAttemptCostUSD = 1e6
	maxAttemptTokens  = 1e12
)

// usable reports whether u is a usage figure the budget can count.
func usable(u harness.Usage) bool {
	return u.CostUSD >= 0 && u.CostUSD <= maxAttemptCostUSD &&
		u.InputTokens >= 0 && u.InputTokens <= maxAttemptTokens &&
		u.OutputTokens >= 0 && u.OutputTokens <= maxAttemptTokens
}

// checkUsage checks an attempt's usage by role. When a figure is not
// usable it returns both usages with that part zeroed, as the record keeps
// them, the stage that reported it, and the error that ends the episode
// (permanent: the harness or judge would report it again).
func checkUsage(agent, jdg harness.Usage) (harness.Usage, harness.Usage, string, error) {
	if usable(agent) && usable(jdg) {
		return agent, jdg, "", nil
	}
	stage, bad := "harness", agent
	if usable(agent) {
		stage, bad = "judge", jdg
	}
	for _, u := range []*harness.Usage{&agent, &jdg} {
		if !usable(*u) {
			*u = harness.Usage{Model: u.Model}
		}
	}
	return agent, jdg, stage, Permanent(fmt.Errorf("eval: the %s reported an unusable usage figure (%s): want finite, non-negative figures of at most $%g and %g tokens an attempt",
		stage, describeUsage(bad), maxAttemptCostUSD, float64(maxAttemptTokens)))
}

func describeUsage(u harness.Usage) string {
	return fmt.Sprintf("cost $%v, %d input and %d output tokens", u.CostUSD, u.InputTokens, u.OutputTokens)
}

// usableEvents zeroes in events (a copy, from Episode.Events) every usage
// figure that is not usable, so that the transcript encodes
// (encoding/json refuses NaN and ±Inf), and returns them.
func usableEvents(events []harness.Event) []harness.Event {
	for i, ev := range events {
		if !usable(ev.Usage) {
			events[i].Usage = harness.Usage{Model: ev.Usage.Model}
			events[i].Error = strings.TrimSpace(ev.Error + " (unusable usage dropped: " + describeUsage(ev.Usage) + ")")
		}
	}
	return events
}
