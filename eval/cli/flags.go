package cli

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/sink"
)

// BindFlags defines on fs the flags of a run, each overriding its field of
// cfg: -log, -concurrency, -epochs, -seed, -timeout, -retries, -run-id,
// -shard, -max-cost, -max-error-rate, -allow-changed, -quiet; reuse and
// selection: -reuse-from (repeatable), -from, -only, -only-tag (repeatable),
// -flipped-against; a smoke subset: -smoke, -smoke-tag, -smoke-seed.
// Selection flags fill a copy of cfg.Select, never the caller's.
func BindFlags(fs *flag.FlagSet, cfg *eval.Config) {
	fs.StringVar(&cfg.Log, "log", cfg.Log, "the run's JSONL `path` (resumed when it holds records)")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "episodes in flight")
	fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "runs per sample (per variant)")
	fs.Func("variants", "run only the eval's variants `a,b,…` (default: all)", func(v string) error {
		cfg.Variants = nil
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if err := eval.CheckVariantName(name); err != nil {
				return err
			}
			if !slices.Contains(cfg.Variants, name) {
				cfg.Variants = append(cfg.Variants, name)
			}
		}
		return nil
	})
	fs.Float64Var(&cfg.EliminateVariants, "eliminate-variants", cfg.EliminateVariants, "stop running a variant once another is better, wrong with probability at most this `alpha` (0: run all)")
	fs.Func("seed", "the run `seed`", func(v string) error {
		s, err := strconv.ParseUint(v, 10, 64)
		cfg.Seed = s
		return err
	})
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound of one attempt (negative: none)")
	fs.IntVar(&cfg.Retries, "retries", cfg.Retries, "retries of an episode that ended in error (negative: none)")
	fs.Float64Var(&cfg.OOMRetryMemory, "oom-retry-memory", cfg.OOMRetryMemory, "retry an episode the OOM killer ended with its memory limit times this `factor` (0: the same limit)")
	fs.StringVar(&cfg.RunID, "run-id", cfg.RunID, "the run's `ID` (default: the log's, a shard's derived one, or new)")
	fs.Func("shard", "run only shard `I/N` of the samples (default: $JOB_COMPLETION_INDEX/$JOB_COMPLETIONS)", func(v string) error {
		s, err := eval.ParseShard(v)
		cfg.Shard = s
		return err
	})
	fs.Float64Var(&cfg.MaxCostUSD, "max-cost", cfg.MaxCostUSD, "stop once this many `USD` are spent (0: no budget)")
	fs.Int64Var(&cfg.MaxTokens, "max-tokens", cfg.MaxTokens, "stop once this many tokens are spent (0: no budget)")
	fs.Int64Var(&cfg.MaxEpisodeTokens, "max-episode-tokens", cfg.MaxEpisodeTokens, "end an episode past this many tokens as an error of kind limit (0: no cap)")
	fs.Float64Var(&cfg.MaxEpisodeCostUSD, "max-episode-cost", cfg.MaxEpisodeCostUSD, "end an episode past this many `USD` as an error of kind limit (0: no cap)")
	fs.Float64Var(&cfg.MaxErrorRate, "max-error-rate", cfg.MaxErrorRate, "stop when more than this `fraction` of episodes end in error (negative: never)")
	fs.Float64Var(&cfg.Report.MaxNoVerdict, "max-no-verdict", cfg.Report.MaxNoVerdict, "exit 1 when more than this `fraction` of episodes errored or were unscored (0: 0.05, negative: never)")
	fs.BoolVar(&cfg.RetryLimited, "retry-limited", cfg.RetryLimited, "on resume, run again the episodes a per-episode cap ended (final unless the caps changed)")
	fs.BoolVar(&cfg.AllowChanged, "allow-changed", cfg.AllowChanged, "resume a log written by another version of the eval")
	fs.BoolVar(&cfg.Oracle, "oracle", cfg.Oracle, "run the eval's oracle (reference solution) once per sample first: the samples it fails are broken, left out of the pass rate")
	fs.BoolVar(&cfg.Report.FailOnBroken, "fail-on-broken", cfg.Report.FailOnBroken, "exit 1 when any sample is broken (its oracle failed; with -oracle)")
	bindReuseFlags(fs, cfg)
	bindSequentialFlags(fs, cfg)
	fs.BoolVar(&cfg.Quiet, "quiet", cfg.Quiet, "no progress line on stderr")
}

// bindReuseFlags defines the flags of reuse and selection on fs.
func bindReuseFlags(fs *flag.FlagSet, cfg *eval.Config) {
	if cfg.Select != nil {
		c := *cfg.Select
		c.Status, c.Tags = slices.Clone(c.Status), maps.Clone(c.Tags)
		cfg.Select = &c
	}
	sel := func() *eval.Selection {
		if cfg.Select == nil {
			cfg.Select = &eval.Selection{}
		}
		return cfg.Select
	}
	fs.Func("reuse-from", "reuse the matching results of the earlier `log` (repeatable; see Config.ReuseFrom)", func(v string) error {
		if v == "" {
			return errors.New("want the path of a log")
		}
		cfg.ReuseFrom = append(slices.Clip(cfg.ReuseFrom), v)
		return nil
	})
	fs.Func("cache-from", "answer the agents' model calls from the call store of the earlier `log` where its request and epoch match (Config.CacheFrom; a development cache)", func(v string) error {
		if v == "" {
			return errors.New("want the path of a log")
		}
		cfg.CacheFrom = v
		return nil
	})
	fs.Func("from", "derive the run from the earlier run in `log`: its samples, narrowed by -only, -only-tag, -flipped-against", func(v string) error {
		sel().From = v
		return nil
	})
	fs.Func("only", "with -from: only the samples with an episode that `ended` so: failed,unscored,errored,passed", func(v string) error {
		s := sel()
		for name := range strings.SplitSeq(v, ",") {
			st, ok := statusNames[strings.TrimSpace(name)]
			if !ok {
				return fmt.Errorf("%q: want failed, unscored, errored or passed", name)
			}
			if !slices.Contains(s.Status, st) {
				s.Status = append(s.Status, st)
			}
		}
		return nil
	})
	fs.Func("only-tag", "only the samples tagged `key=value` (repeatable: all must hold)", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q: want key=value", v)
		}
		s := sel()
		if s.Tags == nil {
			s.Tags = map[string]string{}
		}
		s.Tags[k] = val
		return nil
	})
	fs.Func("flipped-against", "with -from: only the samples whose pass/fail flipped between the baseline `log` and the -from run", func(v string) error {
		sel().FlippedAgainst = v
		return nil
	})
	fs.IntVar(&cfg.Subset.PerValue, "smoke", cfg.Subset.PerValue, "a smoke run: `N` samples per value of -smoke-tag (N in all without it), seeded by -smoke-seed")
	fs.StringVar(&cfg.Subset.Tag, "smoke-tag", cfg.Subset.Tag, "the `tag` whose values -smoke stratifies by")
	fs.Uint64Var(&cfg.Subset.Seed, "smoke-seed", cfg.Subset.Seed, "the `seed` of the -smoke draw")
}

var statusNames = map[string]sink.Status{
	"failed": sink.Fail, "fail": sink.Fail,
	"unscored": sink.Unscored,
	"errored":  sink.Error, "error": sink.Error,
	"passed": sink.Pass, "pass": sink.Pass,
}

// JobShard returns the shard a Kubernetes Indexed Job gives this process,
// from JOB_COMPLETION_INDEX and JOB_COMPLETIONS: the zero Shard (every
// sample) when they are not both set, and an error when they do not name
// a shard.
func JobShard() (eval.Shard, error) {
	idx, n := os.Getenv("JOB_COMPLETION_INDEX"), os.Getenv("JOB_COMPLETIONS")
	if idx == "" || n == "" {
		return eval.Shard{}, nil
	}
	s, err := eval.ParseShard(idx + "/" + n)
	if err != nil {
		return eval.Shard{}, fmt.Errorf("JOB_COMPLETION_INDEX=%s JOB_COMPLETIONS=%s: %w", idx, n, err)
	}
	return s, nil
}

// WorkerID names this process in records: "host:pid".
func WorkerID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}
