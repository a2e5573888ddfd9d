package eval

// The sequential gate's part in the engine: claim samples in the gate's
// order and stop claiming once it is decided. The decision itself is the
// aggregator's (report.Sequential), folded on the recorder's goroutine,
// so that a report of the log, a resumed run and a coordinator take it at
// the same point.

import (
	"context"
	"encoding/json"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/proctor-evals/proctor/eval/report"
)

// workersGate is a gate as the manifest workers check theirs against
// holds it: without its claim order and its baseline's figures, which only
// a report of the log needs and which grow with the dataset (a manifest
// travels to workers in one NATS message).
func workersGate(s *report.Sequential) json.RawMessage {
	if s == nil {
		return nil
	}
	g := *s
	g.Order, g.Base = nil, nil
	b, _ := json.Marshal(&g) // a struct of numbers and strings
	return b
}

// claimWindow bounds a sequential run's claims beyond the claim order's
// finished prefix (the samples the decision has taken in) to the
// concurrency plus 5%: once decided, at most that many episodes run that
// the decision did not need, whatever the episodes' latency. Without it,
// instant episodes outran the recorder and the run claimed its whole
// dataset before the decision caught up. The price: a slow sample at the
// head of the prefix holds back new claims until it finishes.
type claimWindow struct {
	fed     atomic.Int64 // episodes of the finished prefix
	width   int64
	waiters atomic.Int64
	mu      sync.Mutex
	moved   chan struct{} // closed, and replaced, when fed moves or the window opens
}

func newClaimWindow(concurrency int) *claimWindow {
	c := int64(concurrency)
	return &claimWindow{width: c + (c+19)/20, moved: make(chan struct{})}
}

// advance is called by the recorder's goroutine after each record: it
// learns the prefix from the aggregator, and wakes the workers waiting
// when it moved. O(1), nothing without a window.
func (w *claimWindow) advance(agg *report.Aggregator, epochs int64) {
	if w == nil {
		return
	}
	_, samples := agg.Decided()
	if n := int64(samples) * epochs; n > w.fed.Load() {
		w.fed.Store(n) // before looking for waiters, who register before looking at fed
		w.wake()
	}
}

// advanceTo moves the finished prefix to n episodes, when that is
// further: elimination's (eliminate.go), whose prefix is its own.
func (w *claimWindow) advanceTo(n int64) {
	if w != nil && n > w.fed.Load() {
		w.fed.Store(n)
		w.wake()
	}
}

// open lifts the bound (the run stops: what was claimed is let go).
func (w *claimWindow) open() {
	if w != nil {
		w.fed.Store(1 << 62)
		w.wake()
	}
}

func (w *claimWindow) wake() {
	if w.waiters.Load() > 0 {
		w.mu.Lock()
		close(w.moved)
		w.moved = make(chan struct{})
		w.mu.Unlock()
	}
}

// wait returns true once the episode at claim position i is within the
// window, false when done or decided closes first.
func (w *claimWindow) wait(i int64, done <-chan struct{}, decided <-chan struct{}) bool {
	for {
		if i < w.fed.Load()+w.width {
			return true
		}
		w.mu.Lock()
		w.waiters.Add(1)
		moved := w.moved
		w.mu.Unlock()
		if i < w.fed.Load()+w.width {
			w.waiters.Add(-1)
			return true
		}
		select {
		case <-moved:
		case <-done:
		case <-decided:
		}
		w.waiters.Add(-1)
		select {
		case <-done:
			return false
		case <-decided:
			return false
		default:
		}
	}
}

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
// decided (with variants, every variant's): a coordinator then stops
// handing out work. Results of episodes in flight are still committed and
// recorded. Without a gate it is nil, and never ready.
func (r *recording) Decided() <-chan struct{} { return r.run.decided }

// Retired returns the variants whose sequential gate decided, or which
// were eliminated, in the eval's order: their episodes are no longer run
// (a coordinator tells its workers, which skip them). Nil without gates
// per variant or elimination. Safe for concurrent use.
func (r *recording) Retired() []string {
	g, el := r.run.gates, r.run.elim
	if g == nil && el == nil {
		return nil
	}
	var out []string
	for v, name := range r.run.rec.plan.names {
		if g.outVariant(v) || el.outVariant(v) {
			out = append(out, name)
		}
	}
	return out
}

// claimOrder yields the run's samples in the order they should run: the
// sequential gate's claim order, or the dataset's.
func (r *recording) claimOrder() iter.Seq[int] {
	order := r.run.agg.ClaimOrder()
	if order == nil && r.run.elim != nil {
		order = r.run.elim.order // elimination's tests follow it
	}
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

// variantGates is the sequential gate of a run of variants: each variant
// has its own, decided on its records alone over the run's claim order
// (the report's aggregator of the variant decides it as records arrive,
// as a report of the log does). A variant whose gate decided stops being
// run; the run is decided once every variant it runs is.
type variantGates struct {
	plan    *variantPlan
	agg     *report.Aggregator
	out     []atomic.Bool // per variant: decided, its episodes no longer claimed
	pending int           // variants this run runs whose gate is undecided
	decided func()        // called once pending reaches 0
}

// newVariantGates returns the gates of a run of plan's variants, folded
// by agg; decided is called, on the recorder's goroutine, once every
// variant the run runs has decided.
func newVariantGates(plan *variantPlan, agg *report.Aggregator, decided func()) *variantGates {
	g := &variantGates{plan: plan, agg: agg, out: make([]atomic.Bool, len(plan.names)), decided: decided}
	for _, run := range plan.selected {
		if run {
			g.pending++
		}
	}
	agg.OnVariantDecided(g.decide)
	return g
}

// decide notes that the named variant's gate decided.
func (g *variantGates) decide(name string) {
	if v, ok := g.plan.index[name]; ok {
		g.retire(v)
	}
}

// retire stops variant v: its gate decided, or it was eliminated
// (Config.EliminateVariants). The run is decided once every variant it
// runs is retired.
func (g *variantGates) retire(v int) {
	if !g.plan.selected[v] || g.out[v].Load() {
		return // a variant the run does not run (its records are in the log)
	}
	g.out[v].Store(true)
	if g.pending--; g.pending == 0 {
		g.decided()
	}
}

// outSlot reports whether the slot's variant has decided: its episode is
// not run. Safe for concurrent use; nil-safe.
func (g *variantGates) outSlot(slot int) bool {
	return g != nil && g.out[slot/g.plan.epochs].Load()
}

// outVariant reports whether variant v's gate decided; nil-safe.
func (g *variantGates) outVariant(v int) bool { return g != nil && g.out[v].Load() }

// prefix is the claim order's finished prefix the claims are bounded by:
// the shortest of the variants' still run (samples), on the recorder's
// goroutine.
func (g *variantGates) prefix() int {
	p := -1
	for v, name := range g.plan.names {
		if !g.plan.selected[v] || g.out[v].Load() {
			continue
		}
		if _, n := g.agg.VariantDecided(name); p < 0 || n < p {
			p = n
		}
	}
	if p < 0 {
		return 1 << 40 // every gate decided: the run stops claiming anyway
	}
	return p
}
