package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/harness/atif"
	"github.com/proctor-evals/proctor/internal/numfmt"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

var traceCommand = &command{
	name:  "trace",
	args:  "LOG SAMPLE [EPOCH] | [LOG] PATH#OFFSET",
	short: "print an episode's record and transcript",
	long: `
Trace prints the record and the transcript (model calls, tool calls,
commands, with their timing and usage) of the episodes of SAMPLE in LOG,
or of one epoch when EPOCH is given.

It also takes a record's transcript link, PATH#OFFSET, as the trace column of a
report, a log or a Parquet file shows it. A relative PATH is resolved
against LOG's directory when LOG is given (records link their transcripts
relative to the log, so that a moved runs directory keeps them), and
against the current directory when the link is given alone.

With -format atif it prints each transcript as an ATIF trajectory (the
Agent Trajectory Interchange Format of Harbor's RFC 0001), one JSON
document per episode.`,
	flags: func(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) (int, error) {
		asJSON := fs.Bool("json", false, "print the record and transcript as JSON")
		format := fs.String("format", "text", "`format`: text, json (as -json) or atif (each transcript as an ATIF trajectory)")
		return func(pos []string, stdout, stderr io.Writer) (int, error) {
			switch *format {
			case "text":
			case "json":
				*asJSON = true
			case "atif":
				*asJSON = false
				stdout = atifWriter{stdout}
			default:
				return 0, usageError("-format must be text, json or atif, got %q", *format)
			}
			if err := wantArgs(pos, 1, 3, "LOG SAMPLE [EPOCH], or [LOG] PATH#OFFSET"); err != nil {
				return 0, err
			}
			if len(pos) == 1 {
				if _, err := jsonl.ParseTranscriptLink(pos[0]); err != nil {
					return 0, usageError("%q is not a transcript link (PATH#OFFSET); with a LOG, give a SAMPLE", pos[0])
				}
				return 0, printLink(stdout, pos[0], ".", *asJSON)
			}
			logPath, sample, epoch := pos[0], pos[1], -1
			if len(pos) == 3 {
				var err error
				if epoch, err = strconv.Atoi(pos[2]); err != nil || epoch < 0 {
					return 0, usageError("EPOCH must be a number ≥ 0, got %q", pos[2])
				}
			}
			seq, err := records(logPath, stderr)
			if err != nil {
				return 0, err
			}
			var found, linked []sink.Record
			for r, err := range seq {
				if err != nil {
					return 0, err
				}
				if r.SampleID == sample && (epoch < 0 || r.Epoch == epoch) {
					found = append(found, r)
				}
				if r.Transcript == sample && epoch < 0 {
					linked = append(linked, r)
				}
			}
			dir := filepath.Dir(logPath)
			if len(found) == 0 {
				found = linked
			}
			if len(found) == 0 {
				if _, err := jsonl.ParseTranscriptLink(sample); err == nil && epoch < 0 {
					return 0, printLink(stdout, sample, dir, *asJSON)
				}
				return 0, fmt.Errorf("no episode of sample %q%s in %s", sample, epochText(epoch), logPath)
			}
			for _, r := range found {
				if err := printTranscript(stdout, r, dir, *asJSON); err != nil {
					return 0, err
				}
			}
			return 0, nil
		}
	},
}

type transcript = harness.Transcript

// readTranscript resolves a transcript link, a relative path against dir. (The
// engine's eval.ReadTranscript does the same; the command does not link the
// engine for it.)
func readTranscript(link, dir string) (*transcript, error) {
	var t transcript
	if err := jsonl.ReadTranscript(link, dir, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// printLink prints the transcript a link names, without its record.
func printLink(w io.Writer, link, dir string, asJSON bool) error {
	tr, err := readTranscript(link, dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && dir != "." {
			return fmt.Errorf("%w (a relative link is resolved against the log's directory, %s)", err, dir)
		}
		return err
	}
	r := sink.Record{RunID: tr.RunID, SampleID: tr.SampleID, Epoch: tr.Epoch, Attempt: tr.Attempt, Transcript: link}
	if a, ok := w.(atifWriter); ok {
		return a.write(tr)
	}
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{"trace": tr})
	}
	if len(tr.Events) > 0 {
		r.StartedAt = tr.Events[0].Time
	}
	fmt.Fprintf(w, "== %s epoch %d (attempt %d), run %s\n", r.SampleID, r.Epoch, r.Attempt, r.RunID)
	printEvents(w, r, tr)
	return nil
}

// atifWriter prints transcripts as ATIF trajectories.
type atifWriter struct{ io.Writer }

func (a atifWriter) write(tr *transcript) error {
	t, err := atif.Export(tr)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(a.Writer)
	enc.SetIndent("", "  ")
	return enc.Encode(t)
}

func epochText(epoch int) string {
	if epoch < 0 {
		return ""
	}
	return fmt.Sprintf(" epoch %d", epoch)
}

// printTranscript prints r and its transcript, whose link is resolved against
// dir (the log's directory).
func printTranscript(w io.Writer, r sink.Record, dir string, asJSON bool) error {
	var tr *transcript
	if r.Transcript != "" && r.Transcript != jsonl.CompactedLink {
		var err error
		if tr, err = readTranscript(r.Transcript, dir); err != nil {
			return err
		}
		if tr.SampleID != r.SampleID || tr.Epoch != r.Epoch {
			// A trace store deleted or cut, then appended to, holds
			// another episode where this record's link points.
			return fmt.Errorf("%s: the transcript at %s is %q epoch %d's, not this record's (%q epoch %d): the transcript store was replaced or cut since",
				r.SampleID, r.Transcript, tr.SampleID, tr.Epoch, r.SampleID, r.Epoch)
		}
	}
	if a, ok := w.(atifWriter); ok {
		if tr == nil {
			return fmt.Errorf("%s epoch %d: no transcript to export (compacted, or none recorded)", r.SampleID, r.Epoch)
		}
		return a.write(tr)
	}
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{"record": r, "trace": tr})
	}
	fmt.Fprintf(w, "== %s epoch %d (attempt %d): %s", r.SampleID, r.Epoch, r.Attempt, r.Status)
	if r.ErrorKind != "" {
		fmt.Fprintf(w, "/%s", r.ErrorKind)
	}
	fmt.Fprintf(w, "  score %.3g  %.1f ms  %d+%d tokens  %s\n", r.Score, r.DurationMS, r.InputTokens, r.OutputTokens, numfmt.USD(r.CostUSD))
	if r.Reason != "" {
		fmt.Fprintf(w, "reason: %s\n", r.Reason)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
	if r.Transcript == jsonl.CompactedLink {
		fmt.Fprintln(w, "(transcript compacted: proctor compact dropped it; the record is kept)")
		return nil
	}
	if tr == nil {
		fmt.Fprintln(w, "(no transcript recorded)")
		return nil
	}
	printEvents(w, r, tr)
	return nil
}

// printEvents prints a transcript's events, with times relative to the
// episode's start.
func printEvents(w io.Writer, r sink.Record, tr *transcript) {
	for i, ev := range tr.Events {
		at := ev.Time.Sub(r.StartedAt).Round(time.Microsecond)
		fmt.Fprintf(w, "%3d  +%-10v %-8s %s", i, at, ev.Kind, ev.Name)
		if ev.Duration > 0 {
			fmt.Fprintf(w, "  (%v)", ev.Duration.Round(time.Microsecond))
		}
		if ev.Usage.InputTokens+ev.Usage.OutputTokens > 0 || ev.Usage.CostUSD > 0 {
			fmt.Fprintf(w, "  %d+%d tokens %s", ev.Usage.InputTokens, ev.Usage.OutputTokens, numfmt.USD(ev.Usage.CostUSD))
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
