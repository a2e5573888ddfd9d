package cluster

// The model gateway's rate limits, shared by a run's workers: four workers
// calling one model with one key hold one limit between them, not one
// each. The coordinator makes the run's rates bucket; a worker whose
// Config.Models governs its calls (package gateway's *Gateway) shares its
// lanes through it, each lane one key updated by compare-and-set (see
// gateway's governor_share.go for what a lane holds and how it merges).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/view"
)

// ratesTTL is how long a lane no worker updates stays in the rates
// bucket: a lane in use is updated four times a second.
const ratesTTL = 30 * time.Second

// limitSharer is the optional interface of a Config.Models whose rate
// limits can be shared (gateway.Gateway.ShareLimits).
type limitSharer interface {
	ShareLimits(func(ctx context.Context, key string, update func(old []byte) ([]byte, error)) error)
}

// rateGoverned is the optional interface of a Config.Models whose calls
// are rate-governed (gateway.Gateway.RateLimits): a worker reports its
// lanes in its liveness, and the coordinator's viewer shows the fleet's.
type rateGoverned interface {
	RateLimits(yield func(provider, model string, limit, inFlight, waiting int))
}

// fleetGovernor sums the lanes the live workers report, by provider and
// model: the fleet's limit (each worker holds its share), calls in flight
// and waiting.
func fleetGovernor(ws []WorkerProgress) []view.GovernorLane {
	type key struct{ provider, model string }
	sum := map[key]*view.GovernorLane{}
	var out []view.GovernorLane
	var order []key
	for _, w := range ws {
		if w.Left {
			continue
		}
		for _, l := range w.lanes {
			k := key{l.Provider, l.Model}
			g := sum[k]
			if g == nil {
				g = &view.GovernorLane{Provider: l.Provider, Model: l.Model}
				sum[k] = g
				order = append(order, k)
			}
			g.Limit += l.Limit
			g.InFlight += l.InFlight
			g.Waiting += l.Waiting
		}
	}
	slices.SortFunc(order, func(a, b key) int { return cmp.Or(cmp.Compare(a.provider, b.provider), cmp.Compare(a.model, b.model)) })
	for _, k := range order {
		out = append(out, *sum[k])
	}
	return out
}

// governor is the fleet's rate governor, summed over the lanes its live
// workers report (each a few seconds old at most): the coordinator's
// viewer shows it.
func (c *Coordinator) governor(ctx context.Context) []view.GovernorLane {
	ws, _ := c.workers(ctx)
	return fleetGovernor(ws)
}

// shareRateLimits shares the rate limits of cfg's gateway through the
// run's rates bucket, when it has a governor and the run has the bucket
// (a coordinator of an earlier release makes none: the worker then
// governs alone).
func (w *worker) shareRateLimits(ctx context.Context, cfg eval.Config) {
	s, ok := cfg.Models.(limitSharer)
	if !ok {
		return
	}
	kv, err := w.js.KeyValue(ctx, w.n.rates)
	if err != nil {
		w.log.Warn("the run has no shared rate limits: this worker's gateway governs alone", "err", err)
		return
	}
	s.ShareLimits(kvUpdate(kv))
}

// kvUpdate is an atomic read-modify-write of one key of kv: read, update,
// then create or update at the revision read, again from the read when
// another writer came in between.
func kvUpdate(kv jetstream.KeyValue) func(ctx context.Context, key string, update func(old []byte) ([]byte, error)) error {
	return func(ctx context.Context, key string, update func(old []byte) ([]byte, error)) error {
		for range 32 {
			var old []byte
			var rev uint64
			e, err := kv.Get(ctx, key)
			switch {
			case err == nil:
				old, rev = e.Value(), e.Revision()
			case !errors.Is(err, jetstream.ErrKeyNotFound):
				return err
			}
			b, err := update(old)
			if err != nil {
				return err
			}
			if rev == 0 {
				_, err = kv.Create(ctx, key, b)
			} else {
				_, err = kv.Update(ctx, key, b, rev)
			}
			if err == nil {
				return nil
			}
			if !errors.Is(err, jetstream.ErrKeyExists) && !wrongRevision(err) {
				return err
			}
		}
		return fmt.Errorf("cluster: the rate limit %s: too many writers at once", key)
	}
}

// wrongRevision reports whether err is an update's lost race: the key was
// written since its revision was read.
func wrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}
