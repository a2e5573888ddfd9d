package eval

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sink"
)

// Eval is one evaluation: what to run (Dataset), how (Harness) and how to
// judge it (Judge). T is the sample input type, O the harness output type.
type Eval[T, O any] struct {
	Name string
	// Dataset is read before anything runs: its IDs are checked and
	// indexed. A dataset.Slice is used where it is. Any other dataset is
	// streamed: Run keeps only each sample's ID and tags, and reads the
	// dataset again, in order, as its samples' episodes start, holding an
	// input only until its sample's last episode ends, so a million-sample
	// file costs the engine IDs, not inputs. The second reading must yield
	// the same samples (as the Dataset contract says); one that does not
	// stops the run with an error, and what ran stays in the log. A run
	// that narrows the dataset (Config.Subset, Config.Select), reuses
	// results (Config.ReuseFrom) or claims samples in a random order
	// (Config.Sequential), and a distributed worker (Work), which
	// runs samples in any order, read it into memory instead; so does
	// dataset.Collect. A coordinator (Open) keeps only the IDs.
	Dataset dataset.Dataset[T]
	// Harness runs the agent; nil when Variants are given.
	Harness harness.Harness[T, O]
	// Variants, when given, are the harnesses the eval compares (a model,
	// a prompt, a scaffold: docs/comparing-agents.md): each sample runs
	// every variant's episodes, in one environment provisioned once for
	// all of them, with the same episode seeds. Harness must then be nil.
	Variants []Variant[T, O]
	Judge    judge.Judge[T, O]
	// Sandbox returns the environment a sample needs when Config.Sandbox is
	// set; nil means the zero Spec (an empty workspace).
	Sandbox func(dataset.Sample[T]) sandbox.Spec
	// Oracle is the eval's reference solution, per sample (a harness that
	// solves the task: the task's solution applied in its sandbox, say).
	// With Config.Oracle it runs once per sample before the agent, judged
	// by Judge: a sample whose oracle does not pass is broken, and the
	// report leaves it out of the pass rate (docs/guarantees.md,
	// "Infrastructure noise").
	Oracle harness.Harness[T, O]
	// Versions name the versions of the harness, the judge and the sandbox
	// spec. They are stored in the log's manifest; resuming a log written
	// under other versions is refused (its records would mix two evals)
	// unless Config.AllowChanged is set.
	Versions Versions
}

// Config tunes a run. The zero Config is valid: the defaults are given
// field by field.
type Config struct {
	// Concurrency bounds the episodes in flight; default 16.
	Concurrency int
	// Epochs is how many times each sample runs (per variant); default 1.
	Epochs int
	// Variants runs only the eval's variants named (Eval.Variants); nil
	// runs them all. The log keeps the others' records, out of the report.
	Variants []string
	// EliminateVariants, when above 0, stops running a variant once
	// another is better with anytime-valid confidence, and is the bound on
	// the probability that any variant is stopped wrongly (the best one,
	// or one no worse than the one that stopped it): see
	// docs/comparing-agents.md, "Stopping losers early". 0 runs every
	// variant on every sample. Needs two variants or more.
	EliminateVariants float64
	// Timeout bounds one attempt of an episode (harness and judge); default
	// 30 minutes, negative for none. A harness that ignores its context is
	// abandoned when it expires and the attempt is an error of kind timeout.
	Timeout time.Duration
	// Retries is how many times an episode that ended in error (an
	// infrastructure fault, never an agent's failure) is tried again;
	// default 2, negative for none.
	Retries int
	// Backoff is the base of the exponential backoff between retries, with
	// full jitter; default 1s, capped at 1 minute.
	Backoff time.Duration
	// OOMRetryMemory, when above 1, scales the sandbox's memory limit on
	// each retry of an episode whose attempt the out-of-memory killer
	// ended (error source sandbox/oom): the retry runs in an environment
	// provisioned with the limit times OOMRetryMemory (times it again
	// after a second kill). The record's resources name the limit its
	// final attempt had. 0 retries under the same limit; a spec with no
	// memory limit is not changed.
	OOMRetryMemory float64

	// Sandbox provides each episode a sandbox: a sample's environment is
	// provisioned once and each of its episodes gets an isolated fork.
	// Nil means episodes have no sandbox.
	Sandbox *sandbox.Provider
	// Models, when set, is the model gateway (package gateway) through
	// which the agents in the sandboxes call their models: the engine
	// serves it to the sandboxes (the driver says where: see
	// sandbox.Provider.ServeGateway), one per process, and gives every
	// command of an attempt's sandbox the gateway's variables
	// (OPENAI_BASE_URL, ANTHROPIC_BASE_URL…) with a token of the attempt's
	// own as the API key, valid from the attempt's start until its
	// record; the provider keys stay with the gateway. Each call is a
	// "model" event of the episode's transcript and its usage counts as
	// the agent's (the judge's once judging), so the caps and budgets
	// above hold for agent CLIs: a call that would start with nothing
	// left is refused, a stream that passes a cap is cut, and the episode
	// ends as an error of kind limit with what it spent. Needs Sandbox.
	Models Models

	// Log is the path of the JSONL log: the durable record of the run and
	// what resume reads. Running again with the same log resumes the run it
	// holds: only the episodes without a final record run (those that
	// ended in error run again). Empty means no log (and no resume).
	Log string
	// Sinks receive every record, after the log.
	Sinks []sink.Sink

	// RunID names the run; default: the run the log holds, else a new ID.
	RunID string
	// Seed is the run seed; each episode's seed derives from it, the
	// sample ID and the epoch.
	Seed uint64
	// MaxCostUSD stops scheduling new episodes once the cost of the
	// attempts made (retried ones included) reaches it; attempts in flight
	// finish, and no attempt starts after (an episode whose retry would
	// start ends in error and runs on resume). 0 means no budget.
	MaxCostUSD float64
	// MaxTokens is MaxCostUSD in tokens (input and output, agent and
	// judge): scheduling stops once the attempts made have used this
	// many. 0 means no budget. In a distributed run both budgets are the
	// run's, over every worker.
	MaxTokens int64
	// MaxEpisodeTokens and MaxEpisodeCostUSD cap one episode, over all its
	// attempts, agent and judge together: an episode past a cap when its
	// harness or its judge returns ends as an error of kind limit (not
	// retried), its record holding what it spent; an agent past the cap
	// is not judged. An attempt in flight is stopped (its context
	// canceled) within a tick of the watchdog (at most 250 ms) of passing
	// a cap, as far as its harness and judge record usage as they go and
	// honour their context. 0 means no cap. Such an episode is final: a
	// resume runs it again only when a cap changed or with RetryLimited.
	MaxEpisodeTokens  int64
	MaxEpisodeCostUSD float64
	// RetryLimited makes a resume run again the episodes that ended at a
	// per-episode cap, though the caps are the same.
	RetryLimited bool
	// MaxErrorRate stops the run, with an [*ErrorRateError], when more than
	// this fraction of its finished episodes ended in error, once
	// ErrorRateAfter episodes have finished: a bad API key or a broken
	// image stops a run within seconds instead of burning the dataset.
	// Episodes in flight end as cancelled; running again with the same log
	// resumes. Default 0.5; negative disables the check.
	MaxErrorRate float64
	// ErrorRateAfter is how many episodes must finish before MaxErrorRate
	// applies; default 20.
	ErrorRateAfter int
	// Shard runs only this run's part of the episodes, when Count > 1: the
	// samples whose ID hashes to Index (all epochs of a sample go to one
	// shard, so its sandbox is provisioned once). Shards of one run write
	// their own logs, under one run ID derived from the manifest unless
	// RunID is given; `proctor merge` joins them into one log whose report
	// equals one machine's.
	Shard Shard
	// Worker is written in each record's worker field: where the episode
	// ran ("host:pid"). cli.Main sets it for shards and cluster workers.
	Worker string
	// Oracle runs Eval.Oracle once per sample before the agent's
	// episodes, in a log of its own beside Log (resumed as Log is), and
	// makes the report leave the broken samples out (those the oracle
	// failed: report.Options.Broken); the agent's episodes of them still
	// run and stay in the log. Report.FailOnBroken makes any broken
	// sample fail the gate. Not with Sequential.
	Oracle bool
	// AllowChanged resumes a log whose manifest names another eval, seed
	// or component versions, instead of refusing it.
	AllowChanged bool

	// ReuseFrom names earlier logs whose results this run takes instead of
	// running those episodes again. An episode's result is reused when its
	// key matches: eval name, sample ID, input JSON, epoch, seed, and the
	// harness, judge and sandbox versions (Eval.Versions, from each log's
	// manifest). When only the judge's version differs, the recorded
	// output is judged again and the agent does not run (not with
	// Config.Sandbox: the judge may need the world the harness left).
	// Only final results are reused (pass, fail, unscored); an error runs
	// again. A reused record is copied into this run with its transcript,
	// reused_from naming the run that produced it; its cost counts in the
	// report's Usage and again in ReusedUsage, which this run did not
	// spend. Logs are read without a lock: a log still being written
	// serves what it has committed.
	//
	// Reusing a result of a stochastic agent is a choice: naming a log
	// here says that its results, one sample of the agent's behaviour,
	// stand for this run's; a fresh run would draw new ones. Unversioned
	// components (empty Versions) match each other, so set Versions when
	// you change a prompt, a model or a judge.
	ReuseFrom []string
	// CacheFrom names an earlier log whose model calls (its call store,
	// beside it: needs Models of package gateway) answer this run's
	// identical requests of the same epoch at no cost, so that iterating
	// on a judge or a harness does not buy the same calls again. The
	// report's "model calls not bought" line counts them. A development
	// tool: a cached answer is one draw of a stochastic model, reused.
	CacheFrom string
	// Select narrows the run to samples chosen from an earlier run's
	// results (its failures, say); nil runs every sample.
	Select *Selection
	// Subset narrows the run to a stratified, seeded subset of the
	// dataset (a smoke test); the zero Subset runs every sample. Subset
	// applies before Select.
	Subset Subset
	// Sequential, when set, makes the run a sequential gate: samples are
	// claimed in a seeded random order, and the run stops claiming them
	// as soon as the gate is decided at error rate Sequential.Alpha
	// (report.Sequential says how); episodes in flight then finish and are
	// recorded. The report's Sequential says what was decided, where, and
	// what was not spent. The dataset is read into memory. Not with
	// Shard: a shard sees part of the claim order. With Eval.Variants,
	// each variant has its own gate (each variant's report's Sequential)
	// and stops being run once it decided; the run stops once all have.
	Sequential *report.Sequential

	// OnProgress, when set, is given a snapshot of the run's progress every
	// ProgressEvery, and a last one (Final set) once every record is
	// written, from one goroutine: calls never overlap, and the next
	// snapshot waits for the call (the run does not). A cluster's
	// coordinator calls it too.
	OnProgress func(Progress)
	// ProgressEvery is how often progress is taken; default 1s.
	ProgressEvery time.Duration
	// Quiet turns off the progress line on stderr. Without it a run longer
	// than a moment shows one: updated in place on a terminal, a plain
	// line every 10 s elsewhere; under `go test` only with -v.
	Quiet bool

	// Report tunes the report (confidence level, failures listed…).
	Report report.Options
	// Logger receives warnings (a torn log tail that was cut, dropped error
	// records); default slog.Default().
	Logger *slog.Logger
	// TracerProvider receives one OpenTelemetry trace per episode; nil means the
	// global provider (otel.GetTracerProvider) as Run starts. With none
	// installed, tracing costs nothing.
	TracerProvider trace.TracerProvider
	// LoggerProvider receives each verdict as a gen_ai.evaluation.result event
	// (the OpenTelemetry Logs API); nil means the global provider
	// (otel.GetLoggerProvider) as Run starts.
	LoggerProvider log.LoggerProvider

	// plan numbers the episodes' slots (variants.go), set by prepare, which
	// then makes Epochs the slots per sample (variants × epochs).
	plan *variantPlan
}

// Defaults.
const (
	DefaultConcurrency    = 16
	DefaultTimeout        = 30 * time.Minute
	DefaultRetries        = 2
	DefaultBackoff        = time.Second
	DefaultMaxErrorRate   = 0.5
	DefaultErrorRateAfter = 20
	maxBackoff            = time.Minute
)

// validate rejects values that have no meaning; zero values are defaults.
func (c Config) validate() error {
	bad := func(field string, v any, want string) error {
		return &ConfigError{fmt.Sprintf("Config.%s is %v: want %s", field, v, want)}
	}
	switch {
	case c.Concurrency < 0:
		return bad("Concurrency", c.Concurrency, "a positive number, or 0 for the default")
	case c.Epochs < 0:
		return bad("Epochs", c.Epochs, "a positive number, or 0 for the default")
	case c.ProgressEvery < 0:
		return bad("ProgressEvery", c.ProgressEvery, "a positive duration, or 0 for the default")
	case c.Backoff < 0:
		return bad("Backoff", c.Backoff, "a positive duration, or 0 for the default")
	case c.OOMRetryMemory != 0 && !(c.OOMRetryMemory > 1 && c.OOMRetryMemory <= 64):
		return bad("OOMRetryMemory", c.OOMRetryMemory, "a factor in (1,64], or 0 to retry under the same limit")
	case c.MaxCostUSD < 0 || c.MaxCostUSD != c.MaxCostUSD:
		return bad("MaxCostUSD", c.MaxCostUSD, "a positive budget, or 0 for none")
	case c.MaxTokens < 0:
		return bad("MaxTokens", c.MaxTokens, "a positive budget, or 0 for none")
	case c.MaxEpisodeTokens < 0:
		return bad("MaxEpisodeTokens", c.MaxEpisodeTokens, "a positive cap, or 0 for none")
	case c.MaxEpisodeCostUSD < 0 || c.MaxEpisodeCostUSD != c.MaxEpisodeCostUSD:
		return bad("MaxEpisodeCostUSD", c.MaxEpisodeCostUSD, "a positive cap, or 0 for none")
	case c.MaxErrorRate > 1 || c.MaxErrorRate != c.MaxErrorRate:
		return bad("MaxErrorRate", c.MaxErrorRate, "a fraction in (0,1], 0 for the default or negative for none")
	case c.ErrorRateAfter < 0:
		return bad("ErrorRateAfter", c.ErrorRateAfter, "a positive count, or 0 for the default")
	case c.Report.Level != 0 && !(c.Report.Level > 0 && c.Report.Level < 1):
		return bad("Report.Level", c.Report.Level, "a confidence level in (0,1), or 0 for 0.95")
	case c.Shard.Count < 0 || c.Shard.Index < 0 || c.Shard.Count > 0 && c.Shard.Index >= c.Shard.Count:
		return bad("Shard", c.Shard, "an index in [0, count), or the zero Shard for none")
	case c.Report.MaxFailures < 0:
		return bad("Report.MaxFailures", c.Report.MaxFailures, "a positive count, or 0 for the default")
	case c.Subset.PerValue < 0:
		return bad("Subset.PerValue", c.Subset.PerValue, "a positive count, or 0 for no subset")
	case c.Report.Sequential != nil:
		return bad("Report.Sequential", "set", "nil: the gate is set in one place, Config.Sequential, which puts it in the manifest with its claim order, seed and epochs")
	case c.Models != nil && c.Sandbox == nil:
		return bad("Models", "set", "a Config.Sandbox too: the gateway is served to sandboxes")
	case c.Oracle && c.Sequential != nil:
		return bad("Oracle", true, "no Sequential: a gate decides over the samples in its claim order, broken or not")
	case c.Report.Broken != nil:
		return bad("Report.Broken", "set", "nil: the oracle pass sets it (Config.Oracle)")
	case c.Sequential != nil && c.Shard.Count > 1:
		return bad("Sequential", "set", "no Shard: a shard sees part of the claim order (use a coordinator)")
	case !(c.EliminateVariants >= 0 && c.EliminateVariants < 1):
		return bad("EliminateVariants", c.EliminateVariants, "an error rate in (0,1), or 0 for none")
	case c.EliminateVariants > 0 && c.Shard.Count > 1:
		return bad("EliminateVariants", c.EliminateVariants, "no Shard: each shard would decide on its part, at α each")
	}
	return c.validateReuse()
}

func (c Config) withDefaults() Config {
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Epochs == 0 {
		c.Epochs = 1
	}
	if c.MaxErrorRate == 0 {
		c.MaxErrorRate = DefaultMaxErrorRate // negative stays: no stop
	}
	if c.ErrorRateAfter == 0 {
		c.ErrorRateAfter = DefaultErrorRateAfter
	}
	switch {
	case c.Timeout == 0:
		c.Timeout = DefaultTimeout
	case c.Timeout < 0:
		c.Timeout = 0
	}
	switch {
	case c.Retries == 0:
		c.Retries = DefaultRetries
	case c.Retries < 0:
		c.Retries = 0
	}
	if c.Backoff == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = DefaultProgressEvery
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// ConfigError reports an evaluation that cannot start.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return "eval: " + e.Msg }

// Run runs the evaluation and returns its report. It returns an error only
// when the evaluation itself cannot go on: a bad config or dataset, a sink
// that fails, or ctx canceled — then with the report of what was recorded.
// Agents that fail, harnesses that error or panic, judges that cannot
// decide: those are data, in the records and the report.
func (e *Eval[T, O]) Run(ctx context.Context, cfg Config) (*report.Report, error) {
	// A run that narrows the dataset or reuses earlier results reads it
	// into memory; any other streams it (samples.go).
	// So does a sequential run, which claims samples in a random order.
	narrows := cfg.Subset.PerValue > 0 || cfg.Select != nil || len(cfg.ReuseFrom) > 0 || cfg.Sequential != nil || cfg.EliminateVariants > 0
	cfg, samples, err := e.prepare(ctx, cfg, !narrows)
	if err != nil {
		return nil, err
	}
	if samples, err = narrow(ctx, cfg, samples); err != nil {
		return nil, err
	}
	if cfg.Oracle {
		if cfg.Report.Broken, err = e.runOracle(ctx, cfg); err != nil {
			return nil, err
		}
	}
	return execute(ctx, &runSetup[T, O]{e: e, cfg: cfg, samples: samples})
}

// prepare checks e and cfg, applies cfg's defaults and loads the dataset:
// what every way of running an eval does first. With stream, a dataset
// other than a dataset.Slice is streamed rather than read into memory.
func (e *Eval[T, O]) prepare(ctx context.Context, cfg Config, stream bool) (Config, *sampleTable[T], error) {
	if err := e.check(); err != nil {
		return cfg, nil, err
	}
	if err := cfg.validate(); err != nil {
		return cfg, nil, err
	}
	if cfg.plan != nil {
		cfg.Epochs = cfg.plan.epochs // prepared before: Epochs holds slots
	}
	cfg = cfg.withDefaults()
	plan, err := newVariantPlan(e, &cfg, cfg.Epochs)
	if err != nil {
		return cfg, nil, err
	}
	if cfg.EliminateVariants > 0 && len(e.Variants) < 2 {
		return cfg, nil, &ConfigError{"Config.EliminateVariants needs two Eval.Variants or more"}
	}
	cfg.plan, cfg.Epochs = plan, plan.slots()
	if cfg.Sequential != nil {
		// Checked, and its baseline read, once: the run keeps this copy.
		s := *cfg.Sequential
		if err := s.Load(); err != nil {
			return cfg, nil, &ConfigError{"Config.Sequential: " + strings.TrimPrefix(err.Error(), "report: ")}
		}
		if s.BaselineEval != "" && s.BaselineEval != e.Name {
			return cfg, nil, &ConfigError{fmt.Sprintf("Config.Sequential.Baseline %s is a run of eval %q, not %q: a baseline is a run of the same eval", s.Baseline, s.BaselineEval, e.Name)}
		}
		cfg.Sequential = &s
	}
	// The resources come from the eval's specs alone, not from whether
	// this process has a provider: a cluster's coordinator has none, and
	// its manifest must say what its workers' sandboxes are asked for.
	var resources func(*dataset.Sample[T]) string
	if e.Sandbox != nil {
		resources = func(s *dataset.Sample[T]) string { return sandbox.SpecResources(e.Sandbox(*s)).String() }
	}
	samples, err := loadSamples(ctx, e.Dataset, stream, resources)
	return cfg, samples, err
}
