package view

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"html/template"
	"io"
	"maps"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/numfmt"
	"github.com/proctor-evals/proctor/internal/safeopen"
	itranscript "github.com/proctor-evals/proctor/internal/transcript"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/stats"
	"github.com/proctor-evals/proctor/view/internal/plot"
)

// page is what the layout renders around a page's body.
type page struct {
	Title   string
	Static  bool         // one self-contained file: inline style, no script, no links to other pages
	CSS     template.CSS // the inline style of a static page
	Live    bool         // the page follows its log
	Writing bool         // and a run is writing it: the page says "live"
	Events  string       // the stream's URL
	Version uint64       // of the log the page shows
	Body    any
}

// parsePages parses the templates once: executing them is safe for
// concurrent use.
var parsePages = sync.OnceValues(func() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"pct": pct, "ms": ms, "pts": pts, "pval": pval, "num": num, "signed": signed,
		"money":  numfmt.USD,
		"size":   byteSize,
		"mul100": func(f float64) float64 { return 100 * f },
		"link":   func(url, text string) linkData { return linkData{url, text} },
		"svg":    func(s string) template.HTML { return template.HTML(s) }, // plot escapes every label
		"time": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
	}
	base, err := template.New("layout").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/board.html")
	if err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, name := range []string{"runs", "run", "sample", "transcript", "compare", "review", "history", "leaderboard"} {
		t, err := template.Must(base.Clone()).ParseFS(files, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("view: %w", err)
		}
		pages[name] = t
	}
	return pages, nil
})

type linkData struct{ URL, Text string }

// URLs of pages. IDs and sample IDs are escaped here: html/template
// leaves '?' and '#' of a URL alone.
func escapeID(id string) string {
	parts := strings.Split(id, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

func runURL(id string) string { return "/run/" + escapeID(id) }

func sampleURL(id, sample string) string {
	return "/sample/" + escapeID(id) + "?s=" + url.QueryEscape(sample)
}

// transcriptURL is the transcript page of an episode; its variant, in a
// log of variants, tells it from the other variants' of that epoch.
func transcriptURL(id, variant, sample string, epoch int) string {
	u := fmt.Sprintf("/transcript/%s?s=%s&e=%d", escapeID(id), url.QueryEscape(sample), epoch)
	if variant != "" {
		u += "&v=" + url.QueryEscape(variant)
	}
	return u
}

// The text report's formats, so that the page and `proctor report` print
// the same numbers.
var (
	pct    = numfmt.Pct
	ms     = numfmt.MS
	pts    = numfmt.Pts
	signed = numfmt.Signed
	num    = numfmt.Num
	pval   = numfmt.P
)

var byteSize = numfmt.Bytes

// row is one line of the summary table: the text report's metric and
// value.
type row struct{ Metric, Value, ID string }

// summaryRows are the text report's first table, row for row.
func summaryRows(r *report.Report) []row {
	var rows []row
	for _, sr := range r.Summary() {
		rows = append(rows, row{sr.Label, sr.Value, sr.Key})
	}
	return rows
}

type tagTable struct {
	Tag    string
	Plot   string
	Groups []groupRow
}

type groupRow struct {
	report.Group
	CI string
}

type failureRow struct {
	report.Failure
	Sample, Transcript, OTel string // URLs
}

type brokenRow struct{ ID, Sample string }

type kv struct {
	Key   string
	Count int
}

type runBody struct {
	ID, Path string
	Size     int64
	Report   *report.Report
	Rows     []row
	Err      string
	Tail     int64
	Started  time.Time
	Ended    time.Time
	Rate     string // SVG
	PassAtK  string
	Tags     []tagTable
	Latency  string
	Cost     string
	Timeline string
	Errors   string
	Kinds    []kv
	Workers  []kv
	Traced   int
	Failures []failureRow
	Omitted  int
	// Broken are the samples whose oracle failed (run.oracle.jsonl
	// beside the log), left out of every count and rate.
	Broken    []brokenRow
	Warnings  []string
	Static    bool
	SampleURL string         // the form's action
	Governor  []GovernorLane // a live run's rate governor (Options.Governor)
	Board     *boardBody
	BoardURL  string // the leaderboard page
}

func runData(snap *snapshot, o *Options, static bool) *runBody {
	r, ext := snap.Report, snap.Ext
	b := &runBody{ID: snap.ID, Path: snap.Path, Size: snap.Size, Report: r, Rows: append(summaryRows(r), spendRows(snap)...), Tail: snap.Tail,
		Started: ext.first, Ended: ext.last, Traced: ext.traced, Omitted: r.FailuresOmitted, Warnings: r.Warnings, Static: static}
	if !static {
		b.SampleURL = "/sample/" + escapeID(snap.ID)
	}
	if snap.Err != nil {
		b.Err = snap.Err.Error()
	}
	lo, hi := math.NaN(), math.NaN()
	if r.Passed+r.Failed > 0 {
		lo, hi = r.Interval.Lo, r.Interval.Hi
	}
	rateRows := []plot.Interval{{Label: "pass rate", Value: nanIf(r.Passed+r.Failed == 0, r.PassRate), Lo: lo, Hi: hi}}
	if lb := r.Leaderboard; lb != nil {
		b.Board = boardData(lb)
		if !static {
			b.BoardURL = "/leaderboard/" + escapeID(snap.ID)
		}
		rateRows = variantRates(lb)
	}
	if r.Bootstrap != nil {
		rateRows = append(rateRows, plot.Interval{Label: "bootstrap", Value: r.PassRate, Lo: r.Bootstrap.Lo, Hi: r.Bootstrap.Hi, Color: plot.ColorOther})
	}
	if wc := r.WorstCase; wc != nil {
		rateRows = append(rateRows,
			plot.Interval{Label: "errors as failures", Value: wc.Lower.PassRate, Lo: wc.Lower.Interval.Lo, Hi: wc.Lower.Interval.Hi, Color: plot.ColorOther},
			plot.Interval{Label: "errors as passes", Value: wc.Upper.PassRate, Lo: wc.Upper.Interval.Lo, Hi: wc.Upper.Interval.Hi, Color: plot.ColorOther})
	}
	b.Rate = plot.Intervals("pass rate", rateRows, nil)
	if len(r.PassAtK) > 1 {
		var ks []plot.Interval
		for i, k := range r.PassAtK {
			ks = append(ks, plot.Interval{Label: fmt.Sprintf("pass@%d", k.K), Value: k.Value, Lo: math.NaN(), Hi: math.NaN()},
				plot.Interval{Label: fmt.Sprintf("pass^%d", k.K), Value: r.PassHatK[i].Value, Lo: math.NaN(), Hi: math.NaN(), Color: plot.ColorOther})
		}
		b.PassAtK = plot.Intervals("pass@k and pass^k", ks, nil)
	}
	for _, t := range r.ByTag {
		tt := tagTable{Tag: t.Tag}
		var rows []plot.Interval
		for _, g := range t.Groups {
			tt.Groups = append(tt.Groups, groupRow{g, numfmt.GroupCI(g.Interval, r.Interval.Method)})
			scored := g.Passed+g.Failed > 0
			rows = append(rows, plot.Interval{Label: g.Value, Value: nanIf(!scored, g.PassRate),
				Lo: nanIf(!scored, g.Interval.Lo), Hi: nanIf(!scored, g.Interval.Hi), Note: fmt.Sprintf("n=%d", g.Samples)})
		}
		tt.Plot = plot.Intervals("pass rate by "+t.Tag, rows, nil)
		b.Tags = append(b.Tags, tt)
	}
	b.Latency = plot.Histogram("latency", "episode duration (log scale)", logBins(ext.latency[:], latMinExp, func(v float64) string {
		if v >= 1000 {
			return fmt.Sprintf("%.3gs", v/1000)
		}
		return fmt.Sprintf("%.3gms", v)
	}), plot.ColorNeutral)
	if ext.cost[0] < snap.Records {
		bins := logBins(ext.cost[1:], costMinExp, func(v float64) string { return fmt.Sprintf("$%.2g", v) })
		if ext.cost[0] > 0 {
			bins = append([]plot.Bin{{Label: "$0", Count: ext.cost[0]}}, bins...)
		}
		b.Cost = plot.Histogram("cost per episode", "cost (USD, log scale)", bins, plot.ColorOther)
	}
	b.Timeline = timeline(ext.finished)
	for k, n := range ext.kinds {
		b.Kinds = append(b.Kinds, kv{string(k), n})
	}
	slices.SortFunc(b.Kinds, func(x, y kv) int { return cmp.Or(y.Count-x.Count, strings.Compare(x.Key, y.Key)) })
	if len(b.Kinds) > 0 {
		var rows []plot.Interval
		peak := float64(b.Kinds[0].Count)
		for _, k := range b.Kinds {
			rows = append(rows, plot.Interval{Label: k.Key, Value: float64(k.Count), Lo: math.NaN(), Hi: math.NaN(), Color: plot.ColorError})
		}
		b.Errors = plot.Intervals("errors by kind", rows, &plot.IntervalOptions{Max: peak, Format: plot.Count})
	}
	for w, n := range ext.workers {
		b.Workers = append(b.Workers, kv{w, n})
	}
	slices.SortFunc(b.Workers, func(x, y kv) int { return strings.Compare(x.Key, y.Key) })
	for _, f := range r.Failures {
		fr := failureRow{Failure: f}
		if !static {
			fr.Sample = sampleURL(snap.ID, f.SampleID)
			if f.Transcript != "" {
				fr.Transcript = transcriptURL(snap.ID, f.Variant, f.SampleID, f.Epoch)
			}
		}
		fr.OTel = report.TraceURL(o.TraceURL, f.TraceID, f.SpanID)
		b.Failures = append(b.Failures, fr)
	}
	for _, id := range r.Broken {
		br := brokenRow{ID: id}
		if !static {
			br.Sample = sampleURL(snap.ID, id)
		}
		b.Broken = append(b.Broken, br)
	}
	return b
}

func nanIf(cond bool, v float64) float64 {
	if cond {
		return math.NaN()
	}
	return v
}

// logBins turns log-spaced counts into histogram bins, from the first
// non-empty bin to the last.
func logBins(counts []int, minExp int, label func(float64) string) []plot.Bin {
	first, last := -1, -1
	for i, n := range counts {
		if n > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	var bins []plot.Bin
	for i := first; first >= 0 && i <= last; i++ {
		edge := math.Pow(10, float64(minExp)+float64(i)/binsPerDecade)
		bins = append(bins, plot.Bin{Label: label(edge), Count: counts[i]})
	}
	return bins
}

// timeline buckets episodes by the second they finished into at most 60
// columns of a round width.
func timeline(finished map[int64]*[4]int) string {
	series := []plot.Series{{Name: "pass", Color: plot.ColorPass}, {Name: "fail", Color: plot.ColorFail}, {Name: "error", Color: plot.ColorError}, {Name: "unscored", Color: plot.ColorOther}}
	if len(finished) == 0 {
		return plot.Stacked("episodes finished over time (UTC)", series, nil)
	}
	secs := slices.Sorted(maps.Keys(finished))
	lo, hi := secs[0], secs[len(secs)-1]
	width := int64(1)
	for _, w := range []int64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400} {
		width = w
		if (hi-lo)/w < 60 {
			break
		}
	}
	for (hi-lo)/width >= 60 {
		width *= 2
	}
	start := lo - lo%width
	cols := make([]plot.Column, (hi-start)/width+1)
	layout := "15:04:05"
	if hi-lo >= 86400 {
		layout = "01-02 15:04"
	}
	for i := range cols {
		cols[i] = plot.Column{Label: time.Unix(start+int64(i)*width, 0).UTC().Format(layout), Counts: make([]int, 4)}
	}
	for _, sec := range secs {
		c := finished[sec]
		col := &cols[(sec-start)/width]
		for i := range c {
			col.Counts[i] += c[i]
		}
	}
	return plot.Stacked(fmt.Sprintf("episodes finished per %s (UTC)", time.Duration(width)*time.Second), series, cols)
}

// runsBody is the runs page: every run, newest first, and a trend per
// eval.
type runsBody struct {
	Runs   []runRow
	Trends []trend
	IDs    []string // for the compare form
}

type runRow struct {
	ID, URL, Eval, RunID, Err string
	Started                   time.Time
	Episodes                  int
	Rate, CI                  string
	Cost                      float64
	Size                      int64
	Live                      bool
	Shards                    []shardLink // the logs of a run written in shards
}

type trend struct {
	Eval string
	Plot string
}

func runsData(snaps []*snapshot, shards map[*snapshot][]shardLink) *runsBody {
	b := &runsBody{}
	byEval := map[string][]*snapshot{}
	for _, s := range snaps {
		row := runRow{ID: s.ID, URL: runURL(s.ID), Size: s.Size, Shards: shards[s]}
		if s.Err != nil {
			row.Err = s.Err.Error()
		}
		if s.Report != nil {
			r := s.Report
			row.Eval, row.RunID, row.Episodes, row.Cost = r.Eval, r.RunID, r.Episodes, r.Usage.CostUSD
			row.Started = s.Ext.first
			row.Rate, row.CI = "n/a", ""
			if r.Passed+r.Failed > 0 {
				row.Rate, row.CI = pct(r.PassRate), fmt.Sprintf("[%s, %s]", pct(r.Interval.Lo), pct(r.Interval.Hi))
			}
			if lb := r.Leaderboard; lb != nil && len(lb.Variants) > 0 {
				// No pooled rate: the best variant's, named.
				best := lb.Variants[0]
				row.Rate, row.CI = fmt.Sprintf("%d variants, best %s %s", len(lb.Variants), best.Variant, pct(best.PassRate)), fmt.Sprintf("[%s, %s]", pct(best.Interval.Lo), pct(best.Interval.Hi))
			}
			if wc := r.WorstCase; wc != nil {
				row.Rate += worstCase(wc.Lower.PassRate, wc.Upper.PassRate)
			}
			row.Live = s.Tail > 0 && s.Err == nil // a log in error is not being written
			if r.Episodes > 0 {
				byEval[r.Eval] = append(byEval[r.Eval], s)
			}
		}
		b.Runs = append(b.Runs, row)
		if len(row.Shards) == 0 {
			b.IDs = append(b.IDs, s.ID)
		}
		for _, l := range row.Shards {
			b.IDs = append(b.IDs, l.ID)
		}
	}
	slices.SortStableFunc(b.Runs, func(x, y runRow) int { return cmp.Or(y.Started.Compare(x.Started), strings.Compare(x.ID, y.ID)) })
	for _, eval := range slices.Sorted(maps.Keys(byEval)) {
		runs := byEval[eval]
		slices.SortStableFunc(runs, func(x, y *snapshot) int { return x.Ext.first.Compare(y.Ext.first) })
		var pts []plot.Point
		for _, s := range runs {
			r := s.Report
			p := plot.Point{Label: s.Ext.first.UTC().Format("01-02 15:04"), Y: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
			if r.Passed+r.Failed > 0 {
				p.Y, p.Lo, p.Hi = r.PassRate, r.Interval.Lo, r.Interval.Hi
			}
			pts = append(pts, p)
		}
		b.Trends = append(b.Trends, trend{eval, plot.Trend("pass rate of "+eval+" over runs", pts)})
	}
	return b
}

// sampleBody is the sample page: every epoch's record.
type sampleBody struct {
	ID, Run, RunURL, Sample string
	Episodes                []episode
}

type episode struct {
	sink.Record
	Offset                int64
	Input, Output, Scores string
	Transcript, OTel      string // URLs
}

func sampleData(l *logState, id string, recs []located, o *Options) *sampleBody {
	b := &sampleBody{ID: l.id, Run: l.id, RunURL: runURL(l.id), Sample: id}
	for _, r := range recs {
		e := episode{Record: r.Record, Offset: r.Offset, Input: pretty(r.Input), Output: pretty(r.Output)}
		if len(r.Scores) > 0 {
			sc, _ := json.Marshal(r.Scores)
			e.Scores = string(sc)
		}
		if r.Transcript != "" {
			e.Transcript = transcriptURL(l.id, r.Variant, id, r.Epoch)
		}
		e.OTel = report.TraceURL(o.TraceURL, r.TraceID, r.SpanID)
		b.Episodes = append(b.Episodes, e)
	}
	return b
}

// pretty indents JSON; a JSON string is shown as its text.
func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") == nil {
		return b.String()
	}
	return string(raw)
}

type transcript = harness.Transcript

// readTranscript reads the transcript r links to, from a file in the
// log's directory or below it only (internal/transcript), and only if it
// is r's episode's.
func readTranscript(logPath string, r *sink.Record) (*transcript, error) {
	link := r.Transcript
	if link == "" {
		return nil, nil
	}
	path, off, err := jsonl.ResolveTranscript(logPath, link)
	if err != nil {
		return nil, err
	}
	real, err := itranscript.Confine(logPath, path)
	if err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	f, err := safeopen.Open(real)
	if err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	defer f.Close()
	line, err := jsonl.ReadLineFrom(f, off, nil)
	if err == nil {
		err = itranscript.Check(line, r.SampleID, r.Epoch)
	}
	if err != nil {
		return nil, fmt.Errorf("view: transcript %s: %w", link, err)
	}
	var t transcript
	if err := json.Unmarshal(line, &t); err != nil {
		return nil, fmt.Errorf("view: transcript %s: %w", link, err)
	}
	return &t, nil
}

type transcriptBody struct {
	Sample string
	Epoch  int
	Link   string
	Err    string
	Events []eventRow
}

type eventRow struct {
	harness.Event
	At, Took      string
	Input, Output string
}

func transcriptData(r *sink.Record, t *transcript, err error) *transcriptBody {
	b := &transcriptBody{Sample: r.SampleID, Epoch: r.Epoch, Link: r.Transcript}
	switch {
	case err != nil:
		b.Err = err.Error()
	case t == nil:
		b.Err = "no transcript recorded"
	default:
		start := r.StartedAt
		if start.IsZero() && len(t.Events) > 0 {
			start = t.Events[0].Time
		}
		for _, ev := range t.Events {
			row := eventRow{Event: ev, At: "+" + ev.Time.Sub(start).Round(time.Microsecond).String(), Input: pretty(ev.Input), Output: pretty(ev.Output)}
			if ev.Duration > 0 {
				row.Took = ev.Duration.Round(time.Microsecond).String()
			}
			b.Events = append(b.Events, row)
		}
	}
	return b
}

// compareBody is the compare page.
type compareBody struct {
	Base, Head       string
	BaseURL, HeadURL string
	C                *report.Comparison
	Verdict          []string
	Forest           string
	Regressions      []flipRow
	Improvements     []flipRow
	Margin           float64
}

type flipRow struct {
	report.Flip
	BaseURL, HeadURL string
}

func compareData(base, head *snapshot, margin float64, o *Options) *compareBody {
	co := &report.CompareOptions{Margin: margin}
	if o.Report != nil {
		co.Level = o.Report.Level
	}
	c := report.Compare(base.Report, head.Report, co)
	b := &compareBody{Base: base.ID, Head: head.ID, BaseURL: runURL(base.ID), HeadURL: runURL(head.ID), C: c, Verdict: c.Verdict(), Margin: margin}
	rows := []plot.Interval{diffRow("all samples", c.PassRate, "p "+pval(c.PassRate.P))}
	for _, t := range c.ByTag {
		rows = append(rows, diffRow(t.Tag+"="+t.Value, t.PassRate, "Holm p "+pval(t.HolmP)))
	}
	extent := 0.1
	for _, r := range rows {
		for _, v := range []float64{r.Lo, r.Hi, r.Value} {
			if !math.IsNaN(v) {
				extent = max(extent, math.Abs(v))
			}
		}
	}
	extent = min(1, math.Ceil(extent*10)/10)
	refs := []float64{0}
	if margin > 0 {
		refs = append(refs, -margin)
	}
	b.Forest = plot.Intervals("head − base pass rate (points), paired by sample", rows,
		&plot.IntervalOptions{Min: -extent, Max: extent, Format: plot.SignedPercent, Points: true, Ref: refs})
	for _, f := range c.Flips {
		fr := flipRow{f, sampleURL(base.ID, f.SampleID), sampleURL(head.ID, f.SampleID)}
		if f.Regression {
			b.Regressions = append(b.Regressions, fr)
		} else {
			b.Improvements = append(b.Improvements, fr)
		}
	}
	return b
}

func diffRow(label string, d stats.Difference, note string) plot.Interval {
	color := plot.ColorNeutral
	switch {
	case d.Hi < 0:
		color = plot.ColorFail
	case d.Lo > 0:
		color = plot.ColorPass
	}
	return plot.Interval{Label: label, Value: d.Mean, Lo: d.Lo, Hi: d.Hi, Note: note, Color: color}
}

// WriteHTML writes the run page of the log at logPath as one
// self-contained HTML file (inline style and SVG, no script, no links to
// other pages): what `proctor report -html` writes.
func WriteHTML(w io.Writer, logPath string, opts *Options) error {
	o := opts.withDefaults()
	pages, err := parsePages()
	if err != nil {
		return err
	}
	l := newLogState(filepath.Base(logPath), logPath, o.Report, maphash.MakeSeed())
	snap, err := l.snapshot()
	if err != nil {
		return err
	}
	if snap.Err != nil {
		return snap.Err
	}
	css, err := files.ReadFile("assets/view.css")
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	p := &page{Title: runTitle(snap), Static: true, CSS: template.CSS(css), Body: runData(snap, &o, true)}
	var buf bytes.Buffer
	if err := pages["run"].ExecuteTemplate(&buf, "layout", p); err != nil {
		return fmt.Errorf("view: %w", err)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// worstCase is what a view adds to a pass rate that leaves out errored and
// unscored episodes: the range it lies in whatever they would have been.
func worstCase(lower, upper float64) string {
	return fmt.Sprintf(" (worst case %s–%s)", pct(lower), pct(upper))
}
