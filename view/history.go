package view

import (
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
// each against its baseline, and the alerts on top.
type historyBody struct {
	Eval, Tag, Baseline string
	Alerts              []historyRow
	PassRate            string
	ByTag               []tagChart
	Cost, Latency       string
	Runs                []historyRow
	Tags                []tagLink // the tags the runs have, to draw by
}

type tagLink struct{ Tag, URL string }

// tagChart is a tag value's chart and its visible label (an SVG's title
// is a tooltip, not a heading).
type tagChart struct{ Label, SVG string }

type historyRow struct {
	*history.Run
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
		run := history.FromReport(snap.Report, m)
		run.Log, run.Start = l.path, snap.Ext.first
		if snap.Ext.last.After(snap.Ext.first) {
			run.Wall = snap.Ext.last.Sub(snap.Ext.first)
		}
		runs = append(runs, run)
		reports[run], ids[run] = snap.Report, snap.ID
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

func historyData(eval, tag string, runs []*history.Run, reports map[*history.Run]*report.Report, ids map[*history.Run]string, pinned int, alpha float64) *historyBody {
	b := &historyBody{Eval: eval, Tag: tag}
	if pinned >= 0 {
		b.Baseline = ids[runs[pinned]]
	}
	var rate, cost, lat []plot.TimePoint
	maxCost, maxLat := 0.0, 0.0
	tags := map[string]bool{}
	for i, r := range runs {
		row := historyRow{Run: r, ID: ids[r], URL: runURL(ids[r]), Rate: "n/a"}
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
		if base < 0 {
			base = history.Baseline(runs, i)
		}
		if base >= 0 && base != i {
			d := history.Compare(runs[base], r, reports[runs[base]], reports[r], alpha)
			all := d.Tests[0]
			row.Drift, row.BaseID, row.BaseURL = d, ids[runs[base]], runURL(ids[runs[base]])
			row.Diff, row.DiffCI, row.AdjP = pts(all.Diff.Mean), fmt.Sprintf("[%s, %s]", pts(all.Diff.Lo), pts(all.Diff.Hi)), pval(all.AdjP)
			row.CompareURL = "/compare?" + url.Values{"base": {row.BaseID}, "head": {row.ID}}.Encode()
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
		b.Runs = append(b.Runs, row)
	}
	slices.Reverse(b.Alerts) // the latest first
	for _, t := range slices.Sorted(maps.Keys(tags)) {
		b.Tags = append(b.Tags, tagLink{t, historyURL(eval, t)})
	}
	b.PassRate = plot.Timeline("pass rate of "+eval+" over time (95% CI; dashed: harness, judge, sandbox or dataset changed; ringed: drift)", rate, nil)
	b.Cost = plot.Timeline("cost per run (USD)", cost, &plot.TimelineOptions{Max: niceMax(maxCost), Format: func(f float64) string { return fmt.Sprintf("$%.4g", f+0) }}) // +0: no "-0"
	b.Latency = plot.Timeline("episode latency per run: median, bar to p95", lat, &plot.TimelineOptions{Max: niceMax(maxLat), Format: numfmt.MS})
	if tag != "" {
		values := map[string][]plot.TimePoint{}
		for i, r := range runs {
			for _, t := range r.Tags {
				if t.Tag == tag {
					values[t.Value] = append(values[t.Value], plot.TimePoint{T: r.Start, Label: ids[r], Y: t.PassRate, Lo: t.Lo, Hi: t.Hi, Mark: b.Runs[i].Changed})
				}
			}
		}
		for _, v := range slices.Sorted(maps.Keys(values)) {
			b.ByTag = append(b.ByTag, tagChart{tag + "=" + v, plot.Timeline("pass rate of "+tag+"="+v+" over time", values[v], nil)})
		}
	}
	slices.Reverse(b.Runs) // the table lists the latest first, as the runs page does
	return b
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
