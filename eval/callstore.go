package eval

// The model gateway's call store (Config.Models, when it keeps one:
// package gateway's *Gateway): opened beside the log for the run, so that
// an episode run again (a retry, a resume after a crash) is answered from
// the calls its earlier attempt bought while its requests match; and the
// development cache (Config.CacheFrom), another log's store answering
// identical requests of the same epoch.

import (
	"context"
	"fmt"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/sidecar"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/usage"
)

// callStorer is the optional interface of Models that keep a call store.
type callStorer interface {
	OpenStore(path string) (torn *jsonl.TornTailError, flush, closeStore func() error, err error)
	OpenCache(path string) (closeCache func(), err error)
	ReplayCounts() (replayed, cached, diverged int, saved usage.Usage)
}

// callStore is a run's open call store.
type callStore struct {
	m          callStorer
	flush      func() error
	closeStore func() error
	closeCache func()
	stopFlush  func() bool
	// The counts when the run started: the gateway may serve runs before.
	replayed, cached, diverged int
	saved                      usage.Usage
}

// openCallStore opens the call store beside cfg.Log, and cfg.CacheFrom's
// as the development cache; nil when Models keeps none or the run has no
// log. A torn tail a crash left is cut and warned of.
func openCallStore(cfg *Config) (cs *callStore, warnings []string, err error) {
	m, ok := cfg.Models.(callStorer)
	if !ok || cfg.Log == "" {
		if cfg.CacheFrom != "" {
			return nil, nil, &ConfigError{"Config.CacheFrom: needs Config.Log and Config.Models of package gateway"}
		}
		return nil, nil, nil
	}
	torn, flush, closeStore, err := m.OpenStore(sidecar.Calls(cfg.Log))
	if err != nil {
		return nil, nil, fmt.Errorf("eval: opening the call store: %w", err)
	}
	if torn != nil {
		warnings = append(warnings, fmt.Sprintf("%v: cut off; those calls are made again", torn))
	}
	cs = &callStore{m: m, flush: flush, closeStore: closeStore, closeCache: func() {}}
	if cfg.CacheFrom != "" {
		if cs.closeCache, err = m.OpenCache(sidecar.Calls(cfg.CacheFrom)); err != nil {
			closeStore()
			return nil, nil, fmt.Errorf("eval: Config.CacheFrom: %w", err)
		}
	}
	cs.replayed, cs.cached, cs.diverged, cs.saved = m.ReplayCounts()
	return cs, warnings, nil
}

// flushOnStop fsyncs the store as soon as ctx ends (SIGTERM through
// InterruptContext: a spot instance's or a pod's notice), rather than once
// the episodes in flight have wound down, which the grace period may not
// wait for.
func (cs *callStore) flushOnStop(ctx context.Context) {
	if cs != nil {
		cs.stopFlush = context.AfterFunc(ctx, func() { cs.flush() })
	}
}

// close closes the store once the run's episodes ended, and sets the
// report's count of the calls it answered.
func (cs *callStore) close(rep *report.Report) error {
	if cs == nil {
		return nil
	}
	if cs.stopFlush != nil {
		cs.stopFlush()
	}
	cs.closeCache()
	replayed, cached, diverged, saved := cs.m.ReplayCounts()
	if rep != nil && (replayed > cs.replayed || cached > cs.cached || diverged > cs.diverged) {
		saved.InputTokens -= cs.saved.InputTokens
		saved.OutputTokens -= cs.saved.OutputTokens
		saved.CacheReadTokens -= cs.saved.CacheReadTokens
		saved.CacheWriteTokens -= cs.saved.CacheWriteTokens
		saved.ReasoningTokens -= cs.saved.ReasoningTokens
		saved.CostUSD -= cs.saved.CostUSD
		// The records count the calls replayed and the episodes that
		// diverged (the report's from them); what the gateway counted is
		// the rest, or all when no record has them.
		if rep.Replay == nil {
			rep.Replay = &report.Replay{Replayed: replayed - cs.replayed, Diverged: diverged - cs.diverged}
		}
		rep.Replay.Cached, rep.Replay.Saved = cached-cs.cached, saved
	}
	return cs.closeStore()
}
