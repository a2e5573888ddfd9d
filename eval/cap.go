package eval

// Per-episode caps on tokens and cost (Config.MaxEpisodeTokens,
// MaxEpisodeCostUSD): checked when the harness and the judge return, and
// by the watchdog while they run, which stops an attempt whose episode
// has passed a cap.

import (
	"context"
	"errors"

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
