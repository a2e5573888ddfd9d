package eval

// The model gateway (Config.Models): served to the run's sandboxes once,
// opened to each attempt from its start until its record, its calls
// counted against the per-episode caps and the run's budgets as they
// happen.

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/distrib"
	"github.com/proctor-evals/proctor/sink"
)

// Models is a model gateway through which the agents of a run call their
// models: package gateway's *gateway.Gateway is one. The engine serves it
// to the run's sandboxes (through the sandbox driver, see
// sandbox.Provider.ServeGateway) and opens it to each attempt of an
// episode, from its start until its record.
type Models interface {
	http.Handler
	// OpenEpisode opens the gateway to one attempt, whose commands reach
	// it at baseURL. env is what every command of the attempt's sandbox
	// gets: the providers' base-URL variables and, as their API key, a
	// token of the attempt's own. Each call made with the token is
	// recorded into m (a "model" event with its usage) and refused, or
	// cut, once m has nothing left to spend. end revokes the token.
	OpenEpisode(baseURL string, m harness.Meter) (env map[string]string, end func())
}

// errRunBudget is the cancellation cause of an attempt whose model call
// found the run's budget (Config.MaxTokens, MaxCostUSD) spent.
var errRunBudget = errors.New("the run's budget is spent")

// serveModels serves cfg.Models to the run's sandboxes, at url; stop
// stops it.
func serveModels(cfg *Config) (url string, stop func(), err error) {
	if cfg.Models == nil {
		return "", func() {}, nil
	}
	url, stopServing, err := cfg.Sandbox.ServeGateway(cfg.Models)
	if err != nil {
		return "", nil, &ConfigError{"Config.Models: " + err.Error()}
	}
	return url, func() { stopServing() }, nil
}

// modelMeter is one attempt as the gateway sees it.
type modelMeter struct {
	ep interface {
		AddEvent(harness.Event)
		Usage() harness.Usage
	}
	earlier harness.Usage // the episode's earlier attempts
	// The caps: the episode's, and the run's budget less what the run
	// spent (its attempts', finished or in flight: runSpent).
	maxTokens, maxRunTokens int64
	maxUSD, maxRunUSD       float64
	spent                   func() (usd float64, tokens int64)
	live                    *liveSpend
	cancel                  context.CancelCauseFunc
	stopRun                 func()              // stops scheduling: the run's budget is spent
	spend                   func(harness.Usage) // counts a call that ends after the record
	end                     func()
	span                    trace.Span // the attempt's: the gateway's call spans are its children
	variant, sample         string     // the episode's variant, sample ID and epoch: its key in the call store
	epoch                   int

	mu     sync.Mutex
	closed bool // the attempt's record is made: its calls count only in spend
	// What this attempt's calls used, counted in live until its record.
	tokens, nanoUSD int64
	// The calls the gateway's call store answered (replayed), and whether
	// one went live at a request the recording did not have (diverged):
	// replayed calls are all before it, so it was call replayed+1.
	replayed int
	diverged bool
}

// liveSpend is what the attempts in flight spent through the gateway, not
// yet in their records; on a worker, counted into the run's spend too
// (fleet.go).
type liveSpend struct {
	tokens, nanoUSD atomic.Int64
	fleet           distrib.RunSpend
}

// AddEvent implements harness.Meter. A call that ends after the
// attempt's record (the gateway lets calls in flight finish) is not in
// it, but what it spent counts against the run's budget.
func (m *modelMeter) AddEvent(ev harness.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		m.spend(ev.Usage)
		return
	}
	m.ep.AddEvent(ev)
	n, usd := ev.Usage.Tokens(), int64(ev.Usage.CostUSD*1e9)
	m.tokens += n
	m.nanoUSD += usd
	m.live.add(n, usd)
	// A call that brought the episode to its cap (a stream the gateway cut
	// there) stops the attempt now, as Remaining would on the next call:
	// an agent that exits on the cut makes no next call, and would
	// otherwise be judged on the answer it was cut short of.
	if m.maxTokens > 0 || m.maxUSD > 0 {
		used := m.ep.Usage().Add(m.earlier)
		if (m.maxTokens > 0 && used.Tokens() >= m.maxTokens) || (m.maxUSD > 0 && used.CostUSD >= m.maxUSD) {
			m.cancel(errOverCap)
		}
	}
}

// NoteReplay counts a call the gateway's call store answered or diverged
// at (package gateway's Call.Replay), for the record's CallsReplayed and
// ReplayDivergedAt.
func (m *modelMeter) NoteReplay(how string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	switch how {
	case "replayed":
		m.replayed++
	case "diverged":
		m.diverged = true
	}
}

// CallKey is the episode's key in the gateway's call store (package
// gateway's Keyed): the attempts of one episode share it, so that one run
// again is answered from the calls its earlier attempt bought.
func (m *modelMeter) CallKey() (string, string, int) { return m.variant, m.sample, m.epoch }

// Span is the attempt's span (package gateway's optional Tracer).
func (m *modelMeter) Span() trace.Span { return m.span }

// Remaining implements harness.Meter. Reporting nothing left also stops
// the attempt: its agent's calls are refused from then on, so it ends as
// an error of kind limit with what it spent.
func (m *modelMeter) Remaining() (tokens int64, costUSD float64, capped bool) {
	tokens, costUSD = math.MaxInt64, math.Inf(1)
	used := m.ep.Usage().Add(m.earlier)
	if m.maxTokens > 0 {
		tokens, capped = m.maxTokens-used.Tokens(), true
	}
	if m.maxUSD > 0 {
		costUSD, capped = m.maxUSD-used.CostUSD, true
	}
	if tokens <= 0 || costUSD <= 0 {
		m.cancel(errOverCap)
		return tokens, costUSD, capped
	}
	if m.maxRunTokens > 0 || m.maxRunUSD > 0 {
		usd, n := m.spent()
		if m.maxRunTokens > 0 {
			tokens, capped = min(tokens, m.maxRunTokens-n), true
		}
		if m.maxRunUSD > 0 {
			costUSD, capped = min(costUSD, m.maxRunUSD-usd), true
		}
		if tokens <= 0 || costUSD <= 0 {
			m.stopRun()
			m.cancel(errRunBudget)
		}
	}
	return tokens, costUSD, capped
}

// openModels opens the gateway to the attempt ep is about to run, in its
// sandbox.
func (s *scheduler[T, O]) openModels(ctx context.Context, j *job, ep *harness.Episode[T], cancel context.CancelCauseFunc) {
	m := &modelMeter{ep: ep, span: trace.SpanFromContext(ctx), variant: ep.Variant, sample: ep.Sample.ID, epoch: ep.Epoch, earlier: j.usage, cancel: cancel, live: &s.live, spent: s.runSpent, spend: s.spend,
		maxTokens: s.cfg.MaxEpisodeTokens, maxUSD: s.cfg.MaxEpisodeCostUSD,
		stopRun: func() {
			// A worker's coordinator stops the run (fleet.go).
			if s.fleet == nil && !s.budgetHit.Swap(true) {
				s.stop(nil, false)
			}
		}}
	m.maxRunTokens, m.maxRunUSD = s.runBudget()
	env, end := s.cfg.Models.OpenEpisode(s.modelsURL, m)
	m.end = end
	ep.Sandbox.SetEnv(env)
	j.models = m
}

// closeModels revokes the attempt's token before its record is made.
// Its calls leave the live count, as the record's usage counts them; its
// replayed calls, and where its replay diverged, go to the job for the
// record.
func (j *job) closeModels(live *liveSpend) {
	m := j.models
	j.models = nil
	m.end()
	m.mu.Lock()
	m.closed = true
	live.add(-m.tokens, -m.nanoUSD)
	j.replay.attempt(m.replayed, m.diverged)
	m.mu.Unlock()
}

// replayCounts are an episode's CallsReplayed and ReplayDivergedAt,
// carried across its attempts as its usage is: those of the attempts
// before the latest (from the latest record), and with the latest's.
type replayCounts struct {
	calls, divergedAt               int
	earlierCalls, earlierDivergedAt int
}

// attempt adds the latest attempt's calls replayed. Where the episode
// diverged is where its first attempt that diverged did.
func (r *replayCounts) attempt(replayed int, diverged bool) {
	r.calls, r.divergedAt = r.earlierCalls+replayed, r.earlierDivergedAt
	if diverged && r.divergedAt == 0 {
		r.divergedAt = replayed + 1
	}
}

// retry starts the counts of the attempt after the one recorded in rec.
func (r *replayCounts) retry(rec *sink.Record) {
	*r = replayCounts{rec.CallsReplayed, rec.ReplayDivergedAt, rec.CallsReplayed, rec.ReplayDivergedAt}
}

// stoppedByModels returns the *LimitError of an attempt the gateway
// stopped (Remaining found nothing left) whose usage has not passed a cap
// (it stopped at it), else nil.
func (s *scheduler[T, O]) stoppedByModels(ctx context.Context, ep *harness.Episode[T], j *job) error {
	cause := context.Cause(ctx)
	if cause != errOverCap && cause != errRunBudget {
		return nil
	}
	agent, jdg := s.usageSoFar(ep, j)
	if cause == errRunBudget {
		tokens, usd := s.runBudget()
		return &LimitError{Agent: agent, Judge: jdg, MaxTokens: tokens, MaxCostUSD: usd, Run: true}
	}
	return &LimitError{Agent: agent, Judge: jdg, MaxTokens: s.cfg.MaxEpisodeTokens, MaxCostUSD: s.cfg.MaxEpisodeCostUSD}
}
