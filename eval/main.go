package eval

// Main: the user's binary as a command line, so that one binary plays
// every role of a run (one machine, a shard; with package cluster, a
// coordinator and its workers).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/proctor-evals/proctor/eval/report"
)

// Main runs e as a command and exits:
//
//	myeval [run] [-log runs/x.jsonl] [-concurrency N] [-epochs N] [-shard I/N] ...
//
// Flags override cfg. It prints the text report (or -json) on stdout when
// the run ends and exits 0; a run that could not finish (an error, a
// spent budget, too many errors, an interrupt) exits 1 with the reason on
// stderr, and bad usage exits 2. The first Ctrl-C stops gracefully (the
// log resumes), the second at once. Without -shard, a Kubernetes Indexed
// Job's JOB_COMPLETION_INDEX and JOB_COMPLETIONS choose the shard.
//
// Main runs on one machine; cluster.Main adds the coordinate and work
// commands (and links NATS, which importing eval never does).
func Main[T, O any](e *Eval[T, O], cfg Config) {
	ctx, stop := InterruptContext(context.Background())
	code := MainArgs(ctx, e, cfg, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// MainArgs is Main with its arguments and outputs given: it returns the
// exit status instead of exiting.
func MainArgs[T, O any](ctx context.Context, e *Eval[T, O], cfg Config, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "run":
			args = args[1:]
		case "help", "-h", "-help", "--help":
			fmt.Fprintf(stdout, "usage: %s [run] [flags]\n\nRuns the eval %q on this machine; flags:\n", progName(), e.Name)
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			BindFlags(fs, &cfg)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0
		default:
			if len(args[0]) > 0 && args[0][0] != '-' {
				fmt.Fprintf(stderr, "%s: unknown command %q: this binary runs `run` (the coordinate and work commands come with cluster.Main)\n", progName(), args[0])
				return 2
			}
		}
	}
	return RunCommand(ctx, e, cfg, args, stdout, stderr)
}

// RunCommand is the run command: it parses args over cfg, runs e and
// prints the report. It returns the exit status.
func RunCommand[T, O any](ctx context.Context, e *Eval[T, O], cfg Config, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	BindFlags(fs, &cfg)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", progName(), fs.Args())
		return 2
	}
	if cfg.Shard.Count > 1 && cfg.Worker == "" {
		cfg.Worker = WorkerID()
	}
	rep, err := e.Run(ctx, cfg)
	if errors.Is(err, ErrNothingSelected) {
		fmt.Fprintf(stderr, "%s: %v: nothing to run\n", progName(), err)
		return 0
	}
	code := PrintOutcome(stdout, stderr, rep, err, *asJSON)
	if rep != nil && !*asJSON && cfg.Select != nil && cfg.Select.From != "" {
		writeComparisonWithFrom(stdout, stderr, cfg.Select.From, rep)
	}
	return code
}

// PrintOutcome prints the report of a run that ended (text, or JSON with
// asJSON) on stdout, and why it could not finish on stderr, and returns the
// exit status of a command: 0 when it finished, 1 for an error or a spent
// budget. Main and cluster.Main end with it.
func PrintOutcome(stdout, stderr io.Writer, rep *report.Report, err error, asJSON bool) int {
	if rep != nil {
		var werr error
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			werr = enc.Encode(rep)
		} else {
			werr = rep.WriteText(stdout)
		}
		if err == nil {
			err = werr
		}
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", progName(), err)
		return 1
	case rep.BudgetExhausted:
		fmt.Fprintf(stderr, "%s: stopped: the budget (-max-cost, Config.MaxCostUSD) is spent; run again with a larger one and the same log to finish\n", progName())
		return 1
	}
	return 0
}

// BindFlags defines on fs the flags of a run, each overriding its field of
// cfg: -log, -concurrency, -epochs, -seed, -timeout, -retries, -run-id,
// -shard, -max-cost, -max-error-rate, -allow-changed, -quiet; reuse and
// selection: -reuse-from (repeatable), -from, -only, -only-tag (repeatable),
// -flipped-against; a smoke subset: -smoke, -smoke-tag, -smoke-seed. Without -shard, the
// shard comes from JOB_COMPLETION_INDEX and JOB_COMPLETIONS when a
// Kubernetes Indexed Job sets them.
func BindFlags(fs *flag.FlagSet, cfg *Config) {
	if idx, n := os.Getenv("JOB_COMPLETION_INDEX"), os.Getenv("JOB_COMPLETIONS"); idx != "" && n != "" && cfg.Shard.Count == 0 {
		if s, err := ParseShard(idx + "/" + n); err == nil {
			cfg.Shard = s
		}
	}
	fs.StringVar(&cfg.Log, "log", cfg.Log, "the run's JSONL `path` (resumed when it holds records)")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "episodes in flight")
	fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "runs per sample")
	fs.Func("seed", "the run `seed`", func(v string) error {
		s, err := strconv.ParseUint(v, 10, 64)
		cfg.Seed = s
		return err
	})
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound of one attempt (negative: none)")
	fs.IntVar(&cfg.Retries, "retries", cfg.Retries, "retries of an episode that ended in error (negative: none)")
	fs.StringVar(&cfg.RunID, "run-id", cfg.RunID, "the run's `ID` (default: the log's, a shard's derived one, or new)")
	fs.Func("shard", "run only shard `I/N` of the samples (default: $JOB_COMPLETION_INDEX/$JOB_COMPLETIONS)", func(v string) error {
		s, err := ParseShard(v)
		cfg.Shard = s
		return err
	})
	fs.Float64Var(&cfg.MaxCostUSD, "max-cost", cfg.MaxCostUSD, "stop once this many `USD` are spent (0: no budget)")
	fs.Float64Var(&cfg.MaxErrorRate, "max-error-rate", cfg.MaxErrorRate, "stop when more than this `fraction` of episodes end in error (negative: never)")
	fs.BoolVar(&cfg.AllowChanged, "allow-changed", cfg.AllowChanged, "resume a log written by another version of the eval")
	bindReuseFlags(fs, cfg)
	fs.BoolVar(&cfg.Quiet, "quiet", cfg.Quiet, "no progress line on stderr")
}

// WorkerID names this process in records: "host:pid".
func WorkerID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

func progName() string {
	if len(os.Args) > 0 {
		return baseName(os.Args[0])
	}
	return "eval"
}

func baseName(p string) string { return filepath.Base(p) }
