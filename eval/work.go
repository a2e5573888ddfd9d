package eval

// The two halves of a run, for engines that carry episodes between
// machines (package cluster): a worker is the scheduler without a
// recorder (work); a coordinator is the recorder and aggregator fed with
// the results of workers (open, recording). Package cluster reaches them
// through internal/distrib, which this file sets.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/proctor-evals/proctor/internal/distrib"
)

// distributable is an *Eval of any types.
type distributable interface {
	open(ctx context.Context, cfg Config) (*recording, error)
	work(ctx context.Context, cfg Config, spend distrib.RunSpend, assignments <-chan distrib.Assignment, done func(distrib.Finished)) error
}

func init() {
	distrib.Open = func(e any, ctx context.Context, cfg any) (distrib.Recording, error) {
		r, err := e.(distributable).open(ctx, cfg.(Config))
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	distrib.Work = func(e any, ctx context.Context, cfg any, spend distrib.RunSpend, assignments <-chan distrib.Assignment, done func(distrib.Finished)) error {
		return e.(distributable).work(ctx, cfg.(Config), spend, assignments, done)
	}
}

// work runs the episodes of the assignments it receives, on this machine,
// with Run's scheduler: concurrency, timeouts, retries, panics, the
// sandbox pool (one environment per assignment's sample, a fork per
// episode). It gives each finished episode to done, from many goroutines
// at once, and records nothing itself.
//
// Work returns when assignments is closed and every episode has settled,
// or when ctx is done: episodes in flight then end as cancelled and are not
// given to done. The stops a coordinator decides for the whole run
// (cfg.MaxCostUSD, cfg.MaxTokens, cfg.MaxErrorRate) do not apply here;
// with cfg.Models the worker serves its own gateway to its sandboxes, and
// the per-episode caps hold on its wire, and with spend the run's budgets
// too, against what every worker spent. An assignment of
// a sample the dataset lacks, or of an epoch out of range, is an error:
// the worker's eval is not the coordinator's. A streamed dataset (any but
// a dataset.Slice) stays streamed, as in Run: the worker keeps its IDs,
// and holds a sample from its work's arrival to its last episode, reading
// the dataset again from its start only for work behind its reading.
func (e *Eval[T, O]) work(ctx context.Context, cfg Config, spend distrib.RunSpend, assignments <-chan distrib.Assignment, done func(distrib.Finished)) error {
	if cfg.Oracle {
		return errOracleDistributed
	}
	// A streamed dataset stays streamed: the worker holds the samples of
	// the work it has, not the dataset.
	cfg, samples, err := e.prepare(ctx, cfg, true)
	if err != nil {
		return err
	}
	fleet := fleetBudget{spend, cfg.MaxTokens, cfg.MaxCostUSD}
	cfg.MaxCostUSD, cfg.MaxTokens, cfg.MaxErrorRate = 0, 0, -1 // the coordinator's stops (none here)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	feed := make(chan episode)
	sc := schedule[T, O]{harnesses: e.harnesses(), runID: cfg.RunID,
		done: newDoneSet(0), out: workCommitter(done), cancel: cancel, feed: feed}
	if samples.streamed() {
		sc.stream = newFedStream(ctx, samples, cfg.Concurrency)
		defer sc.stream.close()
	}
	modelsURL, stopModels, err := serveModels(&cfg)
	if err != nil {
		return err
	}
	defer stopModels()
	s := newScheduler(e, cfg, samples, sc)
	s.modelsURL = modelsURL
	s.shareSpend(fleet)

	var feedErr error
	go func() {
		defer close(feed)
		for {
			var a distrib.Assignment
			var ok bool
			select {
			case a, ok = <-assignments:
			case <-ctx.Done():
				return
			}
			if !ok {
				return
			}
			i, err := checkAssignment(a, samples.index, cfg.Epochs)
			if err != nil && a.Refused != nil {
				a.Refused(err)
				continue
			}
			if err != nil {
				feedErr = err
				cancel(feedErr)
				return
			}
			if s.stream != nil && len(a.Epochs) > 0 {
				if err := s.stream.hold(i, len(a.Epochs)); err != nil {
					feedErr = err
					cancel(feedErr)
					return
				}
			}
			if s.pool != nil && len(a.Epochs) > 0 {
				s.pool.Add(strconv.Itoa(i), len(a.Epochs))
			}
			for _, ep := range a.Epochs {
				select {
				case feed <- episode{i, ep}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	s.run(ctx)
	if feedErr != nil {
		return feedErr
	}
	return context.Cause(ctx)
}

// checkAssignment returns the index of a's sample, or why this worker
// cannot run a.
func checkAssignment(a distrib.Assignment, index *sampleIndex, epochs int) (int, error) {
	i, known := index.get(a.SampleID)
	if !known {
		return 0, fmt.Errorf("eval: assigned sample %q is not in this worker's dataset", a.SampleID)
	}
	for _, ep := range a.Epochs {
		if ep < 0 || ep >= epochs {
			return 0, fmt.Errorf("eval: assigned epoch %d of sample %q: this worker runs %d epochs", ep, a.SampleID, epochs)
		}
	}
	return i, nil
}

// workCommitter hands a worker's finished episodes to its caller.
type workCommitter func(distrib.Finished)

func (w workCommitter) commit(f *finished) {
	w(distrib.Finished{Record: f.rec, Transcript: f.events, Slot: f.slot})
}

// check rejects an Eval that cannot run.
func (e *Eval[T, O]) check() error {
	if len(e.Variants) > 0 && e.Harness != nil {
		return &ConfigError{"Eval has both a Harness and Variants: with variants, each variant's Harness runs (leave Eval.Harness nil)"}
	}
	if e.Dataset == nil || e.Harness == nil && len(e.Variants) == 0 || e.Judge == nil {
		return &ConfigError{"Eval needs a Dataset, a Harness (or Variants) and a Judge"}
	}
	if e.Name == "" {
		return &ConfigError{"Eval needs a Name"}
	}
	return nil
}
