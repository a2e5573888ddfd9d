package eval

// Stopping losing variants early (Config.EliminateVariants): samples are
// claimed in a seeded random order (report.ClaimOrder), and over the
// longest prefix of that order whose every running variant's episodes
// have their records, each pair of running variants is fed the sample's
// paired difference of their scores. A pair's test is the betting
// confidence sequence of the sequential gate (stats.BettingTest) on the
// difference mapped to [0, 1], tested at 0 (no difference), two-sided at
// α / (K(K−1)/2): the first time it shows one variant better, the other
// stops being run. For any pair, the chance its test ever eliminates a
// variant that is in truth at least as good as the one that eliminated
// it is at most α / (K(K−1)/2) (each side at half of it); over the
// K(K−1)/2 pairs, a union bound: the chance that any elimination of the
// run is wrong is at most α. docs/comparing-agents.md states it.

import (
	"math"
	"sync/atomic"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/stats"
)

// eliminator decides the eliminations of a run. add and its folding run
// on the recorder's goroutine; out is read by the workers' claims.
type eliminator struct {
	plan  *variantPlan
	alpha float64 // the run's: Config.EliminateVariants
	order []int32 // samples in claim order
	n, k  int     // samples, variants

	// The records folded so far, per sample × variant: episodes, and the
	// sums of their scores' lowest and highest values (an error could
	// have been a pass or a fail: [0, 1]).
	got    []uint16
	lo, hi []float32

	prefix int                  // samples of order folded into the tests
	tests  []*stats.BettingTest // per pair a < b: index pair(a, b)
	active []bool               // run and not eliminated
	out    []atomic.Bool        // per variant: eliminated (read by every claim)
	events []manifest.Elimination

	// With a sequential gate per variant (variantGates): gateAt(v) is the
	// claim position at which v's gate decided (math.MaxInt while
	// undecided), and onOut is told each elimination.
	gateAt func(v int) int
	onOut  func(v int)
}

// withGates makes el and the run's gates work together: a variant whose
// gate decided at claim position p is not run past it, so it leaves the
// tests from sample p on (the samples before have its records: its gate
// was fed them), and an eliminated variant is no longer waited for by the
// gates. Both depend on the claim order alone, not on when records came:
// a resume decides as one run.
func (el *eliminator) withGates(g *variantGates) {
	if el == nil || g == nil {
		return
	}
	el.gateAt = func(v int) int {
		if d, at := g.agg.VariantDecided(el.plan.names[v]); d != report.Undecided {
			return at
		}
		return math.MaxInt
	}
	el.onOut = g.retire
	for _, e := range el.events {
		g.retire(el.plan.index[e.Variant])
	}
}

// newEliminator returns the eliminator of a run of n samples, nil when
// the run does not eliminate. earlier are the eliminations a resumed
// log's manifest holds: those variants stay eliminated.
func newEliminator(cfg *Config, n int, id func(int) string, earlier []manifest.Elimination) *eliminator {
	if cfg.EliminateVariants <= 0 {
		return nil
	}
	p := cfg.plan
	k := len(p.names)
	el := &eliminator{plan: p, alpha: cfg.EliminateVariants, order: report.ClaimOrder(cfg.Seed, n, id), n: n, k: k,
		got: make([]uint16, n*k), lo: make([]float32, n*k), hi: make([]float32, n*k),
		tests: make([]*stats.BettingTest, k*(k-1)/2), active: make([]bool, k), out: make([]atomic.Bool, k)}
	perPair := el.alpha / float64(k*(k-1)/2)
	for i := range el.tests {
		// Two-sided at perPair: each side errs with at most perPair/2.
		el.tests[i] = stats.NewBettingTest(0.5, perPair)
	}
	copy(el.active, p.selected)
	for _, e := range earlier {
		if v, ok := p.index[e.Variant]; ok {
			el.eliminate(v, e)
		}
	}
	return el
}

// pair is the index of the test of variants a < b.
func (el *eliminator) pair(a, b int) int { return a*(2*el.k-a-1)/2 + b - a - 1 }

func (el *eliminator) eliminate(v int, e manifest.Elimination) {
	el.active[v] = false
	el.out[v].Store(true)
	el.events = append(el.events, e)
	if el.onOut != nil {
		el.onOut(v)
	}
}

// outSlot reports whether the slot's variant is eliminated: its episode
// is not run. Safe for concurrent use; nil-safe.
func (el *eliminator) outSlot(slot int) bool {
	return el != nil && el.out[slot/el.plan.epochs].Load()
}

// outVariant reports whether variant v is eliminated; nil-safe.
func (el *eliminator) outVariant(v int) bool { return el != nil && el.out[v].Load() }

// add folds in a record of sample i; nil-safe.
func (el *eliminator) add(i, slot int, r *sink.Record) {
	if el == nil {
		return
	}
	v := slot / el.plan.epochs
	lo, hi := float32(0), float32(1)
	if r.Status == sink.Pass || r.Status == sink.Fail {
		lo, hi = float32(r.Score), float32(r.Score)
	}
	c := i*el.k + v
	el.got[c]++
	el.lo[c] += lo
	el.hi[c] += hi
	el.advance()
}

// advance feeds the tests the samples of the claim order whose every
// running variant is recorded, in that order.
func (el *eliminator) advance() {
	epochs := uint16(el.plan.epochs)
	for el.prefix < el.n {
		s := int(el.order[el.prefix])
		for v, on := range el.active {
			if !on {
				continue
			}
			if el.gateAt != nil && el.gateAt(v) <= el.prefix {
				el.active[v] = false // its gate decided before this sample
				continue
			}
			if el.got[s*el.k+v] < epochs {
				return
			}
		}
		el.prefix++
		el.fold(s)
	}
}

// fold feeds every pair of running variants sample s's difference, and
// eliminates the losers.
func (el *eliminator) fold(s int) {
	e := float32(el.plan.epochs)
	var lost []manifest.Elimination
	for a := range el.k {
		for b := a + 1; b < el.k; b++ {
			if !el.active[a] || !el.active[b] {
				continue
			}
			ca, cb := s*el.k+a, s*el.k+b
			// The difference a − b lies in [lo_a − hi_b, hi_a − lo_b] ⊆
			// [−1, 1]; mapped to [0, 1], no difference is ½.
			dlo := float64(el.lo[ca]/e-el.hi[cb]/e+1) / 2
			dhi := float64(el.hi[ca]/e-el.lo[cb]/e+1) / 2
			t := el.tests[el.pair(a, b)]
			t.AddRange(clamp01(dlo), clamp01(dhi))
			switch {
			case t.Above():
				lost = append(lost, el.loss(b, a))
			case t.Below():
				lost = append(lost, el.loss(a, b))
			}
		}
	}
	for _, l := range lost {
		if v := el.plan.index[l.Variant]; el.active[v] {
			el.eliminate(v, l)
		}
	}
}

func (el *eliminator) loss(loser, winner int) manifest.Elimination {
	return manifest.Elimination{Variant: el.plan.names[loser], By: el.plan.names[winner], Alpha: el.alpha, AfterSamples: el.prefix}
}

func clamp01(x float64) float64 { return min(max(x, 0), 1) }

// eliminations returns the run's eliminations, each with the episodes it
// saved: those of its variant the run has no record of.
func (el *eliminator) eliminations() []manifest.Elimination {
	if el == nil {
		return nil
	}
	out := make([]manifest.Elimination, len(el.events))
	for i, e := range el.events {
		v := el.plan.index[e.Variant]
		recorded := 0
		for s := range el.n {
			recorded += int(el.got[s*el.k+v])
		}
		e.Saved = el.n*el.plan.epochs - recorded
		out[i] = e
	}
	return out
}
