package eval

// The sequential gate's part in the engine: claim samples in the gate's
// order and stop claiming once it is decided. The decision itself is the
// aggregator's (report.Sequential), folded on the recorder's goroutine,
// so that a report of the log, a resumed run and a coordinator take it at
// the same point.

import (
	"context"
	"iter"
)

// pinGate puts on record what a sequential run's gate rests on, in the
// manifest: the claim order (every sample the run may claim, so that a
// report of a log cut short sees a claimed sample without a record as the
// end of the prefix, as the engine does) and the dataset's identity,
// hashed now rather than at the end, so that a resume over other data is
// refused before it runs anything.
func pinGate[T, O any](ctx context.Context, setup *runSetup[T, O], order []int32) error {
	ids := make([]string, len(order))
	for k, i := range order {
		ids[k] = setup.samples.id(int(i))
	}
	setup.cfg.Sequential.Order = ids
	if setup.cfg.Log == "" {
		return nil
	}
	_, err := setup.hashDataset(ctx)
	return err
}

// isDecided reports whether the sequential gate, if any, is decided.
func (s *scheduler[T, O]) isDecided() bool {
	if s.decided == nil {
		return false
	}
	select {
	case <-s.decided:
		return true
	default:
		return false
	}
}

// Decided is closed once the run's sequential gate (Config.Sequential) is
// decided: a coordinator then stops handing out work. Results of episodes
// in flight are still committed and recorded. Without a gate it is nil,
// and never ready.
func (r *Recording) Decided() <-chan struct{} { return r.run.decided }

// claimOrder yields the run's samples in the order they should run: the
// sequential gate's claim order, or the dataset's.
func (r *Recording) claimOrder() iter.Seq[int] {
	order := r.run.agg.ClaimOrder()
	return func(yield func(int) bool) {
		for k := range r.samples {
			i := k
			if order != nil {
				i = int(order[k])
			}
			if !yield(i) {
				return
			}
		}
	}
}
