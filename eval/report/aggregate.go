package report

import (
	"errors"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/stats"
	"github.com/proctor-evals/proctor/usage"
	"gonum.org/v1/gonum/stat/distuv"
)

// FromRecords builds the report of the records a sequence yields, for
// example jsonl.Records(path): the same numbers the run printed. An error
// the sequence yields ends it and is returned, except a torn tail, which is
// noted in the report's warnings (the records before it are committed).
// A nil opts means the defaults.
func FromRecords(records iter.Seq2[sink.Record, error], opts *Options) (*Report, error) {
	a := NewAggregator(opts)
	for r, err := range records {
		if err != nil {
			if torn := (*jsonl.TornTailError)(nil); errors.As(err, &torn) {
				a.Warn(err.Error())
				break
			}
			return nil, err
		}
		a.Add(&r)
	}
	return a.Report(), nil
}

// Aggregator folds records into a report incrementally: it keeps compact
// per-sample state (24 bytes a sample), never records, so its memory grows
// with the number of samples, not with episodes × output size.
//
// An Aggregator is not safe for concurrent use: one goroutine feeds it.
type Aggregator struct {
	opts  Options
	eval  string
	runID string
	// index maps sample IDs to indexes, built when an ID is first looked
	// up: it holds the first indexed samples, and a lookup adds those
	// added since. A fold that keeps its own index of IDs (recordjson.Fold
	// over an empty aggregator) never builds it.
	index   map[string]int
	indexed int
	samples []sampleStats
	// weights parallels samples once a record weighs other than 1: until
	// then every weight is 1 and the counts are the weights.
	weights []sampleWeights
	// Samples [0, n) are described by meta (NewIndexed: the engine's
	// dataset, which saves a copy per sample); samples from n on by ids and
	// tags (discovered from records, or merged in). tags is as long as the
	// last sample with tags needs: samples past it have none.
	n          int
	meta       func(i int) (id string, tags map[string]string)
	ids        []string
	idBytes    []byte // where ids keep their bytes: one allocation per block, not per ID
	tags       []map[string]string
	maxEpoch   int
	counts     [4]int // pass, fail, error, unscored
	notSampled int
	excluded   int
	broken     brokenSamples
	weighted   bool
	scoreSum   float64
	latency    histogram
	usage      usage.Usage
	reused     int            // records with reused_from
	rejudged   int            // records with parent_run_id and no reused_from
	reusedCost usage.Usage    // usage of the reused records
	replay     Replay         // calls replayed and episodes diverged, from the records run here
	resources  map[string]int // episodes by their records' sandbox resources
	spend      spending       // usage by role and model (honest.go)
	sources    errorSources   // errors and unscored verdicts by where they came from (honest.go)
	stages     judgeStages    // the judge's stages' calls and verdicts (stages.go)
	failures   failureList
	warnings   []string
	seq        *sequential // the sequential gate (sequential.go); nil without one
	// variants folds the records of each variant on its own as well
	// (leaderboard.go); unassigned counts records without one.
	variants   map[string]*Aggregator
	unassigned int
	oneVariant bool // this is a variant's aggregator: it splits nothing
	// onVariantDecided is called when a variant's sequential gate decides
	// (OnVariantDecided).
	onVariantDecided func(variant string)
}

// sampleStats is kept per sample for the whole run: 24 bytes, since a
// million-sample run keeps a million of them. A sample's ID and tags come
// from Aggregator.sampleMeta; its weights, in the rare run whose records
// weigh other than 1, from Aggregator.weights.
type sampleStats struct {
	scoreSum                     float64
	cost                         float64 // for cost by tag
	pass, fail, errored, unscore int32
}

func (s *sampleStats) records() int { return int(s.pass + s.fail + s.errored + s.unscore) }

// sampleWeights are a sample's weighted passes and the weights of its
// scored episodes.
type sampleWeights struct{ pass, sum float64 }

// NewAggregator returns an aggregator that discovers samples from the
// records, by ID, in first-record order. A nil opts means the defaults.
func NewAggregator(opts *Options) *Aggregator {
	a := &Aggregator{opts: opts.withDefaults()}
	if a.opts.Sequential != nil {
		a.seq = newSequential(a.opts.Sequential)
	}
	return a
}

// NewIndexed returns an aggregator of n samples known up front, as the
// engine knows its dataset: meta(i) returns the ID and tags of sample i,
// for i in [0, n), and is called when the report is built (and by Index).
// Records are added by index with AddAt, which needs no lookup by ID; Add
// finds a sample by ID, and counts the record as excluded
// (Report.Excluded) when the ID is none of the n samples.
func NewIndexed(opts *Options, n int, meta func(i int) (id string, tags map[string]string)) *Aggregator {
	a := &Aggregator{opts: opts.withDefaults(), n: n, meta: meta, samples: make([]sampleStats, n)}
	if a.opts.Sequential != nil {
		a.seq = newSequential(a.opts.Sequential)
		a.seq.index(n, meta)
	}
	return a
}

// sampleMeta returns the ID and tags of the sample at index i.
func (a *Aggregator) sampleMeta(i int) (string, map[string]string) {
	if i < a.n {
		return a.meta(i)
	}
	return a.ids[i-a.n], tagsAt(a.tags, i-a.n)
}

// Index returns the index of the sample with the given ID, and whether
// there is one. The map of IDs is built by the first call, so that a run
// that never looks a sample up never keeps it.
func (a *Aggregator) Index(id string) (int, bool) {
	a.buildIndex()
	i, ok := a.index[id]
	return i, ok
}

// buildIndex adds the samples not indexed yet to the map of IDs.
func (a *Aggregator) buildIndex() {
	if a.index == nil {
		a.index = make(map[string]int, len(a.samples))
	}
	for ; a.indexed < len(a.samples); a.indexed++ {
		id, _ := a.sampleMeta(a.indexed)
		a.index[id] = a.indexed
	}
}

// addSample appends a sample not described by meta, which must not be
// known yet, and returns its index. It keeps a copy of id (a record's may
// share a reader's buffer) and tags as they are.
func (a *Aggregator) addSample(id string, tags map[string]string) int {
	id = a.keepID(id)
	i := len(a.samples)
	a.samples = append(grown(a.samples), sampleStats{})
	if a.weights != nil {
		a.weights = append(a.weights, sampleWeights{})
	}
	a.ids = append(grown(a.ids), id)
	if tags != nil {
		a.tags = append(a.tags, make([]map[string]string, len(a.ids)-1-len(a.tags))...)
		a.tags = append(a.tags, tags)
	}
	if a.seq != nil {
		a.seq.seen = append(a.seq.seen, 0)
	}
	return i
}

// grown returns s with room for one more element: twice its length when
// full, where append grows a long slice by a quarter. A million samples'
// state is then moved a few times, not dozens, and the heap keeps fewer
// outgrown copies.
func grown[S ~[]E, E any](s S) S {
	if len(s) < cap(s) {
		return s
	}
	return slices.Grow(s, max(len(s), 16))
}

// tagsAt returns the tags of the j-th sample past n.
func tagsAt(tags []map[string]string, j int) map[string]string {
	if j < len(tags) {
		return tags[j]
	}
	return nil
}

// idBlock is the size of the blocks sample IDs are copied into.
const idBlock = 64 << 10

// keepID returns a copy of id in the aggregator's blocks of IDs: a
// million samples' IDs cost a few hundred allocations, not a million. A
// block is never written again once an ID is in it.
func (a *Aggregator) keepID(id string) string {
	if id == "" {
		return ""
	}
	if len(id) > idBlock/8 {
		return strings.Clone(id)
	}
	if len(a.idBytes)+len(id) > cap(a.idBytes) {
		a.idBytes = make([]byte, 0, idBlock)
	}
	start := len(a.idBytes)
	a.idBytes = append(a.idBytes, id...)
	return unsafe.String(unsafe.SliceData(a.idBytes[start:]), len(id))
}

// Add folds in a record of the sample with the record's ID. Like AddAt,
// it keeps none of r's strings, only copies (r's memory may be a reader's
// buffer, reused for the next record); a new sample's tags map is kept as
// it is.
func (a *Aggregator) Add(r *sink.Record) {
	if a.skipBroken(r) {
		return
	}
	i, ok := a.Index(r.SampleID)
	if !ok {
		if a.meta != nil {
			a.excluded++
			return
		}
		i = a.addSample(r.SampleID, r.Tags)
	}
	a.AddAt(i, r)
}

// Warn adds a warning to the report.
func (a *Aggregator) Warn(msg string) { a.warnings = append(a.warnings, msg) }

// Usage returns the tokens and cost of the records folded in so far.
func (a *Aggregator) Usage() usage.Usage { return a.usage }

// AddAt folds in a record of the sample at index i, for callers (the
// engine) that know the index and need not hash the sample ID; i must be
// in [0, n) for an aggregator from NewIndexed. It keeps none of r's
// strings, only copies of the few it needs.
func (a *Aggregator) AddAt(i int, r *sink.Record) {
	if a.skipBroken(r) {
		return
	}
	if a.eval == "" {
		a.eval, a.runID = strings.Clone(r.Eval), strings.Clone(r.RunID)
	}
	switch {
	case a.oneVariant:
	case r.Variant != "":
		a.addVariant(i, r)
	default:
		a.unassigned++
	}
	s := &a.samples[i]
	a.maxEpoch = max(a.maxEpoch, r.Epoch)
	w := r.EffectiveWeight()
	if r.Weight != 0 && r.Weight != 1 {
		a.weighted = true
	}
	if w != 1 && a.weights == nil && (r.Status == sink.Pass || r.Status == sink.Fail) {
		a.weighWithCounts()
	}
	switch r.Status {
	case sink.Pass:
		a.counts[0]++
		s.pass++
		if a.weights != nil {
			a.weights[i].pass += w
			a.weights[i].sum += w
		}
	case sink.Fail:
		a.counts[1]++
		s.fail++
		if a.weights != nil {
			a.weights[i].sum += w
		}
	case sink.Error:
		a.counts[2]++
		s.errored++
	default:
		if r.ErrorKind == sink.KindNotSampled {
			a.notSampled++
			a.weighted = true
			break
		}
		a.counts[3]++
		s.unscore++
	}
	if r.Status == sink.Pass || r.Status == sink.Fail {
		a.scoreSum += r.Score
		s.scoreSum += r.Score
	}
	if r.Resources != "" {
		if n, ok := a.resources[r.Resources]; ok {
			a.resources[r.Resources] = n + 1
		} else {
			if a.resources == nil {
				a.resources = map[string]int{}
			}
			a.resources[strings.Clone(r.Resources)] = 1
		}
	}
	a.latency.add(r.DurationMS)
	a.usage = a.usage.Add(usage.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostUSD: r.CostUSD})
	s.cost += r.CostUSD
	a.spend.add(r)
	if r.Status == sink.Error || r.Status == sink.Unscored && r.ErrorKind != sink.KindNotSampled {
		a.sources.add(r)
	}
	if w := a.stages.add(r); w != "" {
		a.Warn(w)
	}
	switch {
	case r.ReusedFrom != "":
		a.reused++
		a.reusedCost = a.reusedCost.Add(usage.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostUSD: r.CostUSD})
	case r.ParentRunID != "":
		a.rejudged++
	default:
		a.replay.Replayed += r.CallsReplayed
		if r.ReplayDivergedAt > 0 {
			a.replay.Diverged++
		}
	}
	if r.Status != sink.Pass && r.ErrorKind != sink.KindNotSampled {
		reason := r.Reason
		if r.Error != "" {
			reason = firstLine(r.Error)
		}
		a.failures.add(Failure{SampleID: r.SampleID, Variant: r.Variant, Epoch: r.Epoch, Attempt: r.Attempt, Status: r.Status, ErrorKind: r.ErrorKind, Reason: reason, Transcript: r.Transcript,
			TraceID: r.TraceID, SpanID: r.SpanID, TraceURL: TraceURL(a.opts.TraceURL, r.TraceID, r.SpanID)}, a.opts.MaxFailures)
	}
	if a.seq != nil && (r.Variant == "" || a.oneVariant) {
		// Variants pooled describe no agent: a run of variants decides
		// no pooled gate as records arrive (each variant's is decided in
		// its own report).
		a.seq.note(i, a.samples)
	}
}

// noiseFloor is the noise floor of two runs like this one, or nil when
// no sample was scored twice.
func (a *Aggregator) noiseFloor() *stats.NoiseFloor {
	passes, scored := make([]int, 0, len(a.samples)), make([]int, 0, len(a.samples))
	n, episodes := 0, 0
	for i := range a.samples {
		s := &a.samples[i]
		m := int(s.pass + s.fail)
		if m == 0 {
			continue
		}
		passes, scored = append(passes, int(s.pass)), append(scored, m)
		n, episodes = n+1, episodes+m
	}
	v, dof := stats.WithinVariance(passes, scored)
	if dof == 0 {
		return nil
	}
	e := float64(episodes) / float64(n)
	nf := stats.Noise(v, n, e, e, a.opts.Level)
	return &nf
}

// weighWithCounts starts keeping weights: those of the records so far were
// all 1.
func (a *Aggregator) weighWithCounts() {
	w := make([]sampleWeights, len(a.samples))
	for i := range a.samples {
		w[i] = a.weightsOf(i)
	}
	a.weights = w
}

// weightsOf returns the weighted passes and total weight of sample i.
func (a *Aggregator) weightsOf(i int) sampleWeights {
	if a.weights != nil {
		return a.weights[i]
	}
	s := &a.samples[i]
	return sampleWeights{float64(s.pass), float64(s.pass + s.fail)}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Report computes the report of the records folded in so far. The
// aggregator stays usable: more records may be added and Report called
// again.
func (a *Aggregator) Report() *Report { return a.report(false) }

// Final is Report for an aggregator that is done: the report takes over
// its per-sample state instead of copying it, and the aggregator must not
// be used again. The engine ends a run with it, so that the end of a
// million-sample run allocates nothing per sample.
func (a *Aggregator) Final() *Report { return a.report(true) }

func (a *Aggregator) report(final bool) *Report {
	recorded := 0
	for i := range a.samples {
		if a.samples[i].records() > 0 {
			recorded++
		}
	}
	r := &Report{
		Eval: a.eval, RunID: a.runID,
		Samples: recorded, Epochs: a.maxEpoch + 1,
		Passed: a.counts[0], Failed: a.counts[1], Errored: a.counts[2], Unscored: a.counts[3],
		Weighted: a.weighted, NotSampled: a.notSampled, Excluded: a.excluded,
		Reused: a.reused, Rejudged: a.rejudged, ReusedUsage: a.reusedCost,
		Latency:  a.latency.summary(),
		Usage:    a.usage,
		Warnings: slices.Clone(a.warnings),
		Broken:   a.broken.ids(), BrokenEpisodes: a.broken.episodes,
		failOnBroken: a.opts.FailOnBroken,
	}
	if a.replay != (Replay{}) {
		rp := a.replay
		r.Replay = &rp
	}
	for _, res := range slices.Sorted(maps.Keys(a.resources)) {
		r.EpisodeResources = append(r.EpisodeResources, ResourcesCount{res, a.resources[res]})
	}
	r.Failures, r.FailuresOmitted = a.failures.listed(a.opts.MaxFailures)
	if recorded == 0 {
		r.Epochs = 0
	}
	r.Episodes = r.Passed + r.Failed + r.Errored + r.Unscored + r.NotSampled
	if scored := r.Passed + r.Failed; scored > 0 {
		r.MeanScore = a.scoreSum / float64(scored)
	}
	r.PassRate, r.Interval = a.passRate(nil, r.Epochs, excludeNoVerdict)
	a.honest(r)
	if r.Epochs > 1 && a.opts.Resamples > 0 && a.variants == nil { // variants: each bootstraps its own
		// The resamples depend on the order of the clusters: sort them by
		// ID, so that the same records give the same interval whatever the
		// order they arrived in or the aggregators they were merged from.
		ids := make([]string, len(a.samples))
		byID := make([]int, len(a.samples))
		for i := range ids {
			ids[i], _ = a.sampleMeta(i)
			byID[i] = i
		}
		slices.SortFunc(byID, func(x, y int) int { return strings.Compare(ids[x], ids[y]) })
		// One cluster resampled is always itself: a zero-width interval
		// that would read as certainty. There is none then.
		if sums, weights := a.clusters(byID, excludeNoVerdict); len(sums) >= 2 {
			iv := stats.BootstrapClusters(sums, weights, a.opts.Resamples, a.opts.Level, a.opts.Seed)
			r.Bootstrap = &iv
		}
	}
	for k := 1; k <= r.Epochs; k++ {
		at, hat, ok := a.passAtK(k)
		if !ok {
			// No sample is scored k times, nor more: an epoch number far
			// beyond the others (a log's, which anyone may write) costs
			// no loop up to it.
			break
		}
		r.PassAtK = append(r.PassAtK, KValue{k, at})
		r.PassHatK = append(r.PassHatK, KValue{k, hat})
	}
	r.ByTag = a.byTag(r.Epochs)
	r.NoiseFloor = a.noiseFloor()
	if a.seq != nil && a.variants == nil {
		r.Sequential = a.sequentialResult(r.Episodes, r.Usage.CostUSD)
		if r.Sequential.Decision != Undecided {
			r.Warnings = append(r.Warnings, "the run stopped once its sequential gate was decided: the pass rate's confidence interval assumes a sample size fixed in advance and reads too narrow; the gate's bounds hold")
		}
	}
	st := a.samples
	if !final {
		st = slices.Clone(st)
	}
	r.results = &sampleResults{build: a.resultsOf(st, recorded)}
	if a.variants != nil {
		a.leaderboard(r, final)
	}
	return r
}

// resultsOf returns a builder of the SampleResults of st, this
// aggregator's per-sample state (or a copy of it), for a report to call
// when they are first asked for. A sample's ID and tags never change once
// known, so the builder reads them from the aggregator as it is now.
func (a *Aggregator) resultsOf(st []sampleStats, recorded int) func() []SampleResult {
	n, meta, ids, tags := a.n, a.meta, a.ids[:len(a.ids):len(a.ids)], a.tags[:len(a.tags):len(a.tags)]
	return func() []SampleResult {
		out := make([]SampleResult, 0, recorded)
		for i := range st {
			s := &st[i]
			if s.records() == 0 {
				continue
			}
			var id string
			var tg map[string]string
			if i < n {
				id, tg = meta(i)
			} else {
				id, tg = ids[i-n], tagsAt(tags, i-n)
			}
			out = append(out, SampleResult{ID: id, Tags: tg, Passed: int(s.pass), Failed: int(s.fail),
				Errored: int(s.errored), Unscored: int(s.unscore), ScoreSum: s.scoreSum})
		}
		return out
	}
}

// Interval methods of pass rates, besides those of package stats.
const (
	MethodClustered = "cluster-robust (by sample)"
	// MethodWilsonOneSample and MethodWilsonNoVariation are Wilson over
	// episodes where the cluster-robust standard error is undefined (one
	// sample) or zero (every sample at the same rate, all passing say),
	// which would read as a zero-width certainty.
	MethodWilsonOneSample   = "wilson over episodes (one sample: a clustered SE needs two)"
	MethodWilsonNoVariation = "wilson over episodes (no variation between samples: clustered SE is 0)"
	methodNone              = "none: no scored episodes"
)

// passRate is the (weighted) pass rate over the given samples with its
// interval: Wilson over episodes when each sample ran once; cluster-robust
// by sample when samples ran several epochs, since epochs of one sample are
// correlated and treating them as independent overstates confidence. With
// fewer than two samples the clustered standard error is undefined, and
// with no variation between samples it is 0: then Wilson over episodes,
// with the reason in the interval's Method.
//
// mode says what errored and unscored episodes count as: nothing (the
// pass rate), failures or passes (the bounds of its worst-case range).
func (a *Aggregator) passRate(idx []int, epochs int, mode noVerdictAs) (float64, stats.Interval) {
	var pass, total float64
	scored := 0 // episodes
	a.each(idx, func(i int) {
		w := a.weightsAs(i, mode)
		pass += w.pass
		total += w.sum
		scored += int(a.samples[i].pass + a.samples[i].fail)
		if mode != excludeNoVerdict {
			scored += int(a.samples[i].errored + a.samples[i].unscore)
		}
	})
	if total == 0 {
		return 0, stats.Interval{Lo: 0, Hi: 1, Level: a.opts.Level, Method: methodNone}
	}
	rate := pass / total
	if epochs <= 1 && !a.weighted {
		return rate, stats.Wilson(int(math.Round(pass)), int(math.Round(total)), a.opts.Level)
	}
	sums, weights := a.clusters(idx, mode)
	mean, se := stats.ClusteredMean(sums, weights, true)
	if len(sums) < 2 || se == 0 {
		// Wilson over the scored episodes at the (weighted) rate.
		iv := stats.Wilson(min(scored, int(math.Round(rate*float64(scored)))), scored, a.opts.Level)
		iv.Method = MethodWilsonNoVariation
		if len(sums) < 2 {
			iv.Method = MethodWilsonOneSample
		}
		return mean, iv
	}
	z := distuv.UnitNormal.Quantile(1 - (1-a.opts.Level)/2)
	return mean, stats.Interval{Lo: max(0, mean-z*se), Hi: min(1, mean+z*se), Level: a.opts.Level, Method: MethodClustered}
}

// each calls f with each index of idx, or of every sample when idx is nil.
func (a *Aggregator) each(idx []int, f func(i int)) {
	if idx == nil {
		for i := range a.samples {
			f(i)
		}
		return
	}
	for _, i := range idx {
		f(i)
	}
}

// clusters returns per-sample weighted passes and weights of scored
// episodes (and of errored and unscored ones, unless mode excludes
// them), over idx (nil: every sample).
func (a *Aggregator) clusters(idx []int, mode noVerdictAs) (sums, weights []float64) {
	n := len(idx)
	if idx == nil {
		n = len(a.samples)
	}
	sums = make([]float64, 0, n)
	weights = make([]float64, 0, n)
	a.each(idx, func(i int) {
		if w := a.weightsAs(i, mode); w.sum > 0 {
			sums = append(sums, w.pass)
			weights = append(weights, w.sum)
		}
	})
	return sums, weights
}

// passAtK averages the unbiased per-sample estimators over samples scored
// at least k times.
func (a *Aggregator) passAtK(k int) (at, hat float64, ok bool) {
	n := 0
	for i := range a.samples {
		s := &a.samples[i]
		if scored := int(s.pass + s.fail); scored >= k {
			at += stats.PassAtK(scored, int(s.pass), k)
			hat += stats.PassHatK(scored, int(s.pass), k)
			n++
		}
	}
	if n == 0 {
		return 0, 0, false
	}
	return at / float64(n), hat / float64(n), true
}

func (a *Aggregator) byTag(epochs int) []TagBreakdown {
	groups := map[string]map[string][]int{} // tag → value → sample indexes
	for i := range a.samples {
		if a.samples[i].records() == 0 {
			continue
		}
		_, tags := a.sampleMeta(i)
		for k, v := range tags {
			if groups[k] == nil {
				groups[k] = map[string][]int{}
			}
			groups[k][v] = append(groups[k][v], i)
		}
	}
	var out []TagBreakdown
	for _, tag := range slices.Sorted(maps.Keys(groups)) {
		tb := TagBreakdown{Tag: tag}
		for _, value := range slices.Sorted(maps.Keys(groups[tag])) {
			idx := groups[tag][value]
			g := Group{Value: value, Samples: len(idx)}
			for _, i := range idx {
				s := &a.samples[i]
				g.Passed += int(s.pass)
				g.Failed += int(s.fail)
				g.Errored += int(s.errored)
				g.Unscored += int(s.unscore)
				g.CostUSD += s.cost
			}
			g.Episodes = g.Passed + g.Failed + g.Errored + g.Unscored
			g.PassRate, g.Interval = a.passRate(idx, epochs, excludeNoVerdict)
			tb.Groups = append(tb.Groups, g)
		}
		out = append(out, tb)
	}
	return out
}

// histogram keeps durations in log-spaced buckets 1% wide, from 1 µs to
// about 40 days, so that quantiles take constant memory however many
// episodes a run has, with 0.5% relative error.
type histogram struct {
	buckets [histBuckets]uint32
	n       int
	max     float64
}

const (
	bucketBase  = 1.01
	histMinMS   = 1e-3
	histBuckets = 2400
)

var logBucketBase = math.Log(bucketBase)

func (h *histogram) add(ms float64) {
	h.n++
	h.max = max(h.max, ms)
	b := 0
	if ms > histMinMS {
		b = min(histBuckets-1, 1+int(math.Log(ms/histMinMS)/logBucketBase))
	}
	h.buckets[b]++
}

func (h *histogram) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := uint32(math.Ceil(q * float64(h.n)))
	var seen uint32
	for b, c := range h.buckets {
		seen += c
		if seen >= rank {
			if b == 0 {
				return 0
			}
			return min(h.max, histMinMS*math.Pow(bucketBase, float64(b-1)+0.5))
		}
	}
	return h.max
}

func (h *histogram) summary() Latency {
	return Latency{P50MS: h.quantile(0.5), P95MS: h.quantile(0.95), MaxMS: h.max}
}
