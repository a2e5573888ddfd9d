package report

// The sequential gate: a decision taken as records arrive, at a stated
// error rate under continuous monitoring (docs/stopping-early.md).

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/stats"
)

// Sequential is a gate decided as a run goes: whether the pass rate is at
// or above Bar (or, with Baseline, whether the run is non-inferior to a
// base run within Margin), decided the first time a confidence sequence
// (package stats) shows it at error rate Alpha. The engine stops claiming
// samples then; a report computes the same decision from the records.
//
// Each sample is one observation: its pass rate over its epochs, so epochs
// stay clustered. Samples are taken in claim order, a permutation of the
// dataset drawn from the run seed and the sample IDs ([ClaimOrder]), and
// only over the longest prefix of that order whose samples have every
// epoch recorded: never in the order episodes finish, since slow episodes
// fail more often. An error or unscored episode counts against the
// decision it would support: as a failure when testing for a pass, as a
// pass when testing for a failure; errors can delay a decision, never make
// one.
//
// The guarantee: whatever the true pass rate p of the agent on the
// population the dataset's samples are drawn from, the probability that
// the gate ever decides wrongly (pass while p < Bar, fail while p ≥ Bar)
// is at most Alpha, however long the run goes and whenever it stops. A run
// that ends undecided (the dataset ran out, a budget stopped it) decided
// nothing: the gate then does not pass, and the report shows the final
// confidence bounds, which are still valid at Alpha.
type Sequential struct {
	// Bar is the pass rate the gate asks for, in (0, 1).
	Bar float64 `json:"bar,omitempty"`
	// Baseline, when set, is the JSONL log of a base run of the same eval:
	// the gate then decides on paired per-sample differences, head − base,
	// whether the run is non-inferior (the mean difference is above
	// −Margin: "pass") or a regression (below: "fail"). A sample the base
	// run lacks counts as unknown (anywhere in [0, 1]), base errors as
	// unknown episodes.
	Baseline string `json:"baseline,omitempty"`
	// Margin is the non-inferiority margin, a pass-rate difference in
	// [0, 1) (0.03: three points); only with Baseline.
	Margin float64 `json:"margin,omitempty"`
	// Alpha is the error rate, in (0, 0.5); default 0.05.
	Alpha float64 `json:"alpha,omitempty"`
	// Method is the confidence sequence: MethodBetting (the default; it
	// decides sooner) or MethodEmpiricalBernstein.
	Method string `json:"method,omitempty"`

	// Seed is the run seed, which draws the claim order; Epochs the run's
	// epochs (0: learnt from the records) and Samples the dataset's size,
	// for the episodes a decision saved (0: unknown). The engine sets all
	// three; proctor report reads them from the log's manifest.
	Seed    uint64 `json:"-"`
	Epochs  int    `json:"-"`
	Samples int    `json:"-"`

	// Order is the claim frontier on record: the IDs of every sample the
	// run may claim, in claim order. The engine sets it and the log's
	// manifest keeps it, so that a report of the log knows the samples
	// that left no record: one claimed whose episodes are in flight, were
	// cancelled or never ran ends the prefix as it does in the engine.
	// Without it, a report of records alone cannot tell such a sample from
	// one the run never had, and decides nothing unless the records hold
	// every sample of the dataset (Samples).
	Order []string `json:"order,omitempty"`
	// Base pins the baseline: the base run's per-sample pass-rate ranges,
	// sample ID → [lo, hi] (its errored and unscored episodes anywhere in
	// between), and BaselineEval its eval. Load fills them from
	// Baseline's log; the manifest keeps them, so that the gate is decided
	// from the run's log alone, whatever becomes of the baseline's file,
	// and a resume against a changed baseline is refused.
	Base         map[string][2]float64 `json:"base,omitempty"`
	BaselineEval string                `json:"baseline_eval,omitempty"`
}

// Methods of [Sequential.Method].
const (
	MethodBetting            = "betting"
	MethodEmpiricalBernstein = "empirical-bernstein"
)

// DefaultAlpha is a sequential gate's error rate when none is given.
const DefaultAlpha = 0.05

// Decision is what a sequential gate decided.
type Decision string

// Decisions. For a comparison with a baseline, DecidedPass means
// non-inferior and DecidedFail a regression.
const (
	Undecided   Decision = "undecided"
	DecidedPass Decision = "pass"
	DecidedFail Decision = "fail"
)

// Load checks s, applies its defaults and reads its baseline's log, if any.
// The engine and proctor report call it before folding records; a
// Sequential that was not loaded is loaded by the first aggregator given
// it, and one whose baseline cannot be read then decides nothing (the
// report says why).
func (s *Sequential) Load() error {
	if s.Alpha == 0 {
		s.Alpha = DefaultAlpha
	}
	switch {
	case !(s.Alpha > 0 && s.Alpha < 0.5):
		return fmt.Errorf("report: sequential alpha %v: want an error rate in (0, 0.5)", s.Alpha)
	case s.Method != "" && s.Method != MethodBetting && s.Method != MethodEmpiricalBernstein:
		return fmt.Errorf("report: sequential method %q: want %q or %q", s.Method, MethodBetting, MethodEmpiricalBernstein)
	case s.Baseline == "" && !(s.Bar > 0 && s.Bar < 1):
		return fmt.Errorf("report: sequential bar %v: want a pass rate in (0, 1)", s.Bar)
	case s.Baseline != "" && !(s.Margin >= 0 && s.Margin < 1):
		return fmt.Errorf("report: sequential margin %v: want a pass-rate difference in [0, 1)", s.Margin)
	case s.Baseline != "" && s.Bar != 0:
		return errors.New("report: a sequential gate has a bar or a baseline, not both")
	case s.Epochs < 0 || s.Samples < 0:
		return fmt.Errorf("report: sequential epochs %d, samples %d: want counts", s.Epochs, s.Samples)
	}
	if s.Baseline == "" {
		if s.Base != nil {
			return errors.New("report: a sequential gate's base figures without a baseline")
		}
		return nil
	}
	if s.Base != nil {
		for id, b := range s.Base {
			if !(0 <= b[0] && b[0] <= b[1] && b[1] <= 1) {
				return fmt.Errorf("report: the baseline's range of sample %q is %v: want 0 ≤ lo ≤ hi ≤ 1", id, b)
			}
		}
		return nil
	}
	base, err := FromLog(s.Baseline, &Options{Resamples: -1})
	if err != nil {
		return fmt.Errorf("report: sequential baseline: %w", err)
	}
	s.BaselineEval = base.Eval
	s.Base = make(map[string][2]float64, len(base.SampleResults()))
	for _, r := range base.SampleResults() {
		n := float64(r.Passed + r.Failed + r.Errored + r.Unscored)
		s.Base[r.ID] = [2]float64{float64(r.Passed) / n, 1 - float64(r.Failed)/n}
	}
	return nil
}

// span is an observation known to lie in [lo, hi].
type span struct{ lo, hi float64 }

// SequentialResult is what a sequential gate decided, and at what point.
type SequentialResult struct {
	Bar      float64  `json:"bar,omitempty"`
	Baseline string   `json:"baseline,omitempty"`
	Margin   float64  `json:"margin,omitempty"`
	Alpha    float64  `json:"alpha"`
	Method   string   `json:"method"`
	Decision Decision `json:"decision"`
	// Samples and Episodes are the samples (in claim order) and their
	// episodes the decision rests on; when undecided, all the samples of
	// the longest finished prefix.
	Samples  int `json:"samples"`
	Episodes int `json:"episodes"`
	// Bounds are the confidence sequence's bounds at that point: the lower
	// one valid at Alpha (errors as failures), the upper one at Alpha
	// (errors as passes); for a comparison, of the mean difference
	// head − base.
	Bounds stats.Interval `json:"bounds"`
	// NotRun is the dataset's episodes that never ran (the engine knows the
	// dataset; a report of a log, its manifest), and CostNotSpentUSD their
	// cost estimated from the cost per finished episode.
	NotRun          int     `json:"episodes_not_run,omitempty"`
	CostNotSpentUSD float64 `json:"cost_not_spent_usd,omitempty"`
	// Problem says why nothing could be decided, when something was wrong
	// (an unreadable baseline, a log that does not record its claim order).
	Problem string `json:"problem,omitempty"`
	// Waiting, while undecided, names the sample that ends the finished
	// prefix: the one the decision waits for.
	Waiting string `json:"waiting,omitempty"`
}

// Passed reports whether the gate passed: decided, and decided pass.
func (r *SequentialResult) Passed() bool { return r.Decision == DecidedPass }

// ClaimOrder returns the order in which a sequential run claims the n
// samples whose IDs id gives: positions sorted by a hash of the run seed
// and the sample ID (ties, which need a 64-bit collision, by ID), so that
// the order depends on nothing else: not on the dataset's order, on
// concurrency or on resume, and a report of the log finds it again.
func ClaimOrder(seed uint64, n int, id func(i int) string) []int32 {
	keys := make([]uint64, n)
	order := make([]int32, n)
	for i := range n {
		keys[i] = claimKey(seed, id(i))
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int {
		if keys[x] != keys[y] {
			if keys[x] < keys[y] {
				return -1
			}
			return 1
		}
		return strings.Compare(id(int(x)), id(int(y)))
	})
	return order
}

// claimKey is FNV-1a of the ID mixed with the seed, then a SplitMix64
// finaliser.
func claimKey(seed uint64, id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	x := h ^ (seed+0x632be59bd9b4e019)*0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// decider takes samples' observations in claim order and says when the
// gate is decided: a betting test of the bar (O(1) per sample), or the
// empirical-Bernstein sequence. Both run two-sided at 2α, so that each
// side errs with probability at most α, and only one side can be wrong.
type decider struct {
	bar  float64
	test *stats.BettingTest
	eb   *stats.EmpiricalBernstein
	n    int
}

func newDecider(s *Sequential) *decider {
	d := &decider{bar: s.bar()}
	if s.Method == MethodEmpiricalBernstein {
		d.eb = stats.NewEmpiricalBernstein(2 * s.Alpha)
	} else {
		d.test = stats.NewBettingTest(d.bar, 2*s.Alpha)
	}
	return d
}

// add feeds one sample's observation and returns the decision so far.
func (d *decider) add(x span) Decision {
	d.n++
	if d.test != nil {
		d.test.AddRange(x.lo, x.hi)
		switch {
		case d.test.Above():
			return DecidedPass
		case d.test.Below():
			return DecidedFail
		}
		return Undecided
	}
	d.eb.AddRange(x.lo, x.hi)
	switch iv := d.eb.Interval(); {
	case iv.Lo >= d.bar:
		return DecidedPass
	case iv.Hi < d.bar:
		return DecidedFail
	}
	return Undecided
}

// bar is the bar on the scale of the observations: for a comparison, the
// difference −Margin mapped from [−1, 1] to [0, 1].
func (s *Sequential) bar() float64 {
	if s.Baseline != "" {
		return (1 - s.Margin) / 2
	}
	return s.Bar
}

// sequential is an aggregator's sequential gate as records arrive: which
// samples have all their epochs, and the decision over the claim order's
// longest finished prefix. The engine's aggregator keeps it up to date,
// to stop claiming once decided (O(1) per record); a report replays it.
type sequential struct {
	s        Sequential
	problem  string
	epochs   int32
	seen     []int32 // records per sample
	order    []int32 // claim position → sample; nil until known (NewIndexed knows it)
	base     []span  // per sample, with a baseline; parallel to order's samples
	next     int     // claim position of the first sample not fed
	d        *decider
	decision Decision
	at       int // samples fed when decided
	onDecide func()
}

func newSequential(s *Sequential) *sequential {
	q := &sequential{s: *s, decision: Undecided}
	if err := q.s.Load(); err != nil {
		q.problem = err.Error()
	}
	q.epochs = int32(q.s.Epochs)
	return q
}

// index prepares the incremental decision over n samples known up front.
func (q *sequential) index(n int, meta func(i int) (string, map[string]string)) {
	q.seen = make([]int32, n)
	if q.problem != "" || q.epochs == 0 {
		return
	}
	id := func(i int) string { s, _ := meta(i); return s }
	q.order = ClaimOrder(q.s.Seed, n, id)
	if q.s.Baseline != "" {
		q.base = make([]span, n)
		for i := range n {
			q.base[i] = q.s.baseOf(id(i))
		}
	}
	q.d = newDecider(&q.s)
}

func (s *Sequential) baseOf(id string) span {
	if b, ok := s.Base[id]; ok {
		return span{b[0], b[1]}
	}
	return span{0, 1}
}

// note counts a record of sample i and, once the sample at the head of the
// claim order has all its epochs, feeds the finished prefix.
func (q *sequential) note(i int, samples []sampleStats) {
	q.seen[i]++
	if q.d == nil || q.decision != Undecided || q.next >= len(q.order) || int(q.order[q.next]) != i || q.seen[i] < q.epochs {
		return
	}
	for q.next < len(q.order) {
		j := q.order[q.next]
		if q.seen[j] < q.epochs {
			return
		}
		q.next++
		var b span
		if q.base != nil {
			b = q.base[j]
		}
		if q.decision = q.d.add(q.s.observe(&samples[j], q.epochs, b)); q.decision != Undecided {
			q.at = q.next
			if q.onDecide != nil {
				q.onDecide()
			}
			return
		}
	}
}

// observe is a sample's observation over its epochs: its pass rate, an
// error or unscored episode anywhere in [0, 1]; against a baseline (the
// base's range b), the difference from the base's, mapped to [0, 1].
func (s *Sequential) observe(st *sampleStats, epochs int32, b span) span {
	if epochs == 1 { // the common case, without dividing
		return s.versus(span{float64(st.pass), float64(1 - st.fail)}, b)
	}
	e := float64(epochs)
	return s.versus(span{float64(st.pass) / e, 1 - float64(st.fail)/e}, b)
}

// versus is a head observation x against the base's b, mapped to [0, 1];
// x itself without a baseline.
func (s *Sequential) versus(x, b span) span {
	if s.Baseline == "" {
		return x
	}
	return span{(x.lo - b.hi + 1) / 2, (x.hi - b.lo + 1) / 2}
}

// OnDecided sets f to be called, once, on the goroutine adding records, when
// the aggregator's sequential gate ([Options.Sequential]) is decided. Only an
// aggregator from NewIndexed decides as records arrive; any other decides
// when its report is built.
func (a *Aggregator) OnDecided(f func()) {
	if a.seq != nil {
		a.seq.onDecide = f
	}
}

// OnVariantDecided sets f to be called, on the goroutine adding records,
// when the sequential gate ([Options.Sequential]) of one of the variants
// the records name is decided, once per variant, with its name. Each
// variant's gate is decided on its records alone, over the same claim
// order; no gate of the variants pooled is decided. Only an aggregator
// from NewIndexed decides as records arrive; f must be set before the
// first record.
func (a *Aggregator) OnVariantDecided(f func(variant string)) { a.onVariantDecided = f }

// VariantDecided is [Aggregator.Decided] of one variant's sequential gate:
// Undecided and 0 before any record of it.
func (a *Aggregator) VariantDecided(variant string) (Decision, int) {
	v, ok := a.variants[variant]
	if !ok {
		return Undecided, 0
	}
	return v.Decided()
}

// Decided returns what the sequential gate has decided so far (Undecided
// without one) and after how many samples in claim order (while
// undecided, the samples fed so far), as records arrive: for an aggregator
// from NewIndexed.
func (a *Aggregator) Decided() (Decision, int) {
	if a.seq == nil {
		return Undecided, 0
	}
	if a.seq.decision != Undecided {
		return a.seq.decision, a.seq.at
	}
	return Undecided, a.seq.next
}

// sequentialResult replays the gate over the claim order's longest
// finished prefix, to the decision: the same decision at the same point as
// the incremental one, with the confidence sequence's bounds there.
func (a *Aggregator) sequentialResult(episodes int, costUSD float64) *SequentialResult {
	q := a.seq
	s := &q.s
	res := &SequentialResult{Bar: s.Bar, Baseline: s.Baseline, Margin: s.Margin, Alpha: s.Alpha,
		Method: s.Method, Decision: Undecided, Problem: q.problem, Bounds: stats.Interval{Lo: 0, Hi: 1, Level: 1 - 2*s.Alpha}}
	if res.Method == "" {
		res.Method = MethodBetting
	}
	if s.Baseline != "" {
		res.Bounds.Lo = -1
	}
	epochs := q.epochs
	if epochs == 0 {
		epochs = int32(a.maxEpoch + 1)
	}
	if total := s.Samples * int(epochs); total > 0 {
		res.NotRun = max(total-episodes, 0)
		if episodes > 0 && costUSD > 0 {
			res.CostNotSpentUSD = costUSD / float64(episodes) * float64(res.NotRun)
		}
	}
	if q.problem != "" {
		return res
	}
	order := q.order
	if order == nil || len(order) != len(a.samples) {
		if order, res.Problem = a.recordedOrder(s); res.Problem != "" {
			return res
		}
	}
	d := newDecider(s)
	var los, his []float64 // the observations fed, for the betting bounds
	eb := stats.NewEmpiricalBernstein(2 * s.Alpha)
	for k, j := range order {
		if j < 0 || int(j) >= len(q.seen) || q.seen[j] < epochs {
			res.Waiting = a.waiting(s, order, k, epochs)
			break
		}
		var b span
		if s.Baseline != "" {
			id, _ := a.sampleMeta(int(j))
			b = s.baseOf(id)
		}
		x := s.observe(&a.samples[j], epochs, b)
		if s.Method == MethodEmpiricalBernstein {
			eb.AddRange(x.lo, x.hi)
		} else {
			los, his = append(los, x.lo), append(his, x.hi)
		}
		res.Samples++
		if res.Decision = d.add(x); res.Decision != Undecided {
			break
		}
	}
	res.Episodes = res.Samples * int(epochs)
	iv := eb.Interval()
	if s.Method != MethodEmpiricalBernstein {
		iv = stats.BettingInterval(los, his, 2*s.Alpha)
	}
	res.Bounds = iv
	if s.Baseline != "" {
		res.Bounds.Lo, res.Bounds.Hi = 2*iv.Lo-1, 2*iv.Hi-1
	}
	return res
}

// recordedOrder is the claim order of a report built from records alone
// (positions of the aggregator's samples; -1 for a sample of the order
// without a record): the manifest's order (Sequential.Order), else the
// order of the samples recorded when they are the whole dataset. Else it
// says why nothing can be decided.
func (a *Aggregator) recordedOrder(s *Sequential) ([]int32, string) {
	if len(s.Order) == 0 {
		if s.Samples == 0 || len(a.samples) < s.Samples {
			return nil, fmt.Sprintf("the log does not record its claim order (written by an older proctor?), and holds records of %d of the dataset's %d samples: a sample claimed but not finished (in flight, cancelled) cannot be told from one never claimed", len(a.samples), s.Samples)
		}
		return ClaimOrder(s.Seed, len(a.samples), func(i int) string { id, _ := a.sampleMeta(i); return id }), ""
	}
	order := make([]int32, 0, len(s.Order))
	for _, id := range s.Order {
		i, ok := a.Index(id)
		if !ok {
			return append(order, -1), "" // the prefix ends here
		}
		order = append(order, int32(i))
	}
	return order, ""
}

// waiting says which sample ends the finished prefix at claim position k.
func (a *Aggregator) waiting(s *Sequential, order []int32, k int, epochs int32) string {
	j := order[k]
	if j < 0 {
		return fmt.Sprintf("%s (claim position %d) has no record: in flight, cancelled, or not claimed yet", s.Order[k], k+1)
	}
	id, _ := a.sampleMeta(int(j))
	if int(j) >= len(a.seq.seen) {
		return fmt.Sprintf("%s (claim position %d) has no record", id, k+1)
	}
	return fmt.Sprintf("%s (claim position %d) has %d of its %d episodes", id, k+1, a.seq.seen[j], epochs)
}

// summary is the sequential gate's rows of the report's first table: what
// was decided and where, then what was not spent.
func (r *SequentialResult) summary() []SummaryRow {
	what := fmt.Sprintf("pass rate ≥ %s", pct(r.Bar))
	scale := pct
	if r.Baseline != "" {
		what = fmt.Sprintf("non-inferior to %s within %.1f points", r.Baseline, 100*r.Margin)
		scale = pts
	}
	bounds := fmt.Sprintf("bounds [%s, %s] (%s, each one-sided at α)", scale(r.Bounds.Lo), scale(r.Bounds.Hi), r.Method)
	var v string
	switch {
	case r.Problem != "":
		v = "undecided: " + r.Problem
	case r.Decision == Undecided:
		v = fmt.Sprintf("undecided after %d samples (%d episodes) in claim order: the gate does not pass; %s", r.Samples, r.Episodes, bounds)
		if r.Waiting != "" {
			v += "; the next sample, " + r.Waiting
		}
	default:
		verdict := "PASS"
		if r.Decision == DecidedFail {
			verdict = "FAIL: not " + what
			if r.Baseline != "" {
				verdict = fmt.Sprintf("FAIL: a regression beyond %.1f points", 100*r.Margin)
			}
		} else {
			verdict += ": " + what
		}
		v = fmt.Sprintf("%s at α = %g, decided after %d samples (%d episodes); %s", verdict, r.Alpha, r.Samples, r.Episodes, bounds)
	}
	rows := []SummaryRow{{Key: "sequential", Label: "sequential gate", Value: v}}
	if r.NotRun > 0 {
		saved := fmt.Sprintf("%d episodes not run", r.NotRun)
		if r.CostNotSpentUSD > 0 {
			saved += fmt.Sprintf(", ~$%.2f not spent (at the cost per finished episode)", r.CostNotSpentUSD)
		}
		rows = append(rows, SummaryRow{Key: "sequential-saved", Label: "not spent", Value: saved})
	}
	return rows
}

// ClaimOrder returns the claim order of the aggregator's sequential gate
// over the samples of NewIndexed: position → sample index, as [ClaimOrder]
// draws it. It is nil without a gate. The engine claims in this order.
func (a *Aggregator) ClaimOrder() []int32 {
	if a.seq == nil {
		return nil
	}
	return a.seq.order
}

// SequentialOf returns the sequential gate of the run whose manifest is m,
// ready for Options.Sequential (its seed, epochs and dataset size from the
// manifest), or nil when the run had none.
func SequentialOf(m *manifest.Manifest) (*Sequential, error) {
	if len(m.Sequential) == 0 {
		return nil, nil
	}
	var s Sequential
	if err := json.Unmarshal(m.Sequential, &s); err != nil {
		return nil, fmt.Errorf("report: the manifest's sequential gate: %w", err)
	}
	seed, err := strconv.ParseUint(m.Seed, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("report: the manifest's seed %q: %w", m.Seed, err)
	}
	s.Seed, s.Epochs, s.Samples = seed, m.Epochs, m.Dataset.Samples
	return &s, nil // a baseline that cannot be read is the report's Problem
}
