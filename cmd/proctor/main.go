// Command proctor reads the results of evaluation runs: a run's JSONL log
// (the source of truth) or a directory of Parquet files exported from one.
//
//	proctor report [-json | -markdown | -html OUT] [-junit FILE] [-github [-github-file F]] RUN...
//	proctor compare [-json | -markdown | -pr-comment [-pr-key K] [-run-url U]] [-margin M] [-level L] [-fail-on-regression] BASE HEAD
//	proctor compare [flags] -variants A,B RUN   (or BASE, HEAD as LOG#VARIANT)
//	proctor export [-force] -parquet DIR LOG
//	proctor export -failures [-format dataset] [-status S] [-force] -o OUT LOG
//	proctor review pick|export|import|report [flags] LOG [FILE]
//	proctor trace [-json | -format atif] LOG SAMPLE [EPOCH]
//	proctor trace [-json | -format atif] [LOG] PATH#OFFSET
//	proctor merge [-force] -o OUT LOG...
//	proctor view [-addr HOST:PORT] [-trace-url TEMPLATE] [LOG|DIR]...
//	proctor history [-eval E] [-tag T] [-baseline RUN] [-last N] [-alpha A] [-fail-on-drift] DIR
//	proctor compact -before DATE [-keep F] [-seed S] DIR
//	proctor version
//	proctor help [COMMAND]
//
// RUN, BASE and HEAD are a log (.jsonl) or a Parquet file or directory.
// Exit status: 0 on success (and for help asked for with -h or help), 1 on
// an error, 2 on bad usage, 3 when -fail-on-regression is given and the
// head regressed significantly or is not non-inferior within the margin,
// 4 when -fail-on-drift is given and a run drifted from its baseline.
//
// The command links the report package (eval/report) and the sinks, not
// the evaluation engine.
//
// # Querying with DuckDB
//
// A log loads with one line:
//
//	SELECT * FROM read_json_auto('run.jsonl', sample_size = -1);
//
// sample_size = -1 makes DuckDB infer the column types from every line:
// with its default sample (the first 20,480 lines), a seed above the int64
// range further on fails the cast. An export keeps its types (JSON input
// and output, MAP tags and scores, TIMESTAMP WITH TIME ZONE started_at,
// UBIGINT seed):
//
//	SELECT tags['difficulty'] AS d, avg(score), any_value(output->>'answer')
//	FROM 'results/*.parquet' GROUP BY d;
//
// Both are checked against a real DuckDB by internal/duckdbcheck.
//
// Install with: go install github.com/proctor-evals/proctor/cmd/proctor@latest
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"runtime/debug"
	"strings"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/sink/parquetsink"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// A command is a subcommand, as the go command has them: its own flag set,
// a one-line usage and a help text.
type command struct {
	name  string
	args  string // the usage line after the name and flags
	short string
	long  string
	// flags defines the command's flags on fs and returns the function
	// that runs it with the positional arguments.
	flags func(fs *flag.FlagSet) func(args []string, stdout, stderr io.Writer) (int, error)
}

// Exit statuses.
const (
	exitError      = 1
	exitUsage      = 2
	exitRegression = 3 // compare -fail-on-regression found a regression
)

var commands []*command

func init() {
	commands = []*command{reportCommand, compareCommand, exportCommand, mergeCommand, reviewCommand, traceCommand, viewCommand, historyCommand, compactCommand, versionCommand}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// errUsage marks a command line that does not parse.
var errUsage = errors.New("bad usage")

func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

func mainUsage(w io.Writer) {
	fmt.Fprint(w, "proctor reads the results of evaluation runs.\n\nusage: proctor <command> [arguments]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.short)
	}
	fmt.Fprint(w, "  help      print help about a command\n\n"+
		"RUN, BASE and HEAD are a JSONL log or a Parquet file or directory.\n"+
		"Run 'proctor help <command>' for a command's flags and details.\n")
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		mainUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		mainUsage(stdout)
		return 0
	case "help":
		return help(args[1:], stdout, stderr)
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "proctor: unknown command %q\n\n", args[0])
		mainUsage(stderr)
		return exitUsage
	}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are printed below
	fs.Usage = func() {}
	runCmd := c.flags(fs)
	pos, err := parse(fs, args[1:])
	code := 0
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.help(stdout, fs)
		return 0
	case err == nil:
		code, err = runCmd(pos, stdout, stderr)
	}
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "proctor %s: %v\nusage: %s\nRun 'proctor help %s' for details.\n", c.name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "), c.usage(fs), c.name)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "proctor %s: %v\n", c.name, err)
		return exitError
	}
	return code
}

// help is the help command: the main usage, or a command's help.
func help(args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		mainUsage(stdout)
		return 0
	case 1:
		if c := lookup(args[0]); c != nil {
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			c.flags(fs)
			c.help(stdout, fs)
			return 0
		}
		fmt.Fprintf(stderr, "proctor help %s: unknown command\nRun 'proctor help' for usage.\n", args[0])
	default:
		fmt.Fprint(stderr, "usage: proctor help [command]\n")
	}
	return exitUsage
}

// usage is the command's usage line.
func (c *command) usage(fs *flag.FlagSet) string {
	var flags []string
	fs.VisitAll(func(f *flag.Flag) {
		name, _ := flag.UnquoteUsage(f)
		if name == "" {
			flags = append(flags, "[-"+f.Name+"]")
		} else {
			flags = append(flags, "[-"+f.Name+" "+name+"]")
		}
	})
	return strings.Join(append(append([]string{"proctor", c.name}, flags...), c.args), " ")
}

func (c *command) help(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usage(fs), strings.TrimSpace(c.long))
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nflags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// parse parses flags that may come before or after the positional
// arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func wantArgs(pos []string, min, max int, what string) error {
	if len(pos) < min || max >= 0 && len(pos) > max {
		return usageError("want %s, got %d arguments", what, len(pos))
	}
	return nil
}

// records reads a run from a JSONL log or from Parquet. A torn log tail is
// reported on stderr and the committed records are used.
func records(path string, stderr io.Writer) (iter.Seq2[sink.Record, error], error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var seq iter.Seq2[sink.Record, error]
	if st.IsDir() || strings.HasSuffix(path, ".parquet") {
		seq = parquetsink.Records(path)
	} else {
		seq = jsonl.Records(path)
	}
	return func(yield func(sink.Record, error) bool) {
		for r, err := range seq {
			var torn *jsonl.TornTailError
			if errors.As(err, &torn) {
				fmt.Fprintf(stderr, "warning: %v; using the %d committed bytes before it\n", torn, torn.Offset)
				return
			}
			if !yield(r, err) {
				return
			}
		}
	}, nil
}

func reportOf(path string, stderr io.Writer, maxNoVerdict float64, maxFailures int, failOnBroken bool) (*report.Report, error) {
	opts, err := sequentialOptions(path)
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &report.Options{}
	}
	opts.MaxNoVerdict, opts.MaxFailures, opts.FailOnBroken = maxNoVerdict, maxFailures, failOnBroken
	if opts.Broken, err = report.OracleBroken(path); err != nil {
		return nil, err
	}
	if endsLine(path) {
		// A whole log, read on every core: a torn tail would be a warning
		// in the report, which the command prints on stderr instead.
		return report.FromLog(path, opts)
	}
	seq, err := records(path, stderr)
	if err != nil {
		return nil, err
	}
	return report.FromRecords(seq, opts)
}

// sequentialOptions decides the sequential gate a log's manifest names, if
// any, as the run did.
func sequentialOptions(path string) (*report.Options, error) {
	m, err := manifest.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no manifest (Parquet, an old log): no gate
	}
	if err != nil {
		return nil, err
	}
	seq, err := report.SequentialOf(m)
	if seq == nil || err != nil {
		return nil, err
	}
	return &report.Options{Sequential: seq}, nil
}

// endsLine reports whether path is a regular file, not Parquet, whose last
// byte ends a line.
func endsLine(path string) bool {
	if strings.HasSuffix(path, ".parquet") {
		return false
	}
	f, err := safeopen.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return false
	}
	var b [1]byte
	_, err = f.ReadAt(b[:], st.Size()-1)
	return err == nil && b[0] == '\n'
}

var reportCommand = &command{
	name:  "report",
	args:  "RUN...",
	short: "print the report of one or more runs",
	long: `
Report prints the standard report of each RUN (a JSONL log, or a Parquet
file or directory): pass rate with its confidence interval, pass@k,
breakdowns by tag, latency, usage and failures.

With several runs it prints one report for each, in the order given: as
text or Markdown under a heading naming the run, and with -json as a stream
of JSON documents, one per run (as 'go list -json' prints). Runs are not
merged into one report: two logs may hold the same episode (a copy, a
resumed run), which a merged report would count twice. Shards of one run
are merged into one log first, where each episode is kept once. A RUN that
is the transcript store, manifest or lock of a log that exists (what
runs/*.jsonl matches) is skipped, with a note on stderr.

It exits with status 1, as the run did, when a RUN fails the gates its log
carries: its sequential gate did not decide "pass", more of its episodes
than -max-no-verdict had no verdict, or its judge gave no verdict on any
call, or, with -fail-on-broken, it has broken samples. So CI can gate a
log it did not run.

A log run with an oracle (-oracle) has the oracle's log beside it
(run.oracle.jsonl): the samples the oracle failed are broken, left out of
the pass rate and listed in the headline.`,
	flags: func(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) (int, error) {
		asJSON := fs.Bool("json", false, "print JSON")
		maxNoVerdict := fs.Float64("max-no-verdict", 0, "exit 1 when more than this `fraction` of a run's episodes errored or were unscored (0: 0.05, negative: never)")
		asMarkdown := fs.Bool("markdown", false, "print Markdown (for CI job summaries)")
		htmlOut := fs.String("html", "", "write the run page of one LOG to `file` as self-contained HTML (as proctor view shows it)")
		ciOut := ciFlags(fs)
		failOnBroken := fs.Bool("fail-on-broken", false, "exit 1 when a run has broken samples: samples its oracle failed (its log's run.oracle.jsonl)")
		return func(pos []string, stdout, stderr io.Writer) (int, error) {
			if *htmlOut != "" {
				return writeHTMLReport(pos, *htmlOut)
			}
			if err := wantArgs(pos, 1, -1, "at least one RUN"); err != nil {
				return 0, err
			}
			pos, err := logArgs(pos, stderr)
			if err != nil {
				return 0, err
			}
			if err := ciOut.check(pos); err != nil {
				return 0, err
			}
			code := 0
			for i, path := range pos {
				rep, err := reportOf(path, stderr, *maxNoVerdict, ciOut.maxFailures(), *failOnBroken)
				if err != nil {
					return 0, fmt.Errorf("%s: %w", path, err)
				}
				if err := ciOut.write(stdout, path, rep); err != nil {
					return 0, err
				}
				if rep.Episodes == 0 {
					fmt.Fprintf(stderr, "warning: %s holds no records\n", path)
				}
				if len(pos) > 1 && !*asJSON {
					if i > 0 {
						fmt.Fprintln(stdout)
					}
					if *asMarkdown {
						fmt.Fprintf(stdout, "### %s\n\n", path)
					} else {
						fmt.Fprintf(stdout, "== %s\n", path)
					}
				}
				if err := write(stdout, rep, *asJSON, *asMarkdown); err != nil {
					return 0, err
				}
				if !*asJSON {
					noteReviews(stdout, path)
				}
				if why := rep.GateFailure(); why != "" {
					for _, line := range strings.Split(why, "\n") {
						fmt.Fprintf(stderr, "%s: %s\n", path, line)
					}
					code = exitError
				}
			}
			return code, nil
		}
	},
}

type printable interface {
	WriteText(io.Writer) error
	WriteMarkdown(io.Writer) error
}

func write(w io.Writer, v printable, asJSON, asMarkdown bool) error {
	switch {
	case asJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case asMarkdown:
		return v.WriteMarkdown(w)
	}
	return v.WriteText(w)
}

var compareCommand = &command{
	name:  "compare",
	args:  "BASE HEAD | -variants A,B RUN",
	short: "compare two runs of the same samples, or two variants of one run, paired by sample",
	long: `
Compare prints the paired comparison of HEAD against BASE: the difference
of pass rates and scores over the samples scored in both, with confidence
intervals, McNemar's test, the samples that flipped, and differences by tag.

With -variants A,B and one RUN, a log of variants, it compares variant B
(the head) against variant A (the base) of that run, as it compares two
logs: each variant's records are a run of their own
(docs/comparing-agents.md). BASE or HEAD may name one variant of a log of
variants, LOG#VARIANT (a run of a variant against an older run, say); a
log of variants named whole is refused, since its variants pooled
describe no agent.

With -fail-on-regression it exits with status 3 when the head regressed
significantly or is not non-inferior within -margin, deciding on the worst
case when either run has errored or unscored episodes (the head's counted as
failures, the base's as passes; -exclude-errors leaves them out instead),
and with status 1 when
there is nothing to decide on: fewer than two samples are scored in both
runs (different datasets, or runs that only errored), so no interval
exists.

The noise floor beside the difference is how far two runs of one agent
land apart by chance, from each sample's spread across epochs; runs of
one epoch have one when they are of one agent (-same-agent, or both
manifests naming the same versions with a harness version), from each
sample's spread across both runs.`,
	flags: func(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) (int, error) {
		asJSON := fs.Bool("json", false, "print JSON")
		asMarkdown := fs.Bool("markdown", false, "print Markdown")
		margin := fs.Float64("margin", 0, "non-inferiority `margin` on the pass rate (e.g. 0.02 for two points)")
		failOn := fs.Bool("fail-on-regression", false, "exit with status 3 when the head is not non-inferior (in the worst case: its errored and unscored episodes as failures, the base's as passes)")
		excludeErrors := fs.Bool("exclude-errors", false, "with -fail-on-regression, decide on the samples both runs scored, leaving errored and unscored episodes out, not on the worst case")
		level := fs.Float64("level", 0.95, "confidence `level`")
		variants := fs.String("variants", "", "compare variant B against variant A of one RUN, a log of variants: `A,B`")
		sameAgent := fs.Bool("same-agent", false, "the runs are of one agent: the noise floor pools each sample's outcomes across both runs, so runs of one epoch get one too (taken as such when both manifests name the same versions, a harness version among them)")
		comment := commentFlags(fs)
		return func(pos []string, stdout, stderr io.Writer) (int, error) {
			var base, head *report.Report
			var err error
			if *variants != "" {
				if err := wantArgs(pos, 1, 1, "one RUN with -variants"); err != nil {
					return 0, err
				}
				if base, head, err = variantReports(pos[0], *variants, stderr); err != nil {
					return 0, err
				}
				pos = []string{pos[0] + "#" + base.Variant, pos[0] + "#" + head.Variant}
			} else {
				if err := wantArgs(pos, 2, 2, "BASE and HEAD"); err != nil {
					return 0, err
				}
				if base, err = compareSide(pos[0], stderr); err != nil {
					return 0, err
				}
				if head, err = compareSide(pos[1], stderr); err != nil {
					return 0, err
				}
			}
			c := report.Compare(base, head, &report.CompareOptions{Margin: *margin, Level: *level, SameAgent: *sameAgent})
			if comment.on {
				err = comment.write(stdout, c, pos[1])
			} else {
				err = write(stdout, c, *asJSON, *asMarkdown)
			}
			if err != nil {
				return 0, err
			}
			if c.Paired < 2 {
				why := fmt.Errorf("nothing to compare: %d samples scored in both runs (%d only in %s, %d only in %s); a comparison needs at least 2",
					c.Paired, len(c.OnlyBase), pos[0], len(c.OnlyHead), pos[1])
				if *failOn {
					return 0, fmt.Errorf("-fail-on-regression cannot decide: %w", why)
				}
				fmt.Fprintf(stderr, "warning: %v\n", why)
				return 0, nil
			}
			if nonInferior, regressed := c.Decision(*excludeErrors); *failOn && (regressed || !nonInferior) {
				return exitRegression, nil
			}
			return 0, nil
		}
	},
}

// compareSide returns the report of one side of a comparison: a log, or
// one variant of a log of variants, LOG#VARIANT. A log of variants must
// name one: pooled, its variants describe no agent.
func compareSide(arg string, stderr io.Writer) (*report.Report, error) {
	path, variant := arg, ""
	if _, err := os.Stat(arg); err != nil {
		if i := strings.LastIndexByte(arg, '#'); i > 0 {
			path, variant = arg[:i], arg[i+1:]
		}
	}
	rep, err := reportOf(path, stderr, 0, 0, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case variant != "" && rep.Leaderboard == nil:
		return nil, fmt.Errorf("%s: the log has no variants (its records name none), so no variant %q", path, variant)
	case variant != "" && rep.VariantReport(variant) == nil:
		return nil, fmt.Errorf("%s: no variant %q in the log; it has %s", path, variant, strings.Join(rep.VariantNames(), ", "))
	case variant != "":
		return rep.VariantReport(variant), nil
	case rep.Leaderboard != nil:
		return nil, fmt.Errorf("%s is a log of variants (%s): compare one of them, %s#VARIANT, or two with -variants A,B", path, strings.Join(rep.VariantNames(), ", "), path)
	}
	return rep, nil
}

// variantReports returns the reports of the two variants "A,B" names of
// the log of variants at path.
func variantReports(path, names string, stderr io.Writer) (base, head *report.Report, err error) {
	a, b, ok := strings.Cut(names, ",")
	if !ok || a == "" || b == "" || strings.Contains(b, ",") {
		return nil, nil, usageError("-variants %q: want two variants, A,B", names)
	}
	rep, err := reportOf(path, stderr, 0, 0, false)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if rep.Leaderboard == nil {
		return nil, nil, fmt.Errorf("%s: -variants: the log has no variants (its records name none)", path)
	}
	for _, name := range []string{a, b} {
		if rep.VariantReport(name) == nil {
			return nil, nil, fmt.Errorf("%s: -variants: no variant %q in the log; it has %s", path, name, strings.Join(rep.VariantNames(), ", "))
		}
	}
	return rep.VariantReport(a), rep.VariantReport(b), nil
}

var versionCommand = &command{
	name:  "version",
	short: "print proctor's version",
	long: `
Version prints the version of proctor, from the build information Go
records in the binary: the module version for 'go install …@version', and
the VCS revision for a build from a checkout.`,
	flags: func(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) (int, error) {
		return func(pos []string, stdout, _ io.Writer) (int, error) {
			if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
				return 0, err
			}
			fmt.Fprintln(stdout, versionText())
			return 0, nil
		}
	},
}

// versionText is "proctor VERSION [REVISION[+modified] TIME] GOVERSION",
// from the running binary's build information.
func versionText() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "proctor (unknown version: no build information)"
	}
	return buildVersion(bi)
}

// buildVersion is versionText for bi. A development build without a VCS
// revision says why there is none, rather than a bare "(devel)".
func buildVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	parts := []string{"proctor", v}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if rev != "" {
		parts = append(parts, rev[:min(len(rev), 12)]+modified)
	}
	if at != "" {
		parts = append(parts, at)
	}
	text := strings.Join(append(parts, bi.GoVersion), " ")
	if rev == "" && v == "(devel)" {
		// go run, go test, -buildvcs=false, a copy without .git, or a git
		// worktree (whose .git is a file, which the go command does not
		// take for a checkout) record no revision.
		text += " (no VCS revision recorded: build with 'go build' or 'go install' in a git checkout, not a worktree, without -buildvcs=false; or 'go install github.com/proctor-evals/proctor/cmd/proctor@VERSION')"
	}
	return text
}
