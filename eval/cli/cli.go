// Package cli runs an eval as a command line, so that one binary plays
// every role of a run: on one machine, as a shard of many (a Kubernetes
// Indexed Job), and, with package cluster, as a coordinator and its
// workers.
//
//	func main() { cli.Main(newEval(), eval.Config{Log: "runs/x.jsonl"}) }
//
// [Main] is the whole program; [MainArgs] is Main for tests. A program
// with commands of its own binds the run's flags with [BindFlags], runs,
// and ends with [PrintOutcome], as cluster.Main does.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/proctor-evals/proctor/eval"
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
// Job's shard is run (see [JobShard]).
//
// Main runs on one machine; cluster.Main adds the coordinate and work
// commands (and links NATS, which importing eval never does).
func Main[T, O any](e *eval.Eval[T, O], cfg eval.Config) {
	ctx, stop := eval.InterruptContext(context.Background())
	code := MainArgs(ctx, e, cfg, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// MainArgs is Main with its arguments and outputs given: it returns the
// exit status instead of exiting.
func MainArgs[T, O any](ctx context.Context, e *eval.Eval[T, O], cfg eval.Config, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "run":
			args = args[1:]
		case "help", "-h", "-help", "--help":
			fmt.Fprintf(stdout, "usage: %s [run] [flags]\n\nRuns the eval %q on this machine; flags:\n", prog(), e.Name)
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			BindFlags(fs, &cfg)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0
		default:
			if len(args[0]) > 0 && args[0][0] != '-' {
				fmt.Fprintf(stderr, "%s: unknown command %q: this binary runs `run` (the coordinate and work commands come with cluster.Main)\n", prog(), args[0])
				return 2
			}
		}
	}
	return RunCommand(ctx, e, cfg, args, stdout, stderr)
}

// RunCommand is the run command: it parses args over cfg, runs e and
// prints the report. It returns the exit status. Without -shard (and
// without cfg.Shard), it runs the shard of a Kubernetes Indexed Job.
func RunCommand[T, O any](ctx context.Context, e *eval.Eval[T, O], cfg eval.Config, args []string, stdout, stderr io.Writer) int {
	if cfg.Shard.Count == 0 {
		s, err := JobShard()
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog(), err)
			return 2
		}
		cfg.Shard = s
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	BindFlags(fs, &cfg)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	var g gate
	g.bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", prog(), fs.Args())
		return 2
	}
	if cfg.Shard.Count > 1 && cfg.Worker == "" {
		cfg.Worker = WorkerID()
	}
	rep, err := e.Run(ctx, cfg)
	if errors.Is(err, eval.ErrNothingSelected) {
		fmt.Fprintf(stderr, "%s: %v: nothing to run\n", prog(), err)
		return 0
	}
	code := PrintOutcome(stdout, stderr, rep, err, *asJSON)
	if rep != nil && !*asJSON && cfg.Select != nil && cfg.Select.From != "" {
		writeComparisonWithFrom(stdout, stderr, cfg.Select.From, rep)
	}
	if code == 0 && rep != nil && !g.check(stderr, rep) {
		code = 1
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
		fmt.Fprintf(stderr, "%s: %v\n", prog(), err)
		return 1
	case rep.BudgetExhausted:
		what := "the budget (-max-cost or -max-tokens, Config.MaxCostUSD or MaxTokens)"
		if rep.Budget != nil && rep.Budget.Spent == "tokens" {
			what = "the token budget (-max-tokens, Config.MaxTokens)"
		} else if rep.Budget != nil {
			what = "the cost budget (-max-cost, Config.MaxCostUSD)"
		}
		done := ""
		if rep.Planned > 0 {
			done = fmt.Sprintf(" after %d of %d episodes (%.0f%%)", rep.Episodes, rep.Planned, 100*float64(rep.Episodes)/float64(rep.Planned))
		}
		fmt.Fprintf(stderr, "%s: stopped%s: %s is spent; run again with a larger one and the same log to finish\n", prog(), done, what)
		return 1
	case rep.GateFailure() != "":
		for _, line := range strings.Split(rep.GateFailure(), "\n") {
			fmt.Fprintf(stderr, "%s: %s\n", prog(), line)
		}
		return 1
	}
	return 0
}

// writeComparisonWithFrom prints, after the report of a run derived from
// an earlier one, the paired comparison with it over the samples run.
func writeComparisonWithFrom(stdout, stderr io.Writer, from string, rep *report.Report) {
	c, err := eval.CompareFrom(from, rep, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog(), err)
		return
	}
	fmt.Fprintf(stdout, "\ncompared with the run in %s, over the %d samples run again:\n", from, len(rep.SampleResults()))
	c.WriteText(stdout)
}

func prog() string {
	if len(os.Args) > 0 {
		return filepath.Base(os.Args[0])
	}
	return "eval"
}
