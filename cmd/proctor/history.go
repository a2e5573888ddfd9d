package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/proctor-evals/proctor/history"
	"github.com/proctor-evals/proctor/history/catalog"
	"github.com/proctor-evals/proctor/internal/numfmt"
)

// exitDrift is history -fail-on-drift's status when a run drifted.
const exitDrift = 4

var historyCommand = &command{
	name:  "history",
	args:  "DIR",
	short: "trends of the runs in a directory, and drift against baselines",
	long: `
History brings the catalog of the runs in DIR up to date
(DIR/catalog/runs.parquet and tags.parquet: only logs added or changed since
the last update are read; logs still being written are skipped) and prints,
for each eval, its runs in start order: pass rate with its interval,
episodes, cost, median latency and wall time, and where the harness, judge,
sandbox or dataset fingerprint changed (the runs' manifests). -tag adds the
pass rate of each value of a tag.

It then checks the latest run of each eval (the last -last runs) for drift:
the paired comparison with its baseline (the previous run of the eval on the
same dataset identity, or the run -baseline names) over the samples both
scored, the overall change tested at alpha/2 and each tag value's with Holm
at alpha/2. A significant change is a DRIFT line; when the harness and judge
versions are the same it is labelled as drift outside the agent (the model
provider, the environment). With -fail-on-drift the command exits with
status 4 when a run drifted, for a cron job: -fail-on-drift=drop (what
-fail-on-drift alone means) on a significant drop, =outside on a
significant change with the agent unchanged (drift outside it, either
way), =any on any significant change.

Every pass rate is shown with its worst case when episodes errored or were
unscored (them as failures, as passes), and the drift check is on the
worst case, as compare's gate is: a run whose judge broke is a drop, and a
judge stage that gave no verdict where the baseline's did is named before
drift outside the agent. The shard logs of one run are one run (listed
with their count); runs that share a run ID (shards derive theirs from
what the run is) are told apart by their start, ID@START, which -baseline
takes. Runs that share no scored sample are "not compared", never "no
drift".`,
	flags: func(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) (int, error) {
		evalName := fs.String("eval", "", "only the eval `name`d")
		tag := fs.String("tag", "", "print the pass rate of each value of `tag`")
		baseline := fs.String("baseline", "", "compare with this baseline `run` (a run ID or a log) instead of the previous run")
		last := fs.Int("last", 1, "check the last `n` runs of each eval for drift")
		alpha := fs.Float64("alpha", history.DefaultAlpha, "family-wise error rate of a drift `alert`")
		failOn := &driftAlert{}
		fs.Var(failOn, "fail-on-drift", "exit with status 4 when a run drifted: on a `drop` (alone), outside the agent (outside) or any change (any)")
		return func(pos []string, stdout, stderr io.Writer) (int, error) {
			if err := wantArgs(pos, 1, 1, "a runs DIR"); err != nil {
				return 0, err
			}
			if !(*alpha > 0 && *alpha < 1) {
				return 0, usageError("-alpha: want a rate in (0, 1)")
			}
			res, err := catalog.Update(pos[0])
			if err != nil {
				return 0, err
			}
			for _, b := range res.Busy {
				fmt.Fprintf(stderr, "warning: %s is being written: skipped until it is finished\n", b)
			}
			for _, err := range res.Errors {
				fmt.Fprintf(stderr, "warning: skipped: %v\n", err)
			}
			if res.Unsaved != nil {
				fmt.Fprintf(stderr, "warning: the catalog was not saved (read again next time): %v\n", res.Unsaved)
			}
			drifted, shown := false, 0
			for eval, runs := range history.Evals(history.Group(res.Runs)) {
				if *evalName != "" && eval != *evalName && runs[0].Eval != *evalName { // an eval names all its variants' trends
					continue
				}
				if shown > 0 {
					fmt.Fprintln(stdout)
				}
				shown++
				writeHistory(stdout, eval, runs, *tag)
				pinned := -1
				if *baseline != "" {
					if pinned = history.Find(runs, *baseline); pinned < 0 {
						fmt.Fprintf(stdout, "baseline %s: not a run of %s\n", *baseline, eval)
						continue
					}
				}
				for i := max(0, len(runs)-*last); i < len(runs); i++ {
					base := pinned
					if base < 0 {
						base = history.Baseline(runs, i)
					}
					if base < 0 || base == i {
						fmt.Fprintf(stdout, "no baseline for run %s: no earlier run of %s on the same dataset\n", runs[i].RunID, eval)
						continue
					}
					d, err := history.CompareLogs(runs[base], runs[i], *alpha)
					if err != nil {
						fmt.Fprintf(stdout, "cannot check run %s for drift: %v\n", runs[i].RunID, err)
						continue
					}
					fmt.Fprintln(stdout, d)
					drifted = drifted || failOn.on(d)
				}
			}
			if *evalName != "" && shown == 0 {
				return 0, fmt.Errorf("no runs of eval %q in %s", *evalName, pos[0])
			}
			if drifted {
				return exitDrift, nil
			}
			return 0, nil
		}
	},
}

// writeHistory prints an eval's runs as a table, oldest first.
func writeHistory(w io.Writer, eval string, runs []*history.Run, tag string) {
	fmt.Fprintf(w, "%s: %d runs\n", eval, len(runs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "started\trun\tpass rate\t95% CI\tepisodes\tcost\tp50\twall\tchanged"
	if tag != "" {
		head += "\t" + tag
	}
	fmt.Fprintln(tw, head)
	for i, r := range runs {
		var changed []string
		if i > 0 {
			changed = history.Changes(runs[i-1], r)
		}
		ci := ""
		if !math.IsNaN(r.Lo) {
			ci = fmt.Sprintf("[%s, %s]", numfmt.Pct(r.Lo), numfmt.Pct(r.Hi))
		}
		id := r.RunID
		if len(r.Parts) > 0 {
			id += fmt.Sprintf(" (%d shards)", len(r.Parts))
		}
		lower, upper := r.WorstCase()
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t$%.4f\t%s\t%s\t%s", r.Start.UTC().Format("2006-01-02 15:04Z"), id,
			withWorstCase(r.PassRate, r.Errored+r.Unscored, lower, upper), ci, r.Episodes, r.CostUSD, numfmt.MS(r.LatencyP50MS), r.Wall.Round(time.Second), strings.Join(changed, ","))
		if tag != "" {
			var vals []string
			for _, t := range r.Tags {
				if t.Tag == tag {
					lower, upper := t.WorstCase()
					vals = append(vals, t.Value+" "+withWorstCase(t.PassRate, t.Errored+t.Unscored, lower, upper))
				}
			}
			line += "\t" + strings.Join(vals, "  ")
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// withWorstCase formats a pass rate with its worst-case range when
// episodes had no verdict: "100.0% (worst case 60.0%–100.0%)".
func withWorstCase(rate float64, noVerdict int, lower, upper float64) string {
	if noVerdict == 0 {
		return numfmt.Pct(rate)
	}
	return fmt.Sprintf("%s (worst case %s–%s)", numfmt.Pct(rate), numfmt.Pct(lower), numfmt.Pct(upper))
}

// driftAlert is -fail-on-drift: which drift fails the command.
type driftAlert struct{ mode string }

func (a *driftAlert) String() string   { return a.mode }
func (a *driftAlert) IsBoolFlag() bool { return true }

func (a *driftAlert) Set(s string) error {
	switch s {
	case "true":
		s = "drop"
	case "false":
		s = ""
	case "drop", "outside", "any":
	default:
		return fmt.Errorf("want drop, outside or any, got %q", s)
	}
	a.mode = s
	return nil
}

// on reports whether d fails the command.
func (a *driftAlert) on(d *history.Drift) bool {
	switch a.mode {
	case "drop":
		return d.Drop
	case "outside":
		return d.Alert && d.Outside
	case "any":
		return d.Alert
	}
	return false
}
