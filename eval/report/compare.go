package report

import (
	"cmp"
	"fmt"
	"github.com/proctor-evals/proctor/eval/manifest"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/internal/natural"
	"github.com/proctor-evals/proctor/stats"
)

// MethodPairedT names the inference [Compare] uses for its differences.
const MethodPairedT = "paired t over samples"

// CompareOptions tune a [Compare]. The zero value is valid.
type CompareOptions struct {
	// Level is the confidence level of the intervals; default 0.95.
	Level float64
	// Margin is the non-inferiority margin, as a pass-rate difference
	// (0.02 = 2 points): the head is non-inferior when the interval's lower
	// bound is above −Margin. Default 0, which asks for evidence that the
	// head is at least as good; a gate usually wants a small positive
	// margin.
	Margin float64
	// MaxFlips bounds the flipped samples listed; default 50, negative for
	// none. Their counts are always complete.
	MaxFlips int
	// SameAgent says the two runs are of one agent (nothing changed but
	// chance): the noise floor then pools each sample's outcomes across
	// both runs, as epochs of one agent, so that two runs of one epoch
	// measure it too (Comparison.SameAgent). Reports whose manifests name
	// the same versions, a harness version among them, are taken as such
	// without it.
	SameAgent bool
}

func (p *CompareOptions) withDefaults() CompareOptions {
	var o CompareOptions
	if p != nil {
		o = *p
	}
	if o.Level <= 0 || o.Level >= 1 {
		o.Level = 0.95
	}
	if o.MaxFlips == 0 {
		o.MaxFlips = 50
	}
	if o.MaxFlips < 0 {
		o.MaxFlips = 0
	}
	return o
}

// Comparison is a paired comparison of a base run and a head run of an
// eval over the samples both runs scored. Differences are head − base:
// negative means the head is worse.
//
// Each sample is one paired observation: its pass rate (or mean score)
// over its scored epochs in each run. Epochs of one sample are correlated,
// so averaging them within the sample first treats them as a cluster, and
// pairing by sample removes the between-sample variance both runs share
// (a hard sample is hard for both). Comparing the two runs' pass rates as
// independent proportions would ignore both, and is wrong here.
//
// It marshals to JSON; statistics that are undefined (NaN, e.g. the
// interval of fewer than two pairs) are written as null.
type Comparison struct {
	BaseEval   string `json:"base_eval"`
	BaseRunID  string `json:"base_run_id"`
	BaseEpochs int    `json:"base_epochs"`
	HeadEval   string `json:"head_eval"`
	HeadRunID  string `json:"head_run_id"`
	HeadEpochs int    `json:"head_epochs"`
	// BaseVariant and HeadVariant name the variants compared when the
	// reports are of variants of a log ([Report.VariantReport]).
	BaseVariant string `json:"base_variant,omitempty"`
	HeadVariant string `json:"head_variant,omitempty"`

	Level  float64 `json:"level"`
	Margin float64 `json:"margin"`
	Method string  `json:"method"` // MethodPairedT

	// Paired is the number of samples scored (passed or failed at least
	// once) in both runs: the N of every statistic below.
	Paired int `json:"paired"`
	// OnlyBase lists the samples scored in the base but missing from the
	// head or not scored there (only errored or unscored episodes), in the
	// base's order; OnlyHead the reverse, in the head's order. They are
	// left out of every statistic, and Warnings says so.
	OnlyBase []string `json:"only_base,omitempty"`
	OnlyHead []string `json:"only_head,omitempty"`

	// PassRate is the paired difference of the per-sample pass rates
	// (passed / scored epochs): [stats.Paired] with N = Paired.
	PassRate stats.Difference `json:"pass_rate"`
	// Score is the paired difference of the per-sample mean scores.
	Score stats.Difference `json:"score"`

	// McNemarP is the exact McNemar p-value ([stats.McNemar]) of the
	// discordant samples. A sample passes in a run when its pass rate there
	// is at least 0.5 — with one epoch, when it passed. Regressions counts the
	// samples that pass in the base and not in the head,
	// Improvements the reverse.
	McNemarP     float64 `json:"mcnemar_p"`
	Regressions  int     `json:"base_only"`
	Improvements int     `json:"head_only"`
	// Flips lists the discordant samples: regressions first, then
	// improvements, each by decreasing change of pass rate, at most
	// CompareOptions.MaxFlips of them; FlipsOmitted counts the rest.
	Flips        []Flip `json:"flips,omitempty"`
	FlipsOmitted int    `json:"flips_omitted,omitempty"`

	// ByTag is the pass-rate difference within each (tag, value) group of
	// the paired samples, by tag then value, with Holm-adjusted p-values
	// across all the groups.
	ByTag []TagDifference `json:"by_tag,omitempty"`

	// Regressed reports that the head is significantly worse: the upper
	// bound PassRate.Hi of the interval is below 0.
	Regressed bool `json:"regressed"`
	// NonInferior reports that the head is not worse than the base by the
	// margin or more: PassRate.Lo > −Margin. When every paired difference is
	// zero (PassRate.Mean = 0, SE = 0, e.g. identical runs) the head is
	// non-inferior whatever the margin. Both are false when the interval is
	// undefined (fewer than two paired samples).
	NonInferior bool `json:"non_inferior"`
	// WorstCase is the difference with the head's errored and unscored
	// episodes counted as failures and the base's as passes; nil when
	// neither run has any. Gates decide on it ([Comparison.Decision]).
	WorstCase *WorstDifference `json:"worst_case,omitempty"`

	// NoiseFloor is the run-to-run noise of PassRate.Mean: how far apart
	// two runs of one agent, with these runs' epochs, land by chance, from
	// the spread of each paired sample's outcomes across epochs in both
	// runs (stats.NoiseFloor; docs/statistics.md). Nil when no sample was
	// scored twice: runs of one epoch measure it only as runs of one
	// agent (SameAgent).
	NoiseFloor *stats.NoiseFloor `json:"noise_floor,omitempty"`
	// SameAgent is CompareOptions.SameAgent, or set when both reports
	// name one eval (and variant) under the same Versions with a harness
	// version: the noise floor then pools each paired sample's outcomes
	// across both runs, not only across each run's epochs. A difference
	// outside it says the runs were not of one agent after all (or not
	// in one environment).
	SameAgent bool `json:"same_agent,omitempty"`

	// Warnings describe what may bias the comparison: samples on one side
	// only, different evals, epochs, or error rates, torn logs.
	Warnings []string `json:"warnings,omitempty"`
}

// Flip is a sample that passes in one run and not in the other.
type Flip struct {
	SampleID   string  `json:"sample_id"`
	Regression bool    `json:"regression"` // pass in base, fail in head
	Base       float64 `json:"base"`       // the sample's pass rate in the base
	Head       float64 `json:"head"`       // and in the head
}

// TagDifference is the paired pass-rate difference within the samples that
// share a tag value.
type TagDifference struct {
	Tag   string `json:"tag"`
	Value string `json:"value"`
	// PassRate is [stats.Paired] over the group's paired samples; its P
	// is the group's paired-t p-value, unadjusted.
	PassRate stats.Difference `json:"pass_rate"`
	// HolmP is PassRate.P adjusted by [stats.Holm] across all the groups
	// of ByTag (NaN when P is).
	HolmP float64 `json:"holm_p"`
}

// Compare pairs the samples of two runs of an eval by sample ID and
// compares them; see [Comparison]. It reads the reports' SampleResults, so
// it works on reports from Run and from FromRecords, not on reports
// decoded from JSON (which have none: a warning says so).
func Compare(base, head *Report, opts *CompareOptions) *Comparison {
	o := opts.withDefaults()
	opts = &o
	c := &Comparison{
		BaseEval: base.Eval, BaseRunID: base.RunID, BaseEpochs: base.Epochs,
		HeadEval: head.Eval, HeadRunID: head.RunID, HeadEpochs: head.Epochs,
		BaseVariant: base.Variant, HeadVariant: head.Variant,
		Level: opts.Level, Margin: opts.Margin, Method: MethodPairedT,
		SameAgent: opts.SameAgent || sameAgent(base, head),
	}
	bs, hs := base.SampleResults(), head.SampleResults()
	if bs == nil && base.Episodes > 0 {
		c.warnf("the base report has no per-sample results (a report decoded from JSON has none): compare reports from Run or FromRecords")
	}
	if hs == nil && head.Episodes > 0 {
		c.warnf("the head report has no per-sample results (a report decoded from JSON has none): compare reports from Run or FromRecords")
	}
	for _, side := range []struct {
		name string
		r    *Report
	}{{"base", base}, {"head", head}} {
		if side.r.Leaderboard != nil {
			c.warnf("the %s is a log of %d variants (%s), pooled here, which describes no agent: compare one variant of it (Report.VariantReport; proctor compare LOG#VARIANT, or -variants A,B)",
				side.name, len(side.r.Leaderboard.Variants), strings.Join(side.r.VariantNames(), ", "))
		}
	}
	if base.Eval != head.Eval {
		c.warnf("comparing different evals: base %q, head %q", base.Eval, head.Eval)
	}
	if base.Epochs != head.Epochs && base.Epochs > 0 && head.Epochs > 0 {
		c.warnf("different epochs: base %d, head %d: per-sample pass rates are averaged over different numbers of tries", base.Epochs, head.Epochs)
	}
	if d := manifest.ResourcesDiff(&manifest.Manifest{Resources: base.Resources, ImageDigests: base.ImageDigests},
		&manifest.Manifest{Resources: head.Resources, ImageDigests: head.ImageDigests}); d != "" {
		c.warnf("the runs' environments differ: %s: a possible cause of any difference, not the agent", d)
	} else if d := episodeResourcesDiff(base, head); d != "" {
		c.warnf("the runs' episodes ran in other environments: %s: a possible cause of any difference, not the agent", d)
	}

	baseIndex, headIndex := indexByID(bs), indexByID(hs)
	var pairs []pair
	neither := 0
	for i := range bs {
		b := &bs[i]
		j, ok := headIndex[b.ID]
		headScored := ok && hs[j].Scored() > 0
		switch {
		case b.Scored() > 0 && headScored:
			pairs = append(pairs, pair{b, &hs[j]})
		case b.Scored() > 0:
			c.OnlyBase = append(c.OnlyBase, b.ID)
		case !headScored:
			neither++
		}
	}
	for i := range hs {
		h := &hs[i]
		j, ok := baseIndex[h.ID]
		baseScored := ok && bs[j].Scored() > 0
		switch {
		case h.Scored() > 0 && !baseScored:
			c.OnlyHead = append(c.OnlyHead, h.ID)
		case h.Scored() == 0 && !ok:
			neither++
		}
	}
	// A report read from a log lists samples in the order episodes finished:
	// sort, so that comparing the same two runs always gives the same
	// lists and the same sums.
	slices.SortFunc(pairs, func(x, y pair) int { return natural.Compare(x.base.ID, y.base.ID) })
	slices.SortFunc(c.OnlyBase, natural.Compare)
	slices.SortFunc(c.OnlyHead, natural.Compare)
	c.Paired = len(pairs)
	c.warnOneSided("base", "head", c.OnlyBase)
	c.warnOneSided("head", "base", c.OnlyHead)
	if neither > 0 {
		c.warnf("%d samples scored in neither run", neither)
	}
	c.warnRate("errored", base.Errored, base.Episodes, head.Errored, head.Episodes)
	c.warnRate("unscored", base.Unscored, base.Episodes, head.Unscored, head.Episodes)
	for _, w := range base.Warnings {
		c.warnf("base: %s", w)
	}
	for _, w := range head.Warnings {
		c.warnf("head: %s", w)
	}
	if c.Paired == 0 && (len(bs) > 0 || len(hs) > 0) {
		c.warnf("no sample was scored in both runs: nothing to compare")
	}

	rates, scores := pairedValues(pairs)
	c.PassRate = stats.Paired(rates[0], rates[1], opts.Level)
	c.NoiseFloor = noiseOfPairs(pairs, opts.Level, c.SameAgent)
	c.Score = stats.Paired(scores[0], scores[1], opts.Level)
	c.Regressed = c.PassRate.Hi < 0
	c.NonInferior = c.PassRate.Lo > -opts.Margin || (c.PassRate.Mean == 0 && c.PassRate.SE == 0)
	c.worstCase(bs, hs, headIndex, opts.Level)

	var regressions, improvements []Flip
	for i, p := range pairs {
		b, h := rates[0][i], rates[1][i]
		switch bp, hp := b >= 0.5, h >= 0.5; {
		case bp && !hp:
			regressions = append(regressions, Flip{SampleID: p.base.ID, Regression: true, Base: b, Head: h})
		case !bp && hp:
			improvements = append(improvements, Flip{SampleID: p.base.ID, Base: b, Head: h})
		}
	}
	c.Regressions, c.Improvements = len(regressions), len(improvements)
	c.McNemarP = stats.McNemar(c.Regressions, c.Improvements)
	// Largest changes first; ties in natural order of sample ID, so that
	// the list does not depend on the order episodes finished in.
	byChange := func(x, y Flip) int {
		if c := cmp.Compare(math.Abs(y.Head-y.Base), math.Abs(x.Head-x.Base)); c != 0 {
			return c
		}
		return natural.Compare(x.SampleID, y.SampleID)
	}
	slices.SortFunc(regressions, byChange)
	slices.SortFunc(improvements, byChange)
	flips := append(regressions, improvements...)
	if len(flips) > opts.MaxFlips {
		c.FlipsOmitted = len(flips) - opts.MaxFlips
		flips = flips[:opts.MaxFlips]
	}
	c.Flips = flips
	c.ByTag = byTagDifferences(pairs, rates, opts.Level)
	return c
}

func indexByID(rs []SampleResult) map[string]int {
	m := make(map[string]int, len(rs))
	for i := range rs {
		m[rs[i].ID] = i
	}
	return m
}

type pair struct{ base, head *SampleResult }

// sameAgent reports whether two runs' manifests say they are of one
// agent: one eval and variant, the same versions, a harness version set.
func sameAgent(base, head *Report) bool {
	return base.Eval == head.Eval && base.Variant == head.Variant && base.Versions.Harness != "" && base.Versions == head.Versions
}

// noiseOfPairs is the noise floor of the pairs' pass-rate difference, the
// within-sample variance pooled over both runs: each run's spread across
// its epochs, or, for runs of one agent (sameAgent), each sample's spread
// across the epochs of both runs together.
func noiseOfPairs(pairs []pair, level float64, sameAgent bool) *stats.NoiseFloor {
	var passes, scored []int
	var epochs [2]float64
	for _, p := range pairs {
		if sameAgent {
			passes = append(passes, p.base.Passed+p.head.Passed)
			scored = append(scored, p.base.Scored()+p.head.Scored())
		} else {
			passes = append(passes, p.base.Passed, p.head.Passed)
			scored = append(scored, p.base.Scored(), p.head.Scored())
		}
		epochs[0] += float64(p.base.Scored())
		epochs[1] += float64(p.head.Scored())
	}
	v, dof := stats.WithinVariance(passes, scored)
	if dof == 0 {
		return nil
	}
	n := len(pairs)
	nf := stats.Noise(v, n, epochs[0]/float64(n), epochs[1]/float64(n), level)
	return &nf
}

// pairedValues returns the per-sample pass rates and mean scores of the
// pairs, base in [0] and head in [1].
func pairedValues(pairs []pair) (rates, scores [2][]float64) {
	for k := range 2 {
		rates[k] = make([]float64, len(pairs))
		scores[k] = make([]float64, len(pairs))
	}
	for i, p := range pairs {
		for k, s := range [2]*SampleResult{p.base, p.head} {
			rates[k][i] = s.PassRate()
			scores[k][i] = s.ScoreSum / float64(s.Scored())
		}
	}
	return rates, scores
}

func byTagDifferences(pairs []pair, rates [2][]float64, level float64) []TagDifference {
	groups := map[string]map[string][]int{} // tag → value → pair indexes
	for i, p := range pairs {
		tags := p.base.Tags
		if tags == nil {
			tags = p.head.Tags
		}
		for k, v := range tags {
			if groups[k] == nil {
				groups[k] = map[string][]int{}
			}
			groups[k][v] = append(groups[k][v], i)
		}
	}
	var out []TagDifference
	var ps []float64
	for _, tag := range slices.Sorted(maps.Keys(groups)) {
		for _, value := range slices.Sorted(maps.Keys(groups[tag])) {
			idx := groups[tag][value]
			a, b := make([]float64, len(idx)), make([]float64, len(idx))
			for j, i := range idx {
				a[j], b[j] = rates[0][i], rates[1][i]
			}
			d := stats.Paired(a, b, level)
			out = append(out, TagDifference{Tag: tag, Value: value, PassRate: d})
			ps = append(ps, d.P)
		}
	}
	for i, p := range stats.Holm(ps) {
		out[i].HolmP = p
	}
	return out
}

func (c *Comparison) warnf(format string, args ...any) {
	c.Warnings = append(c.Warnings, fmt.Sprintf(format, args...))
}

func (c *Comparison) warnOneSided(side, other string, ids []string) {
	if len(ids) == 0 {
		return
	}
	const show = 10
	list := strings.Join(ids[:min(show, len(ids))], ", ")
	if len(ids) > show {
		list += fmt.Sprintf(", … (%d more)", len(ids)-show)
	}
	c.warnf("%d samples scored in the %s only (missing from the %s, or only errored or unscored there), left out of the comparison: %s",
		len(ids), side, other, list)
}

// warnRate warns when the fraction of episodes of a kind differs by more
// than 2 percentage points between the runs: excluded episodes (a flaky
// provider, retries exhausted on one side) shift which samples are
// compared, and can bias the difference.
func (c *Comparison) warnRate(kind string, nb, eb, nh, eh int) {
	rb, rh := frac(nb, eb), frac(nh, eh)
	if math.Abs(rb-rh) > 0.02 {
		c.warnf("%s episodes differ: base %d/%d (%s), head %d/%d (%s): the samples they leave out may bias the comparison",
			kind, nb, eb, pct(rb), nh, eh, pct(rh))
	}
}

func frac(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// CompareLogs compares the runs recorded in two JSONL logs: the report of
// each is FromLog(path, …), and a torn tail is a warning of the
// comparison.
func CompareLogs(basePath, headPath string, opts *CompareOptions) (*Comparison, error) {
	o := opts.withDefaults()
	ro := &Options{Level: o.Level, Resamples: -1}
	base, err := FromLog(basePath, ro)
	if err != nil {
		return nil, fmt.Errorf("report: compare: base: %w", err)
	}
	head, err := FromLog(headPath, ro)
	if err != nil {
		return nil, fmt.Errorf("report: compare: head: %w", err)
	}
	return Compare(base, head, opts), nil
}

// episodeResourcesDiff says how the sets of sandbox resources the two
// runs' records name differ (an OOM retry with more memory, a worker
// joined with other resources), or "" when they are the same or either
// run's records name none.
func episodeResourcesDiff(base, head *Report) string {
	if len(base.EpisodeResources) == 0 || len(head.EpisodeResources) == 0 || slices.Equal(base.EpisodeResourceSet(), head.EpisodeResourceSet()) {
		return ""
	}
	list := func(rc []ResourcesCount) string {
		parts := make([]string, len(rc))
		for i, c := range rc {
			parts[i] = fmt.Sprintf("%s (%d episode%s)", c.Resources, c.Episodes, map[bool]string{true: "s"}[c.Episodes != 1])
		}
		return "[" + strings.Join(parts, "; ") + "]"
	}
	return "sandbox resources of the base's episodes " + list(base.EpisodeResources) + ", of the head's " + list(head.EpisodeResources)
}
