package report

// The leaderboard of a log of variants (docs/comparing-agents.md): each
// variant's standing, their paired differences, the probability that each
// is best and the Pareto frontier of pass rate against cost. Variants are
// never pooled: a report of variants has no pass rate of its own.

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/internal/natural"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/stats"
)

// Methods of Leaderboard.PBestMethod.
const (
	PBestBootstrap = "bootstrap over samples"
	// PBestNormal draws the variants' pass rates from the normal law the
	// bootstrap tends to: centred on the observed rates, with the
	// covariance of their linearised per-sample contributions (variants
	// share samples, so their rates are correlated). It costs samples ×
	// variants² once, not per resample.
	PBestNormal = "normal approximation to the bootstrap over samples"
)

// pBestBudget bounds the work of the bootstrap of PBest: samples ×
// variants × resamples. A variable for the tests.
var pBestBudget = 1e8

// MethodByVariant is the Method of the pass-rate interval of a report of
// variants, which pools none: each variant's is in the Leaderboard.
const MethodByVariant = "none: variants are not pooled (see the leaderboard)"

// Leaderboard ranks the variants of a log (records with a variant): the
// best pass rate first.
type Leaderboard struct {
	Level    float64    `json:"level"`
	Variants []Standing `json:"variants"`
	// Pairs is every pair of variants, the better-ranked A first: the
	// paired difference A − B by sample (each sample's pass rate averaged
	// over its epochs, as [Compare] pairs two runs), over the samples both
	// scored, with Holm-adjusted p-values across all the pairs.
	Pairs []VariantDifference `json:"pairs,omitempty"`
	// Resamples is the number of bootstrap resamples of the samples that
	// estimate each variant's PBest, drawn from Seed, which is a hash of
	// the records' outcomes (and Options.Seed): the same log gives the
	// same probabilities. 0 when none were drawn (Options.Resamples < 0).
	Resamples int    `json:"resamples"`
	Seed      uint64 `json:"seed"`
	// PBestMethod is how PBest was estimated: PBestBootstrap, or, when
	// samples × variants × resamples exceed 10⁸ (a million-sample log),
	// PBestNormal.
	PBestMethod string `json:"p_best_method,omitempty"`
	// Frontier names the variants on the Pareto frontier of pass rate
	// against cost per sample, the cheapest first: none has another at
	// least as good at no more cost (point estimates).
	Frontier []string `json:"frontier,omitempty"`
	// Unassigned counts records of the log with no variant: they are in
	// no standing.
	Unassigned int `json:"unassigned,omitempty"`

	reports map[string]*Report
}

// Standing is one variant's line of a leaderboard.
type Standing struct {
	Variant  string `json:"variant"`
	Samples  int    `json:"samples"`
	Epochs   int    `json:"epochs"`
	Episodes int    `json:"episodes"`
	Passed   int    `json:"passed"`
	Failed   int    `json:"failed"`
	Errored  int    `json:"errored"`
	Unscored int    `json:"unscored"`
	// PassRate and Interval are computed as a report's (clustered by
	// sample over several epochs); WorstCase as a report's, nil when none
	// of the variant's episodes errored or were unscored.
	PassRate  float64        `json:"pass_rate"`
	Interval  stats.Interval `json:"interval"`
	WorstCase *WorstCase     `json:"worst_case,omitempty"`
	// CostUSD is what the variant's episodes cost; CostPerSample that over
	// its samples (every epoch of a sample).
	CostUSD       float64 `json:"cost_usd"`
	CostPerSample float64 `json:"cost_per_sample"`
	Latency       Latency `json:"latency"`
	// PBest is the probability that the variant has the best pass rate:
	// the share of bootstrap resamples of the samples in which it did
	// (ties shared). NaN when none were drawn.
	PBest  float64 `json:"p_best"`
	Pareto bool    `json:"pareto,omitempty"`
	// Sequential is the variant's own sequential gate (Options.Sequential).
	Sequential *SequentialResult `json:"sequential,omitempty"`
	// Eliminated is set when the run stopped running the variant because
	// another was better (from the log's manifest).
	Eliminated *manifest.Elimination `json:"eliminated,omitempty"`
}

// VariantDifference is the paired difference of two variants' pass rates,
// A − B.
type VariantDifference struct {
	A        string           `json:"a"`
	B        string           `json:"b"`
	PassRate stats.Difference `json:"pass_rate"`
	// HolmP is PassRate.P adjusted by [stats.Holm] across all the pairs.
	HolmP float64 `json:"holm_p"`
}

// VariantReport returns the report of one variant of a report of variants, as
// the report of a log holding that variant's records alone; nil when
// there is no such variant. [Compare] of two of them is the paired
// comparison of the two variants.
func (r *Report) VariantReport(name string) *Report {
	if r.Leaderboard == nil {
		return nil
	}
	return r.Leaderboard.reports[name]
}

// VariantNames lists the variants of a report, in the leaderboard's
// order; none for a log without variants.
func (r *Report) VariantNames() []string {
	if r.Leaderboard == nil {
		return nil
	}
	var out []string
	for _, s := range r.Leaderboard.Variants {
		out = append(out, s.Variant)
	}
	return out
}

// addVariant folds r, of the sample at index i, into its variant's own
// aggregator.
func (a *Aggregator) addVariant(i int, r *sink.Record) {
	v, ok := a.variants[r.Variant]
	if !ok {
		if a.variants == nil {
			a.variants = map[string]*Aggregator{}
		}
		name := strings.Clone(r.Variant)
		if a.meta != nil {
			// The engine's: indexed as the run is, so that the variant's
			// sequential gate decides as records arrive (the engine stops
			// running a variant whose gate decided).
			v = NewIndexed(&a.opts, a.n, a.meta)
			if f := a.onVariantDecided; v.seq != nil && f != nil {
				v.seq.onDecide = func() { f(name) }
			}
		} else {
			v = NewAggregator(&a.opts)
		}
		v.oneVariant = true
		a.variants[name] = v
	}
	if v.meta != nil {
		v.AddAt(i, r)
		return
	}
	j, ok := v.Index(r.SampleID)
	if !ok {
		// The parent's tags: a fold leaves out those of a sample it has
		// seen, which another variant's record carried.
		_, tags := a.sampleMeta(i)
		j = v.addSample(r.SampleID, tags)
	}
	v.AddAt(j, r)
}

// leaderboard turns r, the report of a log of variants, into one: the
// pooled statistics blank (NaN, nil), each variant's in its standing.
func (a *Aggregator) leaderboard(r *Report, final bool) {
	nan := math.NaN()
	r.PassRate, r.MeanScore = nan, nan
	r.Interval = stats.Interval{Lo: nan, Hi: nan, Level: a.opts.Level, Method: MethodByVariant}
	r.WorstCase, r.Bootstrap, r.NoiseFloor, r.Sequential = nil, nil, nil, nil
	r.PassAtK, r.PassHatK, r.ByTag = nil, nil, nil
	lb := &Leaderboard{Level: a.opts.Level, Unassigned: a.unassigned, reports: map[string]*Report{}}
	for name, v := range a.variants {
		vr := v.report(final)
		vr.Variant = name
		lb.reports[name] = vr
		s := Standing{Variant: name, Samples: vr.Samples, Epochs: vr.Epochs, Episodes: vr.Episodes,
			Passed: vr.Passed, Failed: vr.Failed, Errored: vr.Errored, Unscored: vr.Unscored,
			PassRate: vr.PassRate, Interval: vr.Interval, WorstCase: vr.WorstCase,
			CostUSD: vr.Usage.CostUSD, CostPerSample: nan, Latency: vr.Latency, PBest: nan, Sequential: vr.Sequential}
		if vr.Passed+vr.Failed == 0 {
			s.PassRate = nan
		}
		if vr.Samples > 0 {
			s.CostPerSample = vr.Usage.CostUSD / float64(vr.Samples)
		}
		lb.Variants = append(lb.Variants, s)
	}
	// Warnings in the order of names, not of the map: the same records
	// give the same report.
	for _, name := range slices.SortedFunc(maps.Keys(lb.reports), byName) {
		for _, w := range lb.reports[name].Warnings {
			r.Warnings = append(r.Warnings, "variant "+name+": "+w)
		}
	}
	slices.SortFunc(lb.Variants, func(x, y Standing) int {
		if c := compareRates(x.PassRate, y.PassRate); c != 0 {
			return c
		}
		return byName(x.Variant, y.Variant)
	})
	lb.pairs()
	if a.opts.Resamples > 0 {
		lb.Resamples = a.opts.Resamples
		lb.pBest(a.opts.Seed)
	}
	lb.pareto()
	if lb.Unassigned > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d records have no variant in a log of variants: they are in no variant's standing", lb.Unassigned))
	}
	r.Leaderboard = lb
}

// byName orders names naturally ("v2" before "v10"), and names natural
// order ties ("s01", "s1") bytewise: a total order, so that the same
// records give the same report in any order.
func byName(x, y string) int { return cmp.Or(natural.Compare(x, y), strings.Compare(x, y)) }

// compareRates orders pass rates from the highest, NaN last.
func compareRates(x, y float64) int {
	switch xn, yn := math.IsNaN(x), math.IsNaN(y); {
	case xn && yn:
		return 0
	case xn:
		return 1
	case yn:
		return -1
	}
	return cmp.Compare(y, x)
}

// pairs compares every pair of variants, paired by sample.
func (lb *Leaderboard) pairs() {
	var ps []float64
	for i := range lb.Variants {
		for j := i + 1; j < len(lb.Variants); j++ {
			a, b := lb.Variants[i].Variant, lb.Variants[j].Variant
			c := Compare(lb.reports[b], lb.reports[a], &CompareOptions{Level: lb.Level, MaxFlips: -1})
			lb.Pairs = append(lb.Pairs, VariantDifference{A: a, B: b, PassRate: c.PassRate})
			ps = append(ps, c.PassRate.P)
		}
	}
	for i, p := range stats.Holm(ps) {
		lb.Pairs[i].HolmP = p
	}
}

// pBest estimates each variant's probability of the best pass rate by
// resampling the samples (the union of every variant's scored samples)
// with replacement: in each resample, each variant's pass rate is its
// passes over its scored episodes on the drawn samples it scored.
func (lb *Leaderboard) pBest(seed uint64) {
	k := len(lb.Variants)
	ids := map[string]int{}
	var order []string
	results := make([][]SampleResult, k)
	for v := range lb.Variants {
		results[v] = lb.reports[lb.Variants[v].Variant].SampleResults()
		for _, s := range results[v] {
			if _, ok := ids[s.ID]; !ok && s.Scored() > 0 {
				ids[s.ID] = 0
				order = append(order, s.ID)
			}
		}
	}
	slices.SortFunc(order, byName)
	for i, id := range order {
		ids[id] = i
	}
	n := len(order)
	pass, scored := make([][]float64, k), make([][]float64, k)
	h := fnv.New64a()
	var buf [8]byte
	for v := range lb.Variants {
		pass[v], scored[v] = make([]float64, n), make([]float64, n)
		for _, s := range results[v] {
			if s.Scored() > 0 {
				pass[v][ids[s.ID]], scored[v][ids[s.ID]] = float64(s.Passed), float64(s.Scored())
			}
		}
		h.Write([]byte(lb.Variants[v].Variant))
		h.Write([]byte{0})
		for i := range n {
			binary.LittleEndian.PutUint64(buf[:], uint64(pass[v][i])<<32|uint64(scored[v][i]))
			h.Write(buf[:])
		}
	}
	for _, id := range order {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	lb.Seed = h.Sum64() ^ seed
	best := make([]float64, k)
	lb.PBestMethod = PBestBootstrap
	if float64(n)*float64(k)*float64(lb.Resamples) > pBestBudget {
		lb.PBestMethod = PBestNormal
		best = pBestNormal(pass, scored, lb.Resamples, lb.Seed)
	} else if n > 0 {
		rng := rand.New(rand.NewPCG(lb.Seed, 0x9e3779b97f4a7c15))
		draws := make([]int, n)
		rates := make([]float64, k)
		for range lb.Resamples {
			for i := range draws {
				draws[i] = rng.IntN(n)
			}
			top := math.Inf(-1)
			for v := range k {
				var p, s float64
				for _, i := range draws {
					p += pass[v][i]
					s += scored[v][i]
				}
				rates[v] = math.NaN()
				if s > 0 {
					rates[v] = p / s
					top = max(top, rates[v])
				}
			}
			ties := 0
			for v := range k {
				if rates[v] == top {
					ties++
				}
			}
			for v := range k {
				if rates[v] == top {
					best[v] += 1 / float64(ties)
				}
			}
		}
	}
	for v := range lb.Variants {
		lb.Variants[v].PBest = math.NaN()
		if n > 0 {
			lb.Variants[v].PBest = best[v] / float64(lb.Resamples)
		}
	}
}

// pBestNormal counts, over the given draws, how often each variant's
// pass rate is the highest when the rates are drawn from the normal law
// of PBestNormal.
func pBestNormal(pass, scored [][]float64, draws int, seed uint64) []float64 {
	k := len(pass)
	best := make([]float64, k)
	if k == 0 || len(pass[0]) == 0 {
		return best
	}
	n := float64(len(pass[0]))
	rate, mean := make([]float64, k), make([]float64, k)
	for v := range k {
		var p, s float64
		for i := range pass[v] {
			p += pass[v][i]
			s += scored[v][i]
		}
		rate[v], mean[v] = math.NaN(), s/n
		if s > 0 {
			rate[v] = p / s
		}
	}
	// The covariance of the rates: of the mean of u_iv = (pass_iv −
	// rate_v scored_iv) / mean_v over the samples, Σ/n.
	cov := make([][]float64, k)
	for v := range k {
		cov[v] = make([]float64, k)
	}
	u := make([]float64, k)
	for i := range pass[0] {
		for v := range k {
			u[v] = 0
			if !math.IsNaN(rate[v]) {
				u[v] = (pass[v][i] - rate[v]*scored[v][i]) / mean[v]
			}
		}
		for v := range k {
			for w := 0; w <= v; w++ {
				cov[v][w] += u[v] * u[w]
			}
		}
	}
	// Cholesky, lower: a pivot that rounding leaves at or under 0 (two
	// variants that never differ) draws nothing for its variant.
	l := make([][]float64, k)
	for v := range k {
		l[v] = make([]float64, k)
		for w := 0; w <= v; w++ {
			sum := cov[v][w] / (n * n)
			for j := range w {
				sum -= l[v][j] * l[w][j]
			}
			switch {
			case v == w && sum > 0:
				l[v][v] = math.Sqrt(sum)
			case v == w:
				l[v][v] = 0
			case l[w][w] > 0:
				l[v][w] = sum / l[w][w]
			}
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x6a09e667f3bcc908))
	z, x := make([]float64, k), make([]float64, k)
	for range draws {
		for v := range k {
			z[v] = rng.NormFloat64()
		}
		top, at := math.Inf(-1), -1
		for v := range k {
			if math.IsNaN(rate[v]) {
				continue
			}
			x[v] = rate[v]
			for j := 0; j <= v; j++ {
				x[v] += l[v][j] * z[j]
			}
			if x[v] > top {
				top, at = x[v], v
			}
		}
		if at >= 0 {
			best[at]++
		}
	}
	return best
}

// pareto marks the variants no other beats on both pass rate and cost per
// sample (at least as good on both, better on one).
func (lb *Leaderboard) pareto() {
	ok := func(s *Standing) bool { return !math.IsNaN(s.PassRate) && !math.IsNaN(s.CostPerSample) }
	var front []*Standing
	for i := range lb.Variants {
		v := &lb.Variants[i]
		if !ok(v) {
			continue
		}
		dominated := false
		for j := range lb.Variants {
			u := &lb.Variants[j]
			if j != i && ok(u) && u.PassRate >= v.PassRate && u.CostPerSample <= v.CostPerSample &&
				(u.PassRate > v.PassRate || u.CostPerSample < v.CostPerSample) {
				dominated = true
				break
			}
		}
		if v.Pareto = !dominated; v.Pareto {
			front = append(front, v)
		}
	}
	slices.SortStableFunc(front, func(x, y *Standing) int { return cmp.Compare(x.CostPerSample, y.CostPerSample) })
	for _, v := range front {
		lb.Frontier = append(lb.Frontier, v.Variant)
	}
}

// AddEliminations notes the run's eliminations in the standings
// (Standing.Eliminated): from the log's manifest for a report of a log, from
// the run itself for the report Eval.Run returns. An eliminated variant is
// left out of the gates.
func (lb *Leaderboard) AddEliminations(es []manifest.Elimination) {
	for _, e := range es {
		for i := range lb.Variants {
			if lb.Variants[i].Variant == e.Variant {
				e := e
				lb.Variants[i].Eliminated = &e
			}
		}
	}
}

// variantGateFailure is GateFailure of a report of variants: each variant's own,
// except a variant the run eliminated (another was better: it is not a
// candidate the gate is asked about).
func (r *Report) variantGateFailure() string {
	var out []string
	for _, s := range r.Leaderboard.Variants {
		if s.Eliminated != nil {
			continue
		}
		if why := r.Leaderboard.reports[s.Variant].GateFailure(); why != "" {
			out = append(out, "variant "+s.Variant+": "+why)
		}
	}
	return strings.Join(out, "\n")
}

// variantGateBound is GateBound of a report of variants: the lowest of the
// variants that were not eliminated, and which variant it is.
func (r *Report) variantGateBound(excludeErrors bool) (float64, string) {
	lo, name := math.Inf(1), ""
	for _, s := range r.Leaderboard.Variants {
		if s.Eliminated != nil {
			continue
		}
		if b := r.Leaderboard.reports[s.Variant].GateBound(excludeErrors); b < lo || name == "" {
			lo, name = b, s.Variant
		}
	}
	if name == "" {
		return 0, ""
	}
	return lo, name
}

// GateBoundVariant is GateBound and, for a report of variants, the
// variant it is of: the lowest bound of the variants the run did not
// eliminate, since a gate holds for each.
func (r *Report) GateBoundVariant(excludeErrors bool) (float64, string) {
	if r.Leaderboard == nil {
		return r.GateBound(excludeErrors), ""
	}
	return r.variantGateBound(excludeErrors)
}

// headlineVariants is the headline of a report of variants: each one's
// pass rate, the best first.
func (r *Report) headlineVariants() string {
	lb := r.Leaderboard
	var parts []string
	for _, s := range lb.Variants {
		p := s.Variant + " "
		if math.IsNaN(s.PassRate) {
			p += "n/a"
		} else {
			p += fmt.Sprintf("%s [%s, %s]", pct(s.PassRate), pct(s.Interval.Lo), pct(s.Interval.Hi))
		}
		if s.WorstCase != nil {
			p += fmt.Sprintf(" (worst case %s–%s)", pct(s.WorstCase.Lower.PassRate), pct(s.WorstCase.Upper.PassRate))
		}
		if s.Eliminated != nil {
			p += " eliminated"
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("%d variants, not pooled: pass rate %s (%g%% CI)", len(lb.Variants), strings.Join(parts, "; "), 100*lb.Level)
}

// MarshalJSON writes the standing; undefined statistics are null.
func (s Standing) MarshalJSON() ([]byte, error) {
	type plain Standing
	return json.Marshal(struct {
		plain
		PassRate      stats.Float `json:"pass_rate"`
		CostUSD       stats.Float `json:"cost_usd"`
		CostPerSample stats.Float `json:"cost_per_sample"`
		PBest         stats.Float `json:"p_best"`
	}{plain(s), stats.Float(s.PassRate), stats.Float(s.CostUSD), stats.Float(s.CostPerSample), stats.Float(s.PBest)})
}

// MarshalJSON writes the difference; undefined statistics are null.
func (d VariantDifference) MarshalJSON() ([]byte, error) {
	type plain VariantDifference
	return json.Marshal(struct {
		plain
		HolmP stats.Float `json:"holm_p"`
	}{plain(d), stats.Float(d.HolmP)})
}

// write prints the leaderboard's tables.
func (lb *Leaderboard) write(t *table) {
	lv := fmt.Sprintf("%g%% CI", 100*lb.Level)
	t.title("leaderboard (variants, the best pass rate first)")
	t.header("#", "variant", "samples", "episodes", "pass rate", lv, "worst case", "cost/sample", "p50", "p95", "P(best)", "pareto", "status")
	for i, s := range lb.Variants {
		rate, ci := "n/a", ""
		if !math.IsNaN(s.PassRate) {
			rate, ci = pct(s.PassRate), fmt.Sprintf("[%s, %s]", pct(s.Interval.Lo), pct(s.Interval.Hi))
		}
		worst := ""
		if wc := s.WorstCase; wc != nil {
			worst = fmt.Sprintf("%s–%s (%d no verdict)", pct(wc.Lower.PassRate), pct(wc.Upper.PassRate), wc.NoVerdict)
		}
		cost := "n/a"
		if !math.IsNaN(s.CostPerSample) {
			cost = usd(s.CostPerSample)
		}
		pb := "n/a"
		if !math.IsNaN(s.PBest) {
			pb = pct(s.PBest)
		}
		front := ""
		if s.Pareto {
			front = "yes"
		}
		t.row(fmt.Sprint(i+1), s.Variant, fmt.Sprint(s.Samples), fmt.Sprint(s.Episodes), rate, ci, worst, cost,
			ms(s.Latency.P50MS), ms(s.Latency.P95MS), pb, front, s.status())
	}
	if t.md {
		t.printf("\n") // a list after a table, not a row of it
	}
	for _, s := range lb.Variants {
		if e := s.Eliminated; e != nil {
			t.line(fmt.Sprintf("eliminated: %s %s", s.Variant, EliminationText(e)))
		}
	}
	for _, s := range lb.Variants {
		// Each variant's gate, where it decided and what it saved; an
		// eliminated variant's is not asked (its status says why).
		if s.Sequential != nil && s.Eliminated == nil {
			rows := s.Sequential.summary()
			line := "sequential gate of " + s.Variant + ": " + rows[0].Value
			if len(rows) > 1 {
				line += "; " + rows[1].Value
			}
			t.line(line)
		}
	}
	if lb.Resamples > 0 {
		t.line(lb.pBestNote())
	}
	if len(lb.Frontier) > 0 {
		t.line("Pareto frontier (pass rate against cost per sample, the cheapest first): " + strings.Join(lb.Frontier, ", "))
	}
	if len(lb.Pairs) == 0 {
		return
	}
	t.title(fmt.Sprintf("pairwise differences (paired by sample, epochs averaged; %s; Holm-adjusted across %d pairs)", MethodPairedT, len(lb.Pairs)))
	t.header("a", "b", "paired samples", "a", "b", "a − b", lv, "p", "Holm p")
	for _, d := range lb.Pairs {
		p := d.PassRate
		t.row(d.A, d.B, fmt.Sprint(p.N), pct(p.MeanB), pct(p.MeanA), pts(p.Mean), fmt.Sprintf("[%s, %s]", pts(p.Lo), pts(p.Hi)), pval(p.P), pval(d.HolmP))
	}
}

// status is a standing's last column: an elimination, the variant's
// sequential gate.
func (s *Standing) status() string {
	switch {
	case s.Eliminated != nil:
		return "eliminated by " + s.Eliminated.By
	case s.Sequential != nil:
		return "sequential gate: " + string(s.Sequential.Decision)
	}
	return ""
}

// EliminationText says what an elimination decided and saved: "stopped
// after 40 samples; saved 180 episodes (worse than b at α = 0.05)".
func EliminationText(e *manifest.Elimination) string {
	return fmt.Sprintf("stopped after %d samples; saved %d episodes (worse than %s at α = %g)", e.AfterSamples, e.Saved, e.By, e.Alpha)
}

// pBestNote says how P(best) was estimated.
func (lb *Leaderboard) pBestNote() string {
	if lb.PBestMethod == PBestNormal {
		return fmt.Sprintf("P(best): the share of %d draws, from the %s (too many samples to resample), in which the variant's pass rate is the highest; seed %d, from the records", lb.Resamples, PBestNormal, lb.Seed)
	}
	return fmt.Sprintf("P(best): the share of %d bootstrap resamples of the samples in which the variant's pass rate is the highest (ties shared); seed %d, from the records", lb.Resamples, lb.Seed)
}

// PBestNote says how the leaderboard's P(best) was estimated, with how
// many resamples and which seed; "" when it was not.
func (lb *Leaderboard) PBestNote() string {
	if lb.Resamples == 0 {
		return ""
	}
	return lb.pBestNote()
}
