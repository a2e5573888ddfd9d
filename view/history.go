package view

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/history"
	"github.com/proctor-evals/proctor/internal/numfmt"
	"github.com/proctor-evals/proctor/view/internal/plot"
)

// historyURL is the history page of an eval, by tag when tag is set.
func historyURL(eval, tag string) string {
	q := url.Values{"eval": {eval}}
	if tag != "" {
		q.Set("tag", tag)
	}
	return "/history?" + q.Encode()
}

// historyBody is an eval's history page: its runs over time, the drift of
// each against its baseline, and the alerts on top. An eval of variants
// has a trend per variant (history.Run.Series): each is charted and
// compared with its own baseline, never with another variant's runs.
type historyBody struct {
	Eval, Tag, Baseline string
	Alerts              []historyRow
	Trends              []historyTrend
	Variants            bool // the runs table names each row's variant
	Runs                []historyRow
	Tags                []tagLink // the tags the runs have, to draw by
}

// historyTrend is the charts of one trend: the eval's, or one variant's.
type historyTrend struct {
	Variant       string // "" for an eval without variants
	PassRate      string
	ByTag         []tagChart
	Cost, Latency string
}

type tagLink struct{ Tag, URL string }

// tagChart is a tag value's chart and its visible label (an SVG's title
// is a tooltip, not a heading).
type tagChart struct{ Label, SVG string }

type historyRow struct {
	*history.Run
	Series           int // the trend's index in Trends
	ID, URL          string
	Rate, CI         string
	Changed          string
	BaseID, BaseURL  string
	Diff, DiffCI     string
	AdjP             string
	Drift            *history.Drift
	CompareURL, Note string
}

func (s *Server) historyPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	eval := q.Get("eval")
	var runs []*history.Run
	reports := map[*history.Run]*report.Report{}
	ids := map[*history.Run]string{}
	for _, l := range s.all() {
		snap, err := l.snapshot()
		if err != nil || snap.Err != nil || snap.Report == nil || snap.Report.Eval != eval || snap.Report.Episodes == 0 {
			continue
		}
		m, err := manifest.Read(l.path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			m = nil // a broken manifest: the run without its fingerprints
		}
		for _, v := range variantRuns(snap.Report, m) {
			run := history.FromReport(v.rep, m)
			run.Variant = v.name
			if v.name != "" && m != nil {
				run.HarnessVersion = v.harness
			}
			run.Log, run.Start = l.path, snap.Ext.first
			if snap.Ext.last.After(snap.Ext.first) {
				run.Wall = snap.Ext.last.Sub(snap.Ext.first)
			}
			runs = append(runs, run)
			reports[run], ids[run] = v.rep, snap.ID
		}
	}
	if len(runs) == 0 {
		http.Error(w, "history: no runs of this eval", http.StatusNotFound)
		return
	}
	history.Sort(runs)
	// The shard logs of one run are one run, its report read from them all.
	runs = history.Group(runs)
	for _, r := range runs {
		if len(r.Parts) == 0 {
			continue
		}
		rep, err := history.ReadReport(r, s.opts.Report)
		if err != nil {
			http.Error(w, "history: "+err.Error(), http.StatusInternalServerError)
			return
		}
		reports[r], ids[r] = rep, ids[r.Parts[0]]
	}
	pinned := -1
	if b := q.Get("baseline"); b != "" {
		if pinned = slices.IndexFunc(runs, func(r *history.Run) bool { return ids[r] == b || r.RunID == b }); pinned < 0 {
			http.Error(w, "history: baseline must name a run of this eval", http.StatusNotFound)
			return
		}
	}
	alpha := history.DefaultAlpha
	if o := s.opts.Report; o != nil && o.Level > 0 && o.Level < 1 {
		alpha = 1 - o.Level
	}
	s.render(w, r, "history", &page{Title: "history · " + eval, Body: historyData(eval, q.Get("tag"), runs, reports, ids, pinned, alpha)})
}

// variantRun is one trend's part of a log: a variant's report, or the
// log's whole when it has no variants.
type variantRun struct {
	name, harness string
	rep           *report.Report
}

// variantRuns splits a log's report into its variants', as
// history.ReadVariants splits the log (each variant's report is that of
// its records alone), without reading the log again: a variant named by
// the manifest with no record yet has no row. A log without variants is
// one.
func variantRuns(rep *report.Report, m *manifest.Manifest) []variantRun {
	if rep.Leaderboard == nil {
		return []variantRun{{rep: rep}}
	}
	harness := map[string]string{}
	if m != nil {
		for _, v := range m.Variants {
			harness[v.Name] = v.Harness
		}
	}
	var out []variantRun
	for _, name := range slices.Sorted(slices.Values(rep.VariantNames())) {
		if v := rep.VariantReport(name); v != nil && v.Episodes > 0 {
			out = append(out, variantRun{name: name, harness: harness[name], rep: v})
		}
	}
	return out
}

func historyData(eval, tag string, runs []*history.Run, reports map[*history.Run]*report.Report, ids map[*history.Run]string, pinned int, alpha float64) *historyBody {
	b := &historyBody{Eval: eval, Tag: tag}
	if pinned >= 0 {
		b.Baseline = ids[runs[pinned]]
	}
	tags := map[string]bool{}
	// runs are sorted by variant, then start (history.Sort): a trend each.
	for i := 0; i < len(runs); {
		j := i + 1
		for j < len(runs) && runs[j].Variant == runs[i].Variant {
			j++
		}
		pin := -1
		if pinned >= 0 {
			// The pinned run's row of this variant, if it has one.
			pin = slices.IndexFunc(runs[i:j], func(r *history.Run) bool { return ids[r] == b.Baseline })
			if pin < 0 {
				pin = -2 // pinned elsewhere: this trend has no baseline
			}
		}
		b.trend(runs[i:j], reports, ids, pin, alpha, tags)
		i = j
	}
	b.Variants = len(b.Trends) > 1 || len(b.Trends) == 1 && b.Trends[0].Variant != ""
	latestFirst(b.Alerts)
	for _, t := range slices.Sorted(maps.Keys(tags)) {
		b.Tags = append(b.Tags, tagLink{t, historyURL(eval, t)})
	}
	latestFirst(b.Runs) // as the runs page lists them
	return b
}

// latestFirst orders rows, each trend's in start order, the latest first,
// a log's variants in the order of their trends.
func latestFirst(rows []historyRow) {
	slices.Reverse(rows)
	slices.SortStableFunc(rows, func(x, y historyRow) int { return cmp.Or(y.Start.Compare(x.Start), cmp.Compare(x.Series, y.Series)) })
}

// trend adds the charts and rows of one trend's runs, in start order;
// pinned is the index of the pinned baseline among them (-1: none
// pinned, each run against the previous on its dataset; -2: pinned in
// another trend, so none here).
func (b *historyBody) trend(runs []*history.Run, reports map[*history.Run]*report.Report, ids map[*history.Run]string, pinned int, alpha float64, tags map[string]bool) {
	eval, tag := b.Eval, b.Tag
	series := len(b.Trends)
	variant := runs[0].Variant
	title := eval
	if variant != "" {
		title = eval + " variant " + variant
	}
	var rows []historyRow
	var rate, cost, lat []plot.TimePoint
	maxCost, maxLat := 0.0, 0.0
	for i, r := range runs {
		row := historyRow{Run: r, Series: series, ID: ids[r], URL: runURL(ids[r]), Rate: "n/a"}
		if !math.IsNaN(r.PassRate) {
			row.Rate, row.CI = pct(r.PassRate), fmt.Sprintf("[%s, %s]", pct(r.Lo), pct(r.Hi))
		}
		if r.Errored+r.Unscored > 0 {
			row.Rate += worstCase(r.WorstCase())
		}
		if i > 0 {
			row.Changed = strings.Join(history.Changes(runs[i-1], r), ", ")
		}
		base := pinned
		if base == -1 {
			base = history.Baseline(runs, i)
		}
		if base >= 0 && base != i {
			d := history.Compare(runs[base], r, reports[runs[base]], reports[r], alpha)
			all := d.Tests[0]
			row.Drift, row.BaseID, row.BaseURL = d, ids[runs[base]], runURL(ids[runs[base]])
			row.Diff, row.DiffCI, row.AdjP = pts(all.Diff.Mean), fmt.Sprintf("[%s, %s]", pts(all.Diff.Lo), pts(all.Diff.Hi)), pval(all.AdjP)
			if variant == "" { // the compare page compares whole logs
				row.CompareURL = "/compare?" + url.Values{"base": {row.BaseID}, "head": {row.ID}}.Encode()
			}
			if d.Alert {
				var sig []string
				for _, t := range d.Significant() {
					sig = append(sig, t.Name+" "+pts(t.Diff.Mean))
				}
				row.Note = strings.Join(sig, ", ") + ": " + d.Cause
				b.Alerts = append(b.Alerts, row)
			}
		}
		label := ids[r]
		rate = append(rate, plot.TimePoint{T: r.Start, Label: label, Y: r.PassRate, Lo: r.Lo, Hi: r.Hi, Mark: row.Changed, Alert: row.Drift != nil && row.Drift.Alert})
		cost = append(cost, plot.TimePoint{T: r.Start, Label: label, Y: r.CostUSD, Lo: math.NaN(), Hi: math.NaN(), Mark: row.Changed})
		// The bar runs from the median to p95 (a bar needs both ends).
		lat = append(lat, plot.TimePoint{T: r.Start, Label: label, Y: r.LatencyP50MS, Lo: r.LatencyP50MS, Hi: r.LatencyP95MS, Mark: row.Changed})
		maxCost, maxLat = max(maxCost, r.CostUSD), max(maxLat, nanTo0(r.LatencyP95MS), nanTo0(r.LatencyP50MS))
		for _, t := range r.Tags {
			tags[t.Tag] = true
		}
		rows = append(rows, row)
	}
	costTitle, latTitle := "cost per run (USD)", "episode latency per run: median, bar to p95"
	if variant != "" {
		costTitle, latTitle = "cost per run of variant "+variant+" (USD)", "episode latency per run of variant "+variant+": median, bar to p95"
	}
	t := historyTrend{Variant: variant,
		PassRate: plot.Timeline("pass rate of "+title+" over time (95% CI; dashed: harness, judge, sandbox or dataset changed; ringed: drift)", rate, nil),
		Cost:     plot.Timeline(costTitle, cost, &plot.TimelineOptions{Max: niceMax(maxCost), Format: func(f float64) string { return fmt.Sprintf("$%.4g", f+0) }}), // +0: no "-0"
		Latency:  plot.Timeline(latTitle, lat, &plot.TimelineOptions{Max: niceMax(maxLat), Format: numfmt.MS}),
	}
	if tag != "" {
		values := map[string][]plot.TimePoint{}
		for i, r := range runs {
			for _, tg := range r.Tags {
				if tg.Tag == tag {
					values[tg.Value] = append(values[tg.Value], plot.TimePoint{T: r.Start, Label: ids[r], Y: tg.PassRate, Lo: tg.Lo, Hi: tg.Hi, Mark: rows[i].Changed})
				}
			}
		}
		of := ""
		if variant != "" {
			of = " (variant " + variant + ")"
		}
		for _, v := range slices.Sorted(maps.Keys(values)) {
			t.ByTag = append(t.ByTag, tagChart{tag + "=" + v + of, plot.Timeline("pass rate of "+tag+"="+v+of+" over time", values[v], nil)})
		}
	}
	b.Trends = append(b.Trends, t)
	b.Runs = append(b.Runs, rows...)
}

func nanTo0(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// niceMax is an axis's top for values up to v: v and a tenth, or 1 for
// nothing to draw.
func niceMax(v float64) float64 {
	if !(v > 0) {
		return 1
	}
	return v * 1.1
}
