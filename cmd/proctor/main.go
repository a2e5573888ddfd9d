// Command proctor reads the results of evaluation runs: a run's JSONL log
// (the source of truth) or a directory of Parquet files exported from one.
//
//	proctor report [-json | -markdown] RUN
//	proctor compare [-json | -markdown] [-margin M] [-fail-on-regression] BASE HEAD
//	proctor export -parquet DIR LOG
//	proctor trace [-json] LOG SAMPLE [EPOCH]
//
// RUN, BASE and HEAD are a log (.jsonl) or a Parquet file or directory.
// Exit status: 0 on success, 1 on an error, 2 on bad usage, 3 when
// -fail-on-regression is given and the head regressed significantly or is
// not non-inferior within the margin.
//
// Install with: go install github.com/proctor-evals/proctor/cmd/proctor@latest
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/sink/parquet"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  proctor report [-json | -markdown] RUN
  proctor compare [-json | -markdown] [-margin M] [-fail-on-regression] BASE HEAD
  proctor export -parquet DIR LOG
  proctor trace [-json] LOG SAMPLE [EPOCH]

RUN, BASE and HEAD are a JSONL log or a Parquet file or directory.
`

// errUsage marks a command line that does not parse.
var errUsage = errors.New("bad usage")

// exitRegression is the status of a compare that found a regression.
const exitRegression = 3

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmds := map[string]func([]string, io.Writer, io.Writer) (int, error){
		"report": reportCmd, "compare": compare, "export": export, "trace": trace,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "proctor: unknown command %q\n%s", args[0], usage)
		return 2
	}
	code, err := cmd(args[1:], stdout, stderr)
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "proctor %s: %v\n%s", args[0], err, usage)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "proctor %s: %v\n", args[0], err)
		return 1
	}
	return code
}

func flags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses flags that may come before or after the positional
// arguments, and checks their count.
func parse(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) < min || len(pos) > max {
		return nil, fmt.Errorf("%w: want %d to %d arguments, got %d", errUsage, min, max, len(pos))
	}
	return pos, nil
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
		seq = parquet.Records(path)
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

func reportOf(path string, stderr io.Writer) (*report.Report, error) {
	seq, err := records(path, stderr)
	if err != nil {
		return nil, err
	}
	return report.FromRecords(seq, nil)
}

func reportCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := flags("report", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	asMarkdown := fs.Bool("markdown", false, "print Markdown (for CI job summaries)")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return 0, err
	}
	rep, err := reportOf(pos[0], stderr)
	if err != nil {
		return 0, err
	}
	if rep.Episodes == 0 {
		fmt.Fprintf(stderr, "warning: %s holds no records\n", pos[0])
	}
	return 0, write(stdout, rep, *asJSON, *asMarkdown)
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

func compare(args []string, stdout, stderr io.Writer) (int, error) {
	fs := flags("compare", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	asMarkdown := fs.Bool("markdown", false, "print Markdown")
	margin := fs.Float64("margin", 0, "non-inferiority margin on the pass rate (e.g. 0.02 for two points)")
	failOn := fs.Bool("fail-on-regression", false, "exit with status 3 when the head is not non-inferior")
	level := fs.Float64("level", 0.95, "confidence level")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return 0, err
	}
	base, err := reportOf(pos[0], stderr)
	if err != nil {
		return 0, err
	}
	head, err := reportOf(pos[1], stderr)
	if err != nil {
		return 0, err
	}
	c := report.Compare(base, head, &report.CompareOptions{Margin: *margin, Level: *level})
	if err := write(stdout, c, *asJSON, *asMarkdown); err != nil {
		return 0, err
	}
	if *failOn && (c.Regressed || !c.NonInferior) {
		return exitRegression, nil
	}
	return 0, nil
}

func export(args []string, stdout, stderr io.Writer) (int, error) {
	fs := flags("export", stderr)
	dir := fs.String("parquet", "", "directory to write Parquet files to")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return 0, err
	}
	if *dir == "" {
		return 0, fmt.Errorf("%w: -parquet DIR is required", errUsage)
	}
	if _, err := os.Stat(pos[0]); err != nil {
		return 0, err
	}
	seq, err := records(pos[0], stderr)
	if err != nil {
		return 0, err
	}
	w, err := parquet.New(*dir)
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	n := 0
	for r, err := range seq {
		if err == nil {
			err = w.Write(ctx, r)
		}
		if err != nil {
			w.Close(ctx)
			return 0, err
		}
		n++
	}
	if err := w.Close(ctx); err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "exported %d records to %s\n", n, *dir)
	return 0, nil
}

func trace(args []string, stdout, stderr io.Writer) (int, error) {
	fs := flags("trace", stderr)
	asJSON := fs.Bool("json", false, "print the transcript as JSON")
	pos, err := parse(fs, args, 2, 3)
	if err != nil {
		return 0, err
	}
	logPath, sample, epoch := pos[0], pos[1], -1
	if len(pos) == 3 {
		if epoch, err = strconv.Atoi(pos[2]); err != nil || epoch < 0 {
			return 0, fmt.Errorf("%w: EPOCH must be a number ≥ 0, got %q", errUsage, pos[2])
		}
	}
	seq, err := records(logPath, stderr)
	if err != nil {
		return 0, err
	}
	var found []sink.Record
	for r, err := range seq {
		if err != nil {
			return 0, err
		}
		if r.SampleID == sample && (epoch < 0 || r.Epoch == epoch) {
			found = append(found, r)
		}
	}
	if len(found) == 0 {
		return 0, fmt.Errorf("no episode of sample %q%s in %s", sample, epochText(epoch), logPath)
	}
	for _, r := range found {
		if err := printTrace(stdout, r, filepath.Dir(logPath), *asJSON); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

func epochText(epoch int) string {
	if epoch < 0 {
		return ""
	}
	return fmt.Sprintf(" epoch %d", epoch)
}

func printTrace(w io.Writer, r sink.Record, dir string, asJSON bool) error {
	var tr *eval.Trace
	if r.Trace != "" {
		var err error
		if tr, err = eval.ReadTrace(r.Trace, dir); err != nil {
			return err
		}
	}
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{"record": r, "trace": tr})
	}
	fmt.Fprintf(w, "== %s epoch %d (attempt %d): %s", r.SampleID, r.Epoch, r.Attempt, r.Status)
	if r.ErrorKind != "" {
		fmt.Fprintf(w, "/%s", r.ErrorKind)
	}
	fmt.Fprintf(w, "  score %.3g  %.1f ms  %d+%d tokens  $%.4f\n", r.Score, r.DurationMS, r.InputTokens, r.OutputTokens, r.CostUSD)
	if r.Reason != "" {
		fmt.Fprintf(w, "reason: %s\n", r.Reason)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
	if tr == nil {
		fmt.Fprintln(w, "(no transcript recorded)")
		return nil
	}
	for i, ev := range tr.Events {
		at := ev.Time.Sub(r.StartedAt).Round(time.Microsecond)
		fmt.Fprintf(w, "%3d  +%-10v %-8s %s", i, at, ev.Kind, ev.Name)
		if ev.Duration > 0 {
			fmt.Fprintf(w, "  (%v)", ev.Duration.Round(time.Microsecond))
		}
		if ev.Usage.InputTokens+ev.Usage.OutputTokens > 0 || ev.Usage.CostUSD > 0 {
			fmt.Fprintf(w, "  %d+%d tokens $%.4f", ev.Usage.InputTokens, ev.Usage.OutputTokens, ev.Usage.CostUSD)
		}
		fmt.Fprintln(w)
		for _, part := range []struct {
			name string
			v    json.RawMessage
		}{{"in", ev.Input}, {"out", ev.Output}} {
			if len(part.v) > 0 {
				fmt.Fprintf(w, "       %s: %s\n", part.name, indent(string(part.v)))
			}
		}
		if ev.Error != "" {
			fmt.Fprintf(w, "       error: %s\n", ev.Error)
		}
	}
	return nil
}

func indent(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		if str, ok := v.(string); ok {
			s = str
		}
	}
	return strings.ReplaceAll(s, "\n", "\n            ")
}
