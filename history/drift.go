package history

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/numfmt"
	"github.com/proctor-evals/proctor/stats"
)

// DefaultAlpha is the family-wise error rate of a drift alert: the chance
// that a run no different from its baseline raises one.
const DefaultAlpha = 0.05

// Test is one hypothesis of a drift check: the paired pass-rate
// difference over all the shared samples ("all"), or within a tag value
// ("difficulty=hard").
type Test struct {
	Name        string
	Diff        stats.Difference // head − base; Diff.P unadjusted
	AdjP        float64          // Diff.P adjusted for the check's other tests (see Drift)
	Significant bool             // AdjP ≤ alpha
}

// Drift is a run compared with its baseline: report.Compare's paired
// comparison over the samples both scored, a test of the overall
// difference and tests of every tag value's, adjusted so that an unchanged
// run raises an alert with probability at most alpha (the family-wise
// error rate, whatever the tests' dependence).
//
// The overall test gets alpha/2 and the tag values share the other half
// by Holm's procedure (Bonferroni between the two families, Holm within
// the tags'): a flat Holm over all of them would test the overall change,
// the question a history asks first, at alpha/(1 + values), and a dataset
// with fifteen tag values would hardly ever see a 3-point drop. Without
// tags the overall test gets all of alpha.
type Drift struct {
	Base, Head *Run
	Comparison *report.Comparison
	Tests      []Test // "all" first, then the tag values in the comparison's order
	Alpha      float64
	// Alert reports a significant change: some test's Holm-adjusted
	// p-value is at most Alpha.
	Alert bool
	// Drop reports an alert of which some significant test fell: the
	// run did worse than its baseline (overall or in a tag value).
	Drop bool
	// Outside reports an alert whose runs share their harness and judge
	// versions and whose judge gave its verdicts: what changed is outside
	// the agent (the model provider, the environment). It needs both
	// versioned: unversioned components cannot tell the two apart, and
	// Cause says so; a judge stage that produced no verdict where the
	// baseline's did is named first. A change of the sandbox's resources
	// (limits, image digest, or those the episodes ran with: an OOM retry
	// with more memory) is named in Cause as a possible cause.
	Outside bool
	Cause   string
}

// Compare checks head against its baseline base: the runs' rows and
// their reports (which must hold their per-sample results: reports from a
// log or a run, not decoded from JSON). alpha ≤ 0 means DefaultAlpha.
func Compare(base, head *Run, b, h *report.Report, alpha float64) *Drift {
	if alpha <= 0 {
		alpha = DefaultAlpha
	}
	c := report.Compare(b, h, &report.CompareOptions{Level: 1 - alpha, MaxFlips: 20})
	d := &Drift{Base: base, Head: head, Comparison: c, Alpha: alpha}
	if d.Shared() == 0 {
		d.Tests = append(d.Tests, Test{Name: "all", Diff: c.PassRate, AdjP: math.NaN()})
		return d // nothing compared: not "no drift" (String says so)
	}
	if c.WorstCase != nil {
		// An error is not evidence the run did as well: as compare's gate,
		// the overall test is on the worst case (the head's errored and
		// unscored episodes as failures, the base's as passes).
		d.Tests = append(d.Tests, Test{Name: "all (worst case)", Diff: c.WorstCase.PassRate})
	} else {
		d.Tests = append(d.Tests, Test{Name: "all", Diff: c.PassRate})
	}
	for _, t := range c.ByTag {
		d.Tests = append(d.Tests, Test{Name: t.Tag + "=" + t.Value, Diff: t.PassRate})
	}
	families := 1.0
	if len(d.Tests) > 1 {
		families = 2
	}
	p := make([]float64, len(d.Tests))
	for i, t := range d.Tests {
		p[i] = t.Diff.P
		if !(p[i] >= 0 && p[i] <= 1) {
			p[i] = math.NaN() // a test that could not be run (fewer than two pairs)
		}
	}
	adj := append([]float64{p[0]}, stats.Holm(p[1:])...)
	for i := range d.Tests {
		d.Tests[i].AdjP = math.Min(1, families*adj[i]) // NaN stays NaN
		d.Tests[i].Significant = d.Tests[i].AdjP <= alpha
		d.Alert = d.Alert || d.Tests[i].Significant
		d.Drop = d.Drop || d.Tests[i].Significant && d.Tests[i].Diff.Mean < 0
	}
	if d.Alert {
		d.Outside, d.Cause = cause(base, head)
		if r := resourcesChanged(withEpisodeResources(base, b), withEpisodeResources(head, h)); r != "" {
			d.Cause += "; the environment changed: " + r + " (a possible cause)"
		}
		if broken := brokenStages(b, h); broken != "" {
			if !d.Outside {
				broken += "; " + d.Cause // the agent changed too, or is unversioned
			}
			d.Outside, d.Cause = false, broken
		}
	}
	return d
}

// withEpisodeResources is r with the episodes' resources of its report
// when its row has none (a row built by hand, or before they were kept).
func withEpisodeResources(r *Run, rep *report.Report) *Run {
	if r.EpisodeResources != "" || len(rep.EpisodeResources) == 0 {
		return r
	}
	c := *r
	c.EpisodeResources = strings.Join(rep.EpisodeResourceSet(), "; ")
	return &c
}

// brokenStages names the stages (a judge's first) from which the head
// has more errored or unscored episodes than its baseline: a broken
// grader, not the world outside the agent.
func brokenStages(b, h *report.Report) string {
	before := map[string]int{}
	for _, s := range b.ErrorSources {
		before[s.Source] += s.Count
	}
	now := map[string]int{}
	first := map[string]string{}
	var order []string
	for _, s := range h.ErrorSources {
		if now[s.Source] == 0 {
			order = append(order, s.Source)
			first[s.Source] = s.First
		}
		now[s.Source] += s.Count
	}
	slices.SortStableFunc(order, func(x, y string) int {
		return cmp.Compare(judgeFirst(x), judgeFirst(y))
	})
	var parts []string
	for _, src := range order {
		if n := now[src] - before[src]; n > 0 {
			name := cmp.Or(src, "unknown stage")
			parts = append(parts, fmt.Sprintf("%s gave no verdict on %d more episodes than the baseline (%s)", name, n, firstLine(first[src])))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "a stage broke: " + strings.Join(parts, "; ")
}

func judgeFirst(source string) int {
	if source == "judge" || strings.HasPrefix(source, "judge/") {
		return 0
	}
	return 1
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Shared is the number of samples compared: those both runs recorded
// (in the worst case) or scored.
func (d *Drift) Shared() int {
	if w := d.Comparison.WorstCase; w != nil {
		return w.PassRate.N
	}
	return d.Comparison.Paired
}

// cause says what the change may be due to, from the runs' fingerprints.
func cause(base, head *Run) (outside bool, why string) {
	var changed []string
	for _, v := range [...]struct{ what, a, b string }{
		{"harness", base.HarnessVersion, head.HarnessVersion},
		{"judge", base.JudgeVersion, head.JudgeVersion},
		{"sandbox", base.SandboxVersion, head.SandboxVersion},
	} {
		if v.a != v.b {
			changed = append(changed, fmt.Sprintf("%s %q → %q", v.what, v.a, v.b))
		}
	}
	switch {
	case base.HarnessVersion != head.HarnessVersion || base.JudgeVersion != head.JudgeVersion:
		return false, "the agent changed: " + strings.Join(changed, ", ")
	case base.HarnessVersion == "" || base.JudgeVersion == "":
		return false, "harness or judge unversioned (Eval.Versions): a change of the agent cannot be told from drift outside it"
	}
	why = "harness and judge unchanged: drift outside the agent (the model provider, the environment)"
	if len(changed) > 0 {
		why += "; " + strings.Join(changed, ", ")
	}
	return true, why
}

// Significant lists the tests that are.
func (d *Drift) Significant() []Test {
	var s []Test
	for _, t := range d.Tests {
		if t.Significant {
			s = append(s, t)
		}
	}
	return s
}

// String is the check in one line, as reports print it: "DRIFT" and the
// cause for an alert.
func (d *Drift) String() string {
	var b strings.Builder
	if d.Shared() == 0 {
		return fmt.Sprintf("not compared %s: run %s and baseline %s share no scored sample", d.Head.Eval, d.Head.RunID, d.Base.RunID)
	}
	if d.Alert {
		b.WriteString("DRIFT ")
	} else {
		b.WriteString("no drift ")
	}
	all := d.Tests[0]
	what := ""
	if all.Name != "all" {
		what = " in the worst case"
	}
	fmt.Fprintf(&b, "%s: run %s against baseline %s over %d shared samples%s: %s [%s, %s], adjusted p %s",
		d.Head.Eval, d.Head.RunID, d.Base.RunID, d.Shared(), what,
		numfmt.Pts(all.Diff.Mean), numfmt.Pts(all.Diff.Lo), numfmt.Pts(all.Diff.Hi), numfmt.P(all.AdjP))
	if d.Alert {
		var names []string
		for _, t := range d.Significant() {
			names = append(names, fmt.Sprintf("%s %s", t.Name, numfmt.Pts(t.Diff.Mean)))
		}
		fmt.Fprintf(&b, "; significant: %s; %s", strings.Join(names, ", "), d.Cause)
	}
	return b.String()
}

// CompareLogs is Compare over the runs' logs, read again (all the shard
// logs of a run Group joined): the catalog keeps no per-sample results.
func CompareLogs(base, head *Run, alpha float64) (*Drift, error) {
	opts := &report.Options{Resamples: -1} // the comparison needs no bootstrap
	b, err := ReadReport(base, opts)
	if err != nil {
		return nil, err
	}
	h, err := ReadReport(head, opts)
	if err != nil {
		return nil, err
	}
	return Compare(base, head, b, h, alpha), nil
}
