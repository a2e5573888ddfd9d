package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/proctor-evals/proctor/internal/numfmt"
	"github.com/proctor-evals/proctor/stats"
	"github.com/proctor-evals/proctor/usage"
)

// WriteText prints the report as a readable table.
func (r *Report) WriteText(w io.Writer) error {
	return r.write(w, false)
}

// WriteMarkdown prints the report as Markdown, for CI job summaries.
func (r *Report) WriteMarkdown(w io.Writer) error {
	return r.write(w, true)
}

// String returns the text form.
func (r *Report) String() string {
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}

// SummaryRow is a line of the report's first table: what the text report,
// the viewer and the HTML report show first, in this order.
type SummaryRow struct {
	Key   string // stable, for pages and tests: "pass-rate", "latency"…
	Label string
	Value string
}

// Summary returns the report's first table: counts, the pass rate with
// its interval, pass@k, latency, usage and how the run ended.
func (r *Report) Summary() []SummaryRow {
	var rows []SummaryRow
	row := func(key, label, value string) { rows = append(rows, SummaryRow{key, label, value}) }
	row("episodes", "samples × epochs", r.episodes())
	row("passed-failed", "passed / failed", fmt.Sprintf("%d / %d", r.Passed, r.Failed))
	row("errored-unscored", "errored / unscored", fmt.Sprintf("%d / %d (excluded from the pass rate)", r.Errored, r.Unscored))
	if r.NotSampled > 0 {
		row("not-sampled", "not sampled", fmt.Sprintf("%d (asymmetric sampling: weight 0 in the weighted pass rate)", r.NotSampled))
	}
	if r.Excluded > 0 {
		row("excluded", "excluded", fmt.Sprintf("%d records for samples not in the dataset (excluded)", r.Excluded))
	}
	if r.Resumed > 0 {
		row("resumed", "resumed", fmt.Sprintf("%d episodes from earlier runs of this log (not run again)", r.Resumed))
	}
	if r.Reused > 0 {
		row("reused", "reused", fmt.Sprintf("%d episodes (earlier results reused, not run again)", r.Reused))
	}
	if r.Rejudged > 0 {
		row("rejudged", "rejudged", fmt.Sprintf("%d episodes (earlier outputs judged again, the agent not run)", r.Rejudged))
	}
	if r.Cancelled > 0 {
		row("cancelled", "cancelled", fmt.Sprintf("%d (not recorded; they run on resume)", r.Cancelled))
	}
	rate := "n/a: no scored episodes"
	switch {
	case r.Leaderboard != nil:
		rate = fmt.Sprintf("by variant (%d variants, not pooled): see the leaderboard", len(r.Leaderboard.Variants))
	case r.Passed+r.Failed > 0:
		rate = fmt.Sprintf("%s  %.0f%% CI [%s, %s] %s", pct(r.PassRate), r.Interval.Level*100, pct(r.Interval.Lo), pct(r.Interval.Hi), r.Interval.Method)
		if r.Weighted {
			rate += ", inverse-probability weighted"
		}
	}
	row("pass-rate", "pass rate", rate)
	if wc := r.WorstCase; wc != nil {
		row("worst-case", "worst case", fmt.Sprintf("%s [%s, %s] with the %d errored or unscored as failures, %s [%s, %s] as passes",
			pct(wc.Lower.PassRate), pct(wc.Lower.Interval.Lo), pct(wc.Lower.Interval.Hi), wc.NoVerdict,
			pct(wc.Upper.PassRate), pct(wc.Upper.Interval.Lo), pct(wc.Upper.Interval.Hi)))
	}
	if r.Sequential != nil {
		rows = append(rows, r.Sequential.summary()...)
	}
	if nf := r.NoiseFloor; nf != nil && !math.IsNaN(nf.HalfWidth) {
		row("noise-floor", "noise floor", fmt.Sprintf("±%.1f pts: two runs of this agent, %.3g epochs each, differ by less %g%% of the time (within-sample spread across epochs)",
			100*nf.HalfWidth, nf.EpochsA, 100*nf.Level))
	}
	if r.Bootstrap != nil {
		row("bootstrap", "bootstrap CI", fmt.Sprintf("[%s, %s] (clusters resampled)", pct(r.Bootstrap.Lo), pct(r.Bootstrap.Hi)))
	}
	if len(r.PassAtK) > 1 {
		var at, hat []string
		for i := range r.PassAtK {
			at = append(at, fmt.Sprintf("@%d %s", r.PassAtK[i].K, pct(r.PassAtK[i].Value)))
			hat = append(hat, fmt.Sprintf("^%d %s", r.PassHatK[i].K, pct(r.PassHatK[i].Value)))
		}
		row("pass-at-k", "pass@k", strings.Join(at, "  "))
		row("pass-hat-k", "pass^k", strings.Join(hat, "  "))
	}
	row("latency", "latency", fmt.Sprintf("p50 %s  p95 %s  max %s", ms(r.Latency.P50MS), ms(r.Latency.P95MS), ms(r.Latency.MaxMS)))
	if r.Usage != (usage.Usage{}) {
		row("usage", "usage", fmt.Sprintf("%d input + %d output tokens, %s", r.Usage.InputTokens, r.Usage.OutputTokens, usd(r.Usage.CostUSD)))
	}
	if j, s := r.JudgeUsage, r.SimulatorUsage; s != (usage.Usage{}) {
		row("usage-by-role", "by role", fmt.Sprintf("agent %d tokens $%.4f, simulator %d tokens $%.4f, judge %d tokens $%.4f",
			r.Usage.Tokens()-j.Tokens()-s.Tokens(), r.Usage.CostUSD-j.CostUSD-s.CostUSD, s.Tokens(), s.CostUSD, j.Tokens(), j.CostUSD))
	} else if j != (usage.Usage{}) {
		row("usage-by-role", "by role", fmt.Sprintf("agent %d tokens $%.4f, judge %d tokens $%.4f",
			r.Usage.Tokens()-j.Tokens(), r.Usage.CostUSD-j.CostUSD, j.Tokens(), j.CostUSD))
	}
	if r.ReusedUsage != (usage.Usage{}) {
		u := r.ReusedUsage
		row("reused-usage", "of which reused", fmt.Sprintf("%d input + %d output tokens, %s: spent by earlier runs; this run spent %s",
			u.InputTokens, u.OutputTokens, usd(u.CostUSD), usd(max(0, r.Usage.CostUSD-u.CostUSD))))
	}
	if rp := r.Replay; rp != nil {
		text := fmt.Sprintf("%d replayed from the call store, %d served from the cache (-cache-from), %d episodes diverged", rp.Replayed, rp.Cached, rp.Diverged)
		if rp.Saved != (usage.Usage{}) { // known to the run that served them, not kept in the log
			text += fmt.Sprintf("; %d input + %d output tokens, %s not spent again", rp.Saved.InputTokens, rp.Saved.OutputTokens, usd(rp.Saved.CostUSD))
		}
		row("replayed-calls", "model calls not bought", text)
	}
	if r.Wall > 0 {
		row("wall", "wall time", r.Wall.Round(time.Millisecond).String())
	}
	if r.BudgetExhausted {
		row("budget", "budget", r.budgetSpent())
	}
	return rows
}

// episodes says how many episodes the report covers: "28 × 3 = 84
// episodes" for a whole run, "83 of 120 episodes (69.2%) of 28 samples ×
// 3 epochs" for one that stopped early, and why it did.
func (r *Report) episodes() string {
	if r.Samples*r.Epochs == r.Episodes && (r.Planned == 0 || r.Planned == r.Episodes) {
		return fmt.Sprintf("%d × %d = %d episodes", r.Samples, r.Epochs, r.Episodes)
	}
	s := fmt.Sprintf("%d episodes of %d samples × %d epochs", r.Episodes, r.Samples, r.Epochs)
	if r.Planned > r.Episodes {
		s = fmt.Sprintf("%d of %d episodes (%s) of %d samples × %d epochs", r.Episodes, r.Planned,
			pct(float64(r.Episodes)/float64(r.Planned)), r.Samples, r.Epochs)
	}
	if b := r.Budget; b != nil {
		s += ": stopped by the " + budgetName(b.Spent)
	}
	return s
}

func budgetName(spent string) string {
	if spent == "tokens" {
		return "token budget (MaxTokens, -max-tokens)"
	}
	return "cost budget (MaxCostUSD, -max-cost)"
}

// budgetSpent says what the budget allowed, what was spent, and what the
// whole run would need at the rate of the episodes recorded.
func (r *Report) budgetSpent() string {
	b := r.Budget
	if b == nil {
		return "exhausted: scheduling stopped early"
	}
	s := "exhausted: scheduling stopped early; "
	project := r.Planned > r.Episodes && r.Episodes > 0
	scale := float64(r.Planned) / float64(max(r.Episodes, 1))
	if b.Spent == "tokens" {
		s += fmt.Sprintf("%d of %d tokens spent", r.Usage.Tokens(), b.Tokens)
		if project {
			s += fmt.Sprintf("; the whole run projects to about %.0f tokens", float64(r.Usage.Tokens())*scale)
		}
		return s
	}
	s += fmt.Sprintf("%s of %s spent", usd(r.Usage.CostUSD), usd(b.CostUSD))
	if project {
		s += fmt.Sprintf("; the whole run projects to about %s", usd(r.Usage.CostUSD*scale))
	}
	return s
}

// The number formats every rendering of a report shares.
var (
	pct     = numfmt.Pct
	ms      = numfmt.MS
	pts     = numfmt.Pts
	signed  = numfmt.Signed
	num     = numfmt.Num
	pval    = numfmt.P
	groupCI = numfmt.GroupCI
	usd     = numfmt.USD
)

func (r *Report) write(out io.Writer, md bool) error {
	t := &table{md: md}
	row, header, title := t.row, t.header, t.title
	if md {
		t.printf("## eval %s (run %s)\n\n", r.Eval, r.RunID)
	} else {
		t.printf("eval %s  run %s\n", r.Eval, r.RunID)
	}
	if r.WorstCase != nil || len(r.Broken) > 0 || r.Leaderboard != nil {
		// First, and alone on its line: what a hurried reader must not
		// miss, and where the errors came from.
		t.line(r.Headline())
		r.writeErrorSources(t)
		t.printf("\n")
	}
	header("metric", "value")
	for _, sr := range r.Summary() {
		row(sr.Label, sr.Value)
	}
	if lb := r.Leaderboard; lb != nil {
		lb.write(t)
	}
	costs := r.Usage.CostUSD > 0
	for _, t := range r.ByTag {
		title("by " + t.Tag)
		cols := []string{t.Tag, "samples", "pass", "fail", "error", "unscored", "pass rate", "CI"}
		if costs {
			cols = append(cols, "cost")
		}
		header(cols...)
		for _, g := range t.Groups {
			cells := []string{g.Value, fmt.Sprint(g.Samples), fmt.Sprint(g.Passed), fmt.Sprint(g.Failed), fmt.Sprint(g.Errored), fmt.Sprint(g.Unscored),
				pct(g.PassRate), groupCI(g.Interval, r.Interval.Method)}
			if costs {
				cells = append(cells, fmt.Sprintf("$%.4f", g.CostUSD))
			}
			row(cells...)
		}
	}
	if len(r.ByModel) > 0 {
		title("usage by model")
		header("role", "model", "input tokens", "output tokens", "cost")
		for _, m := range r.ByModel {
			row(m.Role, m.Model, fmt.Sprint(m.Usage.InputTokens), fmt.Sprint(m.Usage.OutputTokens), fmt.Sprintf("$%.4f", m.Usage.CostUSD))
		}
	}
	if len(r.Failures) > 0 {
		title(fmt.Sprintf("failures (%d listed, %d more)", len(r.Failures), r.FailuresOmitted))
		// The column of OpenTelemetry links shows only when there are any.
		links := slices.ContainsFunc(r.Failures, func(f Failure) bool { return f.TraceURL != "" })
		variants := r.Leaderboard != nil
		cols := []string{"sample", "epoch", "status", "reason", "trace"}
		if variants {
			cols = append([]string{"variant"}, cols...)
		}
		if links {
			cols = append(cols, "otel trace")
		}
		header(cols...)
		for _, f := range r.Failures {
			status := string(f.Status)
			if f.ErrorKind != "" {
				status += "/" + string(f.ErrorKind)
			}
			cells := []string{f.SampleID, fmt.Sprint(f.Epoch), status, clip(f.Reason, 100), f.Transcript}
			if variants {
				cells = append([]string{f.Variant}, cells...)
			}
			if links {
				link := f.TraceURL
				if md && link != "" {
					link = "[open](" + link + ")"
				}
				cells = append(cells, link)
			}
			row(cells...)
		}
	}
	for _, w := range r.Warnings {
		t.printf("\nwarning: %s\n", w)
	}
	return t.writeTo(out)
}

// writeErrorSources writes the table of where errors came from.
func (r *Report) writeErrorSources(t *table) {
	if len(r.ErrorSources) == 0 {
		return
	}
	t.title("errored and unscored, by where they came from")
	t.header("source", "status", "count", "first", "episode")
	for _, s := range r.ErrorSources {
		src, status := s.Source, string(s.Status)
		if src == "" {
			src = "(not recorded)"
		}
		if s.Kind != "" {
			status += "/" + string(s.Kind)
		}
		t.row(src, status, fmt.Sprint(s.Count), clip(s.First, 100), fmt.Sprintf("%s epoch %d", s.SampleID, s.Epoch))
	}
}

// clip fits s on one table line: white space folded, at most n bytes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return s[:n] + "…"
	}
	return s
}

// table builds the text and Markdown forms of reports and comparisons:
// tab-separated rows aligned by a tabwriter, or Markdown tables.
type table struct {
	b  strings.Builder
	md bool
}

func (t *table) row(cells ...string) {
	if t.md {
		t.b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	} else {
		t.b.WriteString(strings.Join(cells, "\t") + "\n")
	}
}

func (t *table) header(cells ...string) {
	t.row(cells...)
	if t.md {
		t.b.WriteString(strings.Repeat("|---", len(cells)) + "|\n")
	}
}

func (t *table) title(s string) {
	if t.md {
		fmt.Fprintf(&t.b, "\n### %s\n\n", s)
	} else {
		fmt.Fprintf(&t.b, "\n%s\n", s)
	}
}

// line writes a line of prose (a list item in Markdown).
func (t *table) line(s string) {
	if t.md {
		t.b.WriteString("- " + s + "\n")
	} else {
		t.b.WriteString(s + "\n")
	}
}

func (t *table) printf(format string, args ...any) { fmt.Fprintf(&t.b, format, args...) }

func (t *table) writeTo(out io.Writer) error {
	if t.md {
		_, err := io.WriteString(out, t.b.String())
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	io.WriteString(tw, t.b.String())
	return tw.Flush()
}

// WriteText prints the comparison as a readable table.
func (c *Comparison) WriteText(w io.Writer) error { return c.write(w, false) }

// WriteMarkdown prints the comparison as Markdown, for CI job summaries.
func (c *Comparison) WriteMarkdown(w io.Writer) error { return c.write(w, true) }

// String returns the text form.
func (c *Comparison) String() string {
	var b strings.Builder
	c.WriteText(&b)
	return b.String()
}

// Verdict returns the comparison's conclusions as sentences: whether the
// head regressed and whether it is non-inferior at the margin.
func (c *Comparison) Verdict() []string {
	lv := fmt.Sprintf("%g%%", 100*c.Level)
	d := c.PassRate
	if math.IsNaN(d.Lo) {
		return []string{fmt.Sprintf("undecided: %d paired samples, too few for an interval", c.Paired)}
	}
	var out []string
	if c.Regressed {
		out = append(out, fmt.Sprintf("REGRESSED: the head is significantly worse (%s CI upper bound %s < 0)", lv, pts(d.Hi)))
	} else {
		out = append(out, fmt.Sprintf("no significant regression (%s CI upper bound %s ≥ 0)", lv, pts(d.Hi)))
	}
	switch {
	case c.NonInferior && d.SE == 0 && d.Mean == 0:
		out = append(out, "non-inferior: no sample changed")
	case c.NonInferior:
		out = append(out, fmt.Sprintf("non-inferior at margin %.1f pts (CI lower bound %s > %s)", 100*c.Margin, pts(d.Lo), pts(-c.Margin)))
	default:
		out = append(out, fmt.Sprintf("NOT non-inferior at margin %.1f pts (CI lower bound %s ≤ %s)", 100*c.Margin, pts(d.Lo), pts(-c.Margin)))
	}
	return out
}

func (c *Comparison) write(out io.Writer, md bool) error {
	t := &table{md: md}
	row, header, title := t.row, t.header, t.title
	line := t.line
	name := c.HeadEval
	if c.BaseEval != c.HeadEval {
		name = c.BaseEval + " → " + c.HeadEval
	}
	base, head := c.BaseRunID, c.HeadRunID
	if c.BaseVariant != "" || c.HeadVariant != "" {
		base, head = fmt.Sprintf("%s variant %s", base, c.BaseVariant), fmt.Sprintf("%s variant %s", head, c.HeadVariant)
	}
	if md {
		t.printf("## compare %s: base run %s → head run %s\n\n", name, base, head)
	} else {
		t.printf("compare %s: base run %s → head run %s\n", name, base, head)
	}
	lv := fmt.Sprintf("%g%% CI", 100*c.Level)
	header("metric", "base", "head", "head − base", lv, "p")
	row("paired samples", fmt.Sprint(c.Paired), "", "", "", "")
	row("epochs", fmt.Sprint(c.BaseEpochs), fmt.Sprint(c.HeadEpochs), "", "", "")
	d, s := c.PassRate, c.Score
	row("pass rate", pct(d.MeanA), pct(d.MeanB), pts(d.Mean), fmt.Sprintf("[%s, %s]", pts(d.Lo), pts(d.Hi)), pval(d.P))
	row("mean score", num(s.MeanA), num(s.MeanB), signed(s.Mean), fmt.Sprintf("[%s, %s]", signed(s.Lo), signed(s.Hi)), pval(s.P))
	row("McNemar (exact)", fmt.Sprintf("%d pass→fail", c.Regressions), fmt.Sprintf("%d fail→pass", c.Improvements), "", "", pval(c.McNemarP))
	if !md {
		t.b.WriteString("\n")
	}
	line(fmt.Sprintf("method: %s (one paired observation per sample: its pass rate over its scored epochs); McNemar: exact, a sample passes at a pass rate ≥ 50%%", MethodPairedT))
	for _, v := range c.Verdict() {
		line("verdict: " + v)
	}
	if c.WorstCase != nil {
		line("verdict: " + c.WorstCase.String())
	}
	if nf := c.NoiseFloor; nf != nil {
		line("noise floor: " + c.noiseLine())
	}
	listed := func(regression bool) []Flip {
		var fs []Flip
		for _, f := range c.Flips {
			if f.Regression == regression {
				fs = append(fs, f)
			}
		}
		return fs
	}
	for _, k := range []struct {
		regression bool
		title      string
		total      int
	}{{true, "regressions (pass → fail)", c.Regressions}, {false, "improvements (fail → pass)", c.Improvements}} {
		if k.total == 0 {
			continue
		}
		fs := listed(k.regression)
		title(fmt.Sprintf("%s: %d (%d listed)", k.title, k.total, len(fs)))
		if len(fs) == 0 {
			continue
		}
		header("sample", "base", "head")
		for _, f := range fs {
			row(f.SampleID, pct(f.Base), pct(f.Head))
		}
	}
	if len(c.ByTag) > 0 {
		title(fmt.Sprintf("by tag (paired t per group; Holm-adjusted across %d groups)", len(c.ByTag)))
		header("tag", "value", "n", "base", "head", "head − base", lv, "p", "Holm p")
		for _, t := range c.ByTag {
			g := t.PassRate
			row(t.Tag, t.Value, fmt.Sprint(g.N), pct(g.MeanA), pct(g.MeanB), pts(g.Mean),
				fmt.Sprintf("[%s, %s]", pts(g.Lo), pts(g.Hi)), pval(g.P), pval(t.HolmP))
		}
	}
	for _, w := range c.Warnings {
		t.printf("\nwarning: %s\n", w)
	}
	return t.writeTo(out)
}

// JSON: every float64 that may hold an undefined statistic is written as a
// stats.Float, so that NaN and ±Inf are null instead of an error from
// encoding/json. Each MarshalJSON embeds its type without the method and
// overrides the float fields with the same names: encoding/json takes the
// shallower field.

// MarshalJSON writes the report; undefined statistics are null.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		plain
		PassRate  stats.Float `json:"pass_rate"`
		MeanScore stats.Float `json:"mean_score"`
		Usage     usageJSON   `json:"usage"`
	}{plain(r), stats.Float(r.PassRate), stats.Float(r.MeanScore), usageJSON{r.Usage, stats.Float(r.Usage.CostUSD)}})
}

type usageJSON struct {
	usage.Usage
	CostUSD stats.Float `json:"cost_usd,omitempty"`
}

// MarshalJSON writes the value, null when undefined.
func (k KValue) MarshalJSON() ([]byte, error) {
	type plain KValue
	return json.Marshal(struct {
		plain
		Value stats.Float `json:"value"`
	}{plain(k), stats.Float(k.Value)})
}

// MarshalJSON writes the group; undefined statistics are null.
func (g Group) MarshalJSON() ([]byte, error) {
	type plain Group
	return json.Marshal(struct {
		plain
		PassRate stats.Float `json:"pass_rate"`
	}{plain(g), stats.Float(g.PassRate)})
}

// MarshalJSON writes the latencies; an infinite duration is null.
func (l Latency) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		P50MS stats.Float `json:"p50_ms"`
		P95MS stats.Float `json:"p95_ms"`
		MaxMS stats.Float `json:"max_ms"`
	}{stats.Float(l.P50MS), stats.Float(l.P95MS), stats.Float(l.MaxMS)})
}

// MarshalJSON writes the comparison; undefined statistics (the interval
// of fewer than two pairs, say) are null.
func (c Comparison) MarshalJSON() ([]byte, error) {
	type plain Comparison
	return json.Marshal(struct {
		plain
		Level    stats.Float `json:"level"`
		Margin   stats.Float `json:"margin"`
		McNemarP stats.Float `json:"mcnemar_p"`
	}{plain(c), stats.Float(c.Level), stats.Float(c.Margin), stats.Float(c.McNemarP)})
}

// MarshalJSON writes the flip; undefined rates are null.
func (f Flip) MarshalJSON() ([]byte, error) {
	type plain Flip
	return json.Marshal(struct {
		plain
		Base stats.Float `json:"base"`
		Head stats.Float `json:"head"`
	}{plain(f), stats.Float(f.Base), stats.Float(f.Head)})
}

// MarshalJSON writes the group's difference; undefined statistics are
// null.
func (t TagDifference) MarshalJSON() ([]byte, error) {
	type plain TagDifference
	return json.Marshal(struct {
		plain
		HolmP stats.Float `json:"holm_p"`
	}{plain(t), stats.Float(t.HolmP)})
}

// noiseLine puts the pass-rate difference beside the run-to-run noise
// floor: a difference inside it is what running one agent twice gives.
func (c *Comparison) noiseLine() string {
	nf, d := c.NoiseFloor, c.PassRate.Mean
	from := "from the spread of each sample across epochs"
	if c.SameAgent {
		from = "from the spread of each sample across both runs, taken as runs of one agent"
	}
	s := fmt.Sprintf("±%.1f pts (%g%%: two runs of one agent with these epochs differ by less, %s)", 100*nf.HalfWidth, 100*nf.Level, from)
	if nf.Within(d) {
		return fmt.Sprintf("the difference %s is INSIDE the noise floor %s: what running the same agent again gives", pts(d), s)
	}
	return fmt.Sprintf("the difference %s is outside the noise floor %s", pts(d), s)
}
