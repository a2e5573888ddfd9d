// Package report computes, prints and compares the standard summary of an
// evaluation's records: pass rates with confidence intervals, pass@k,
// breakdowns by tag, latency, usage and failures ([Report]), and paired
// comparisons of two runs ([Compare]).
//
// A report is folded incrementally from records by an [Aggregator], whose
// memory grows with the number of samples, never with episodes × output
// size; aggregators merge, so shards and a coordinator fold their parts
// into one report. [FromRecords] builds the report of a log; the engine in
// package eval builds the same one as it runs. The package does not link
// the engine: a tool that only reads logs imports this.
package report

import (
	"math"
	"sync"
	"time"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/stats"
	"github.com/proctor-evals/proctor/usage"
)

// Report is the standard summary of a run. Every eval reports in this shape,
// so that results compare across a suite and across time. It prints as a
// text table (WriteText, WriteMarkdown) and marshals to JSON, with
// undefined statistics (NaN, ±Inf) as null.
type Report struct {
	Eval  string `json:"eval"`
	RunID string `json:"run_id"`
	// Variant names the variant a report is of ([Report.VariantReport]); ""
	// for the report of a whole log.
	Variant   string        `json:"variant,omitempty"`
	StartedAt time.Time     `json:"started_at,omitzero"`
	Wall      time.Duration `json:"wall_ns,omitempty"`

	// Resources and ImageDigests are the run's sandbox resources and what
	// their images resolved to, from its manifest (manifest.Manifest):
	// Compare warns when two runs' differ. Empty when not on record.
	Resources    []string `json:"resources,omitempty"`
	ImageDigests []string `json:"image_digests,omitempty"`
	// Versions are the versions of the eval's components its manifest
	// names (a variant's report: with its harness version); empty when
	// unversioned or not on record. Two runs of one eval, under the same
	// versions with a harness version set, are of one agent (Compare).
	Versions manifest.Versions `json:"versions,omitzero"`
	// EpisodeResources counts the episodes by the sandbox resources their
	// records name (sink.Record.Resources), by resources; nil when no
	// record names any. Unlike Resources, what the run asked for, it shows
	// an episode retried with more memory after an OOM kill, or run on a
	// cluster worker joined with other resources: Compare warns when two
	// runs' sets differ.
	EpisodeResources []ResourcesCount `json:"episode_resources,omitempty"`

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
	// Reused counts episodes whose result an earlier run produced and this
	// run reused unchanged (records with reused_from); Rejudged those whose
	// earlier output was judged again (records with parent_run_id and no
	// reused_from).
	Reused   int `json:"reused,omitempty"`
	Rejudged int `json:"rejudged,omitempty"`
	// NoiseFloor is the run-to-run noise of the pass rate: two runs of
	// this agent with as many epochs differ by less than its HalfWidth
	// with probability Level (stats.NoiseFloor; docs/statistics.md). Nil
	// with one epoch, which does not measure it.
	NoiseFloor *stats.NoiseFloor `json:"noise_floor,omitempty"`
	// Broken lists the samples whose oracle failed (Options.Broken), by
	// ID: their BrokenEpisodes are left out of every count, rate and
	// interval above, and the headline says so.
	Broken         []string `json:"broken,omitempty"`
	BrokenEpisodes int      `json:"broken_episodes,omitempty"`
	failOnBroken   bool     // Options.FailOnBroken
	// Excluded counts records of samples that are not in the dataset (a
	// resumed log of a dataset that lost samples): they stay in the log
	// and are in none of the counts above.
	Excluded int `json:"excluded,omitempty"`

	// PassRate is passed / (passed + failed): error and unscored episodes
	// are excluded, and counted above. With sampled verdicts it is the
	// inverse-probability-weighted rate (Weighted).
	PassRate float64        `json:"pass_rate"`
	Interval stats.Interval `json:"interval"`
	// WorstCase is the range PassRate lies in whatever the errored and
	// unscored episodes would have been; nil when there are none. Gates
	// decide on its lower bound ([Report.GateBound]).
	WorstCase *WorstCase `json:"worst_case,omitempty"`
	// ErrorSources counts the errored and unscored episodes by where they
	// came from (stage, judge), the most frequent first, each with its
	// first message: an unreachable grader reads as such.
	ErrorSources []ErrorSource `json:"error_sources,omitempty"`
	// JudgeStages counts each stage of the judge's calls and verdicts, by
	// path; empty for a judge without stages and for logs written before
	// records carried them.
	JudgeStages []JudgeStage `json:"judge_stages,omitempty"`
	// Bootstrap is a cluster bootstrap interval of PassRate, when there are
	// several epochs and at least two scored samples.
	Bootstrap *stats.Interval `json:"bootstrap,omitempty"`
	Weighted  bool            `json:"weighted,omitempty"`
	MeanScore float64         `json:"mean_score"`

	PassAtK  []KValue `json:"pass_at_k,omitempty"`  // unbiased pass@k, k = 1..Epochs
	PassHatK []KValue `json:"pass_hat_k,omitempty"` // pass^k: all k tries pass

	ByTag []TagBreakdown `json:"by_tag,omitempty"`

	Latency Latency     `json:"latency"`
	Usage   usage.Usage `json:"usage"`
	// ReusedUsage is the part of Usage that reused records carry: spent by
	// the earlier runs that produced them, not by this one.
	ReusedUsage usage.Usage `json:"reused_usage,omitzero"`
	// Replay counts the model calls the gateway answered from a call
	// store instead of the provider; nil when none. Replayed and Diverged
	// come from the records (calls_replayed, replay_diverged_at; reused
	// and rejudged records left out), so that a log's report has them;
	// Cached and Saved only from the run that served them.
	Replay *Replay `json:"replay,omitempty"`
	// JudgeUsage is the judge's part of Usage, from records that split
	// it (judge_* fields); SimulatorUsage a simulated user's
	// (simulator_* fields, conversations). The agent's is the rest.
	JudgeUsage     usage.Usage `json:"judge_usage,omitzero"`
	SimulatorUsage usage.Usage `json:"simulator_usage,omitzero"`
	// ByModel is Usage by role and model, for the models the harness and
	// the judge named; usage of unnamed models is in none.
	ByModel []ModelUsage `json:"by_model,omitempty"`

	Failures        []Failure `json:"failures,omitempty"`         // failed, errored and unscored episodes, the first by Failure.Compare
	FailuresOmitted int       `json:"failures_omitted,omitempty"` // beyond Options.MaxFailures
	Warnings        []string  `json:"warnings,omitempty"`
	BudgetExhausted bool      `json:"budget_exhausted,omitempty"`
	// Budget is the run's budgets, and which of them stopped it, when one
	// did (BudgetExhausted).
	Budget *Budget `json:"budget,omitempty"`
	// Planned is the episodes the run set out to record (its samples ×
	// epochs, of its shard) when it recorded fewer: a run stopped early
	// says how far it got. 0 otherwise.
	Planned int `json:"planned,omitempty"`
	// Sequential is what the sequential gate decided (Options.Sequential).
	Sequential *SequentialResult `json:"sequential,omitempty"`
	// Leaderboard ranks the variants of a log of variants (records with a
	// variant, docs/comparing-agents.md); nil for any other. Variants are
	// not pooled: such a report's PassRate, MeanScore and Interval are
	// undefined (NaN, null in JSON; Interval.Method is MethodByVariant),
	// its WorstCase, Bootstrap, pass@k, NoiseFloor, ByTag and Sequential
	// are nil, and each variant's are in its standing and in
	// [Report.VariantReport]. Its gates hold for each variant.
	Leaderboard *Leaderboard `json:"leaderboard,omitempty"`

	results *sampleResults // per-sample outcomes, for comparisons; not marshalled
}

// Budget is a run's budgets (Config.MaxCostUSD, MaxTokens; 0 for none)
// and the one that was spent: "cost" or "tokens".
type Budget struct {
	CostUSD float64 `json:"cost_usd,omitempty"`
	Tokens  int64   `json:"tokens,omitempty"`
	Spent   string  `json:"spent"`
}

// sampleResults are a report's per-sample outcomes, built when first asked
// for: the report of a million-sample run holds no million IDs and tag maps
// unless a comparison reads them.
type sampleResults struct {
	once  sync.Once
	build func() []SampleResult
	list  []SampleResult
}

// SampleResult is one sample's outcomes over its epochs in a run.
type SampleResult struct {
	ID       string
	Tags     map[string]string // shared by the samples of one tag set (FromLog): read, do not change
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
func (r *Report) SampleResults() []SampleResult {
	if r.results == nil {
		return nil
	}
	r.results.once.Do(func() {
		r.results.list, r.results.build = r.results.build(), nil
	})
	return r.results.list
}

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
	CostUSD  float64        `json:"cost_usd,omitempty"` // of the group's episodes, every attempt
}

// Latency summarises episode durations (harness and judge, last attempt).
type Latency struct {
	P50MS float64 `json:"p50_ms"`
	P95MS float64 `json:"p95_ms"`
	MaxMS float64 `json:"max_ms"`
}

// Failure is one episode that did not pass.
type Failure struct {
	SampleID   string         `json:"sample_id"`
	Epoch      int            `json:"epoch"`
	Attempt    int            `json:"attempt"`
	Status     sink.Status    `json:"status"`
	ErrorKind  sink.ErrorKind `json:"error_kind,omitempty"`
	Reason     string         `json:"reason"`
	Variant    string         `json:"variant,omitempty"`
	Transcript string         `json:"trace,omitempty"`
	// TraceID and SpanID are the episode's OpenTelemetry trace and span;
	// TraceURL is their link, from Options.TraceURL.
	TraceID  string `json:"trace_id,omitempty"`
	SpanID   string `json:"span_id,omitempty"`
	TraceURL string `json:"trace_url,omitempty"`
}

// Options tune how a report is computed from records. The zero value is
// valid, and a nil *Options means the zero value.
type Options struct {
	Level       float64 // confidence level; default 0.95
	MaxFailures int     // failures listed; default 100
	Resamples   int     // cluster bootstrap resamples; default 1000, negative for none
	Seed        uint64  // bootstrap seed
	// TraceURL links failures to their OpenTelemetry traces: a template
	// where {trace_id} and {span_id} stand for a record's IDs, e.g.
	// "http://localhost:16686/trace/{trace_id}" (see [TraceURL]).
	TraceURL string
	// MaxNoVerdict is the share of episodes errored or unscored above
	// which the report warns (WorstCase.Over) and a run from the command
	// line exits non-zero; default 0.05 (DefaultMaxNoVerdict), negative
	// for never.
	MaxNoVerdict float64
	// Sequential, when set, decides a sequential gate over the records
	// ([Sequential]); the report's Sequential says what it decided. A run
	// does not take it from eval.Config.Report (which refuses it): its
	// gate is eval.Config.Sequential, which the manifest keeps.
	Sequential *Sequential
	// Broken names the samples whose oracle did not pass (eval.Config
	// Oracle): their records are left out of the report, counted in
	// Report.Broken. FailOnBroken makes any of them a gate failure
	// (GateFailure).
	Broken       map[string]bool
	FailOnBroken bool
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Level <= 0 || v.Level >= 1 {
		v.Level = 0.95
	}
	if v.MaxFailures == 0 {
		v.MaxFailures = 100
	}
	if v.Resamples == 0 {
		v.Resamples = 1000
	}
	return v
}

// ResourcesCount is how many episodes' records name these sandbox
// resources (sandbox.Resources.String).
type ResourcesCount struct {
	Resources string `json:"resources"`
	Episodes  int    `json:"episodes"`
}

// EpisodeResourceSet is the distinct resources of r.EpisodeResources, in
// order.
func (r *Report) EpisodeResourceSet() []string {
	var s []string
	for _, c := range r.EpisodeResources {
		s = append(s, c.Resources)
	}
	return s
}

// Replay is what a run's call store and development cache answered (see
// docs/gateway.md): calls replayed from the recordings of episodes run
// again, calls served from the cache (-cache-from), episodes whose
// replay diverged (went live at a request that differed from the
// recorded one), and what the calls answered so had cost when bought
// (known to the run that served them only, not kept in the log).
// They cost this run nothing: Usage does not count them.
type Replay struct {
	Replayed int         `json:"replayed,omitempty"`
	Cached   int         `json:"cached,omitempty"`
	Diverged int         `json:"diverged,omitempty"`
	Saved    usage.Usage `json:"saved,omitzero"`
}
