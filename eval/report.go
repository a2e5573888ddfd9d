package eval

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/stats"
	"gonum.org/v1/gonum/stat/distuv"
)

// Report is the standard summary of a run. Every eval reports in this shape,
// so that results compare across a suite and across time. It prints as a
// text table (WriteText, WriteMarkdown) and marshals to JSON.
type Report struct {
	Eval      string        `json:"eval"`
	RunID     string        `json:"run_id"`
	StartedAt time.Time     `json:"started_at,omitzero"`
	Wall      time.Duration `json:"wall_ns,omitempty"`

	Samples   int `json:"samples"`  // distinct samples recorded
	Epochs    int `json:"epochs"`   // repeats per sample
	Episodes  int `json:"episodes"` // records: one per finished episode
	Passed    int `json:"passed"`
	Failed    int `json:"failed"`
	Errored   int `json:"errored"`
	Unscored  int `json:"unscored"`
	Cancelled int `json:"cancelled,omitempty"` // started but not finished: they run on resume
	// NotSampled counts episodes an asymmetric-sampling judge left out of
	// the expensive judge (weight 0 in the weighted pass rate); they are
	// not in Unscored.
	NotSampled int `json:"not_sampled,omitempty"`
	Resumed    int `json:"resumed,omitempty"` // records this run found in its log
	Excluded   int `json:"excluded,omitempty"`

	// PassRate is passed / (passed + failed): error and unscored episodes
	// are excluded, and counted above. With sampled verdicts it is the
	// inverse-probability-weighted rate (Weighted).
	PassRate float64        `json:"pass_rate"`
	Interval stats.Interval `json:"interval"`
	// Bootstrap is a cluster bootstrap interval of PassRate, when there are
	// several epochs.
	Bootstrap *stats.Interval `json:"bootstrap,omitempty"`
	Weighted  bool            `json:"weighted,omitempty"`
	MeanScore float64         `json:"mean_score"`

	PassAtK  []KValue `json:"pass_at_k,omitempty"`  // unbiased pass@k, k = 1..Epochs
	PassHatK []KValue `json:"pass_hat_k,omitempty"` // pass^k: all k tries pass

	ByTag []TagBreakdown `json:"by_tag,omitempty"`

	Latency Latency       `json:"latency"`
	Usage   harness.Usage `json:"usage"`

	Failures        []Failure `json:"failures,omitempty"`         // the first failed, errored and unscored episodes
	FailuresOmitted int       `json:"failures_omitted,omitempty"` // beyond Config.MaxFailures
	Warnings        []string  `json:"warnings,omitempty"`
	BudgetExhausted bool      `json:"budget_exhausted,omitempty"`

	samples []SampleResult // per-sample outcomes, for comparisons; not marshalled
}

// SampleResult is one sample's outcomes over its epochs in a run.
type SampleResult struct {
	ID       string
	Tags     map[string]string
	Passed   int
	Failed   int
	Errored  int
	Unscored int
	ScoreSum float64 // sum of the scores of scored (passed or failed) episodes
}

// Scored is the number of passed and failed episodes.
func (s SampleResult) Scored() int { return s.Passed + s.Failed }

// PassRate is Passed / Scored, NaN when nothing was scored.
func (s SampleResult) PassRate() float64 {
	if s.Scored() == 0 {
		return math.NaN()
	}
	return float64(s.Passed) / float64(s.Scored())
}

// SampleResults returns the per-sample outcomes the report was computed
// from, in first-record order (dataset order for a run), for paired
// comparisons. A report decoded from JSON has none.
func (r *Report) SampleResults() []SampleResult { return r.samples }

// KValue is a metric at k tries.
type KValue struct {
	K     int     `json:"k"`
	Value float64 `json:"value"`
}

// TagBreakdown is the report split by the values of one tag.
type TagBreakdown struct {
	Tag    string  `json:"tag"`
	Groups []Group `json:"groups"`
}

// Group is the part of a run whose samples share a tag value.
type Group struct {
	Value    string         `json:"value"`
	Samples  int            `json:"samples"`
	Episodes int            `json:"episodes"`
	Passed   int            `json:"passed"`
	Failed   int            `json:"failed"`
	Errored  int            `json:"errored"`
	Unscored int            `json:"unscored"`
	PassRate float64        `json:"pass_rate"`
	Interval stats.Interval `json:"interval"`
}

// Latency summarises episode durations (harness and judge, last attempt).
type Latency struct {
	P50MS float64 `json:"p50_ms"`
	P95MS float64 `json:"p95_ms"`
	MaxMS float64 `json:"max_ms"`
}

// Failure is one episode that did not pass.
type Failure struct {
	SampleID  string         `json:"sample_id"`
	Epoch     int            `json:"epoch"`
	Attempt   int            `json:"attempt"`
	Status    sink.Status    `json:"status"`
	ErrorKind sink.ErrorKind `json:"error_kind,omitempty"`
	Reason    string         `json:"reason"`
	Trace     string         `json:"trace,omitempty"`
}

// ReportOptions tune how a report is computed from records.
type ReportOptions struct {
	Level       float64 // confidence level; default 0.95
	MaxFailures int     // failures listed; default 100
	Resamples   int     // cluster bootstrap resamples; default 1000, negative for none
	Seed        uint64  // bootstrap seed
}

func (o ReportOptions) withDefaults() ReportOptions {
	if o.Level <= 0 || o.Level >= 1 {
		o.Level = 0.95
	}
	if o.MaxFailures == 0 {
		o.MaxFailures = 100
	}
	if o.Resamples == 0 {
		o.Resamples = 1000
	}
	return o
}

// ReportFromRecords builds the report of the records a sequence yields, for
// example jsonl.Records(path): the same numbers the run printed. An error
// the sequence yields ends it and is returned, except a torn tail, which is
// noted in the report's warnings (the records before it are committed).
func ReportFromRecords(records iter.Seq2[sink.Record, error], opts ReportOptions) (*Report, error) {
	a := newAggregator(opts)
	for r, err := range records {
		if err != nil {
			if isTornTail(err) {
				a.warnings = append(a.warnings, err.Error())
				break
			}
			return nil, err
		}
		a.add(&r)
	}
	return a.report(), nil
}

func isTornTail(err error) bool {
	var torn *jsonl.TornTailError
	return errors.As(err, &torn)
}

// aggregator folds records into a report incrementally: memory grows with
// the number of samples, never with episodes × output size.
type aggregator struct {
	opts    ReportOptions
	eval    string
	runID   string
	index   map[string]int
	samples []sampleStats
	// IDs and tags by index: from the records (ids, tags), or from the
	// engine's dataset (meta), which saves a copy per sample.
	ids        []string
	tags       []map[string]string
	meta       func(i int) (string, map[string]string)
	maxEpoch   int
	counts     [4]int // pass, fail, error, unscored
	notSampled int
	weighted   bool
	scoreSum   float64
	latency    histogram
	usage      harness.Usage
	failures   []Failure
	omitted    int
	warnings   []string
}

// sampleStats is kept per sample for the whole run: 40 bytes, since a
// million-sample run keeps a million of them. A sample's ID and tags come
// from aggregator.meta.
type sampleStats struct {
	scoreSum                     float64
	pass, fail, errored, unscore int32
	wPass, wSum                  float64 // weighted passes and weights of scored episodes
}

func (s *sampleStats) records() int { return int(s.pass + s.fail + s.errored + s.unscore) }

// sampleMeta returns the ID and tags of the sample at index i.
func (a *aggregator) sampleMeta(i int) (string, map[string]string) {
	if a.meta != nil {
		return a.meta(i)
	}
	return a.ids[i], a.tags[i]
}

func newAggregator(opts ReportOptions) *aggregator {
	return &aggregator{opts: opts.withDefaults(), index: map[string]int{}}
}

func (a *aggregator) add(r *sink.Record) {
	i, ok := a.index[r.SampleID]
	if !ok {
		i = len(a.samples)
		a.index[r.SampleID] = i
		a.samples = append(a.samples, sampleStats{})
		a.ids = append(a.ids, r.SampleID)
		a.tags = append(a.tags, r.Tags)
	}
	a.addAt(i, r)
}

// addAt adds a record of the sample at index i, for callers (the engine)
// that know the index and need not hash the sample ID.
func (a *aggregator) addAt(i int, r *sink.Record) {
	if a.eval == "" {
		a.eval, a.runID = r.Eval, r.RunID
	}
	s := &a.samples[i]
	a.maxEpoch = max(a.maxEpoch, r.Epoch)
	w := r.EffectiveWeight()
	if r.Weight != 0 && r.Weight != 1 {
		a.weighted = true
	}
	switch r.Status {
	case sink.Pass:
		a.counts[0]++
		s.pass++
		s.wPass += w
		s.wSum += w
	case sink.Fail:
		a.counts[1]++
		s.fail++
		s.wSum += w
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
	a.latency.add(r.DurationMS)
	a.usage = a.usage.Add(harness.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostUSD: r.CostUSD})
	if r.Status != sink.Pass && r.ErrorKind != sink.KindNotSampled {
		if len(a.failures) < a.opts.MaxFailures {
			reason := r.Reason
			if r.Error != "" {
				reason = firstLine(r.Error)
			}
			a.failures = append(a.failures, Failure{r.SampleID, r.Epoch, r.Attempt, r.Status, r.ErrorKind, reason, r.Trace})
		} else {
			a.omitted++
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func (a *aggregator) report() *Report {
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
		Weighted: a.weighted, NotSampled: a.notSampled,
		Latency:  a.latency.summary(),
		Usage:    a.usage,
		Failures: a.failures, FailuresOmitted: a.omitted,
		Warnings: a.warnings,
	}
	if recorded == 0 {
		r.Epochs = 0
	}
	r.Episodes = r.Passed + r.Failed + r.Errored + r.Unscored + r.NotSampled
	if scored := r.Passed + r.Failed; scored > 0 {
		r.MeanScore = a.scoreSum / float64(scored)
	}
	all := make([]int, len(a.samples))
	for i := range all {
		all[i] = i
	}
	r.PassRate, r.Interval = a.passRate(all, r.Epochs)
	if r.Epochs > 1 && a.opts.Resamples > 0 {
		sums, weights := a.clusters(all)
		iv := stats.BootstrapClusters(sums, weights, a.opts.Resamples, a.opts.Level, a.opts.Seed)
		r.Bootstrap = &iv
	}
	for k := 1; k <= r.Epochs; k++ {
		at, hat, ok := a.passAtK(k)
		if ok {
			r.PassAtK = append(r.PassAtK, KValue{k, at})
			r.PassHatK = append(r.PassHatK, KValue{k, hat})
		}
	}
	r.ByTag = a.byTag(r.Epochs)
	r.samples = make([]SampleResult, 0, recorded)
	for i := range a.samples {
		s := &a.samples[i]
		if s.records() > 0 {
			id, tags := a.sampleMeta(i)
			r.samples = append(r.samples, SampleResult{ID: id, Tags: tags, Passed: int(s.pass), Failed: int(s.fail),
				Errored: int(s.errored), Unscored: int(s.unscore), ScoreSum: s.scoreSum})
		}
	}
	return r
}

// passRate is the (weighted) pass rate over the given samples with its
// interval: Wilson over episodes when each sample ran once; cluster-robust
// by sample when samples ran several epochs, since epochs of one sample are
// correlated and treating them as independent overstates confidence.
func (a *aggregator) passRate(idx []int, epochs int) (float64, stats.Interval) {
	sums, weights := a.clusters(idx)
	var pass, total float64
	for i := range sums {
		pass += sums[i]
		total += weights[i]
	}
	if total == 0 {
		return 0, stats.Interval{Lo: 0, Hi: 1, Level: a.opts.Level, Method: "none: no scored episodes"}
	}
	rate := pass / total
	if epochs <= 1 && !a.weighted {
		return rate, stats.Wilson(int(math.Round(pass)), int(math.Round(total)), a.opts.Level)
	}
	mean, se := stats.ClusteredMean(sums, weights, true)
	z := distuv.UnitNormal.Quantile(1 - (1-a.opts.Level)/2)
	return mean, stats.Interval{Lo: max(0, mean-z*se), Hi: min(1, mean+z*se), Level: a.opts.Level, Method: "cluster-robust (by sample)"}
}

// clusters returns per-sample weighted passes and weights of scored episodes.
func (a *aggregator) clusters(idx []int) (sums, weights []float64) {
	sums = make([]float64, 0, len(idx))
	weights = make([]float64, 0, len(idx))
	for _, i := range idx {
		s := &a.samples[i]
		if s.wSum > 0 {
			sums = append(sums, s.wPass)
			weights = append(weights, s.wSum)
		}
	}
	return sums, weights
}

// passAtK averages the unbiased per-sample estimators over samples scored
// at least k times.
func (a *aggregator) passAtK(k int) (at, hat float64, ok bool) {
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

func (a *aggregator) byTag(epochs int) []TagBreakdown {
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
	for _, tag := range sortedKeys(groups) {
		tb := TagBreakdown{Tag: tag}
		for _, value := range sortedKeys(groups[tag]) {
			idx := groups[tag][value]
			g := Group{Value: value, Samples: len(idx)}
			for _, i := range idx {
				s := &a.samples[i]
				g.Passed += int(s.pass)
				g.Failed += int(s.fail)
				g.Errored += int(s.errored)
				g.Unscored += int(s.unscore)
			}
			g.Episodes = g.Passed + g.Failed + g.Errored + g.Unscored
			g.PassRate, g.Interval = a.passRate(idx, epochs)
			tb.Groups = append(tb.Groups, g)
		}
		out = append(out, tb)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
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

// WriteText prints the report as a readable table.
func (r *Report) WriteText(w io.Writer) error {
	return r.write(w, false)
}

// WriteMarkdown prints the report as Markdown, for CI job summaries.
func (r *Report) WriteMarkdown(w io.Writer) error {
	return r.write(w, true)
}

// String returns the text form.
func (r *Report) String() string {
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}

func (r *Report) write(out io.Writer, md bool) error {
	t := &table{md: md}
	row, header, title := t.row, t.header, t.title
	if md {
		t.printf("## eval %s (run %s)\n\n", r.Eval, r.RunID)
	} else {
		t.printf("eval %s  run %s\n", r.Eval, r.RunID)
	}
	header("metric", "value")
	row("samples × epochs", fmt.Sprintf("%d × %d = %d episodes", r.Samples, r.Epochs, r.Episodes))
	row("passed / failed", fmt.Sprintf("%d / %d", r.Passed, r.Failed))
	row("errored / unscored", fmt.Sprintf("%d / %d (excluded from the pass rate)", r.Errored, r.Unscored))
	if r.NotSampled > 0 {
		row("not sampled", fmt.Sprintf("%d (asymmetric sampling: weight 0 in the weighted pass rate)", r.NotSampled))
	}
	if r.Cancelled > 0 {
		row("cancelled", fmt.Sprintf("%d (not recorded; they run on resume)", r.Cancelled))
	}
	rate := "n/a: no scored episodes"
	if r.Passed+r.Failed > 0 {
		rate = fmt.Sprintf("%s  %.0f%% CI [%s, %s] %s", pct(r.PassRate), r.Interval.Level*100, pct(r.Interval.Lo), pct(r.Interval.Hi), r.Interval.Method)
		if r.Weighted {
			rate += ", inverse-probability weighted"
		}
	}
	row("pass rate", rate)
	if r.Bootstrap != nil {
		row("bootstrap CI", fmt.Sprintf("[%s, %s] (clusters resampled)", pct(r.Bootstrap.Lo), pct(r.Bootstrap.Hi)))
	}
	if len(r.PassAtK) > 1 {
		var at, hat []string
		for i := range r.PassAtK {
			at = append(at, fmt.Sprintf("@%d %s", r.PassAtK[i].K, pct(r.PassAtK[i].Value)))
			hat = append(hat, fmt.Sprintf("^%d %s", r.PassHatK[i].K, pct(r.PassHatK[i].Value)))
		}
		row("pass@k", strings.Join(at, "  "))
		row("pass^k", strings.Join(hat, "  "))
	}
	row("latency", fmt.Sprintf("p50 %s  p95 %s  max %s", ms(r.Latency.P50MS), ms(r.Latency.P95MS), ms(r.Latency.MaxMS)))
	if r.Usage != (harness.Usage{}) {
		row("usage", fmt.Sprintf("%d input + %d output tokens, $%.4f", r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.CostUSD))
	}
	if r.Wall > 0 {
		row("wall time", r.Wall.Round(time.Millisecond).String())
	}
	if r.BudgetExhausted {
		row("budget", "exhausted: scheduling stopped early")
	}
	for _, t := range r.ByTag {
		title("by " + t.Tag)
		header(t.Tag, "samples", "pass", "fail", "error", "unscored", "pass rate", "CI")
		for _, g := range t.Groups {
			row(g.Value, fmt.Sprint(g.Samples), fmt.Sprint(g.Passed), fmt.Sprint(g.Failed), fmt.Sprint(g.Errored), fmt.Sprint(g.Unscored),
				pct(g.PassRate), fmt.Sprintf("[%s, %s]", pct(g.Interval.Lo), pct(g.Interval.Hi)))
		}
	}
	if len(r.Failures) > 0 {
		title(fmt.Sprintf("failures (%d listed, %d more)", len(r.Failures), r.FailuresOmitted))
		header("sample", "epoch", "status", "reason", "trace")
		for _, f := range r.Failures {
			status := string(f.Status)
			if f.ErrorKind != "" {
				status += "/" + string(f.ErrorKind)
			}
			row(f.SampleID, fmt.Sprint(f.Epoch), status, clip(f.Reason, 100), f.Trace)
		}
	}
	for _, w := range r.Warnings {
		t.printf("\nwarning: %s\n", w)
	}
	return t.writeTo(out)
}

func pct(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

// ms prints a duration given in milliseconds to about three digits.
func ms(f float64) string {
	d := time.Duration(f * float64(time.Millisecond))
	switch {
	case d >= 10*time.Second:
		d = d.Round(100 * time.Millisecond)
	case d >= time.Second:
		d = d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		d = d.Round(10 * time.Microsecond)
	}
	return d.String()
}

// clip fits s on one table line: white space folded, at most n bytes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return s[:n] + "…"
	}
	return s
}
