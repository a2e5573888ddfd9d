// Package plot draws the viewer's charts as SVG: intervals (bars with
// error bars, forest plots), histograms, stacked time series and trends.
//
// The charts are written by hand rather than with a chart library: none of
// the maintained Go ones emits small, clean SVG with its text as <text>
// elements (selectable, searchable, readable by a screen reader) without
// pulling in font rasterizers and image codecs, and the viewer needs only
// five shapes. Output is deterministic (fixed sizes, fixed number
// formatting, no maps iterated), so golden files test it. Every label is
// escaped, since labels come from tags and sample IDs an agent may shape;
// colours are presentation attributes, not style attributes, so that a
// page whose Content-Security-Policy forbids inline styles draws them.
package plot

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Width is the width of every chart, in SVG user units (CSS pixels when
// drawn at natural size).
const Width = 720

// Colours of the charts; the series of Stacked take them in order.
var (
	ColorPass    = "#2e7d32"
	ColorFail    = "#c62828"
	ColorError   = "#ef6c00"
	ColorOther   = "#7b1fa2"
	ColorNeutral = "#1565c0"
	colorAxis    = "#9e9e9e"
	colorText    = "#212121"
	colorMuted   = "#616161"
)

// Format formats an axis or value number.
type Format func(float64) string

// Percent formats a proportion as a percentage: 0.5 → "50.0%".
func Percent(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return num(100*f, 1) + "%"
}

// Points formats a difference of proportions in percentage points:
// 0.05 → "+5.0 pts".
func Points(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	s := num(100*f, 1)
	if !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	return s + " pts"
}

// SignedPercent formats a difference of proportions as signed
// percentage points without the unit, for a chart titled with it:
// 0.05 → "+5.0".
func SignedPercent(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	s := num(100*f, 1)
	if !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	return s
}

// Count formats a count.
func Count(f float64) string { return strconv.FormatInt(int64(math.Round(f)), 10) }

// num formats f with d decimals, without a negative zero.
func num(f float64, d int) string {
	s := strconv.FormatFloat(f, 'f', d, 64)
	if strings.Trim(s, "-0.") == "" {
		s = strings.TrimPrefix(s, "-")
	}
	return s
}

// svg builds one chart.
type svg struct {
	b strings.Builder
}

func newSVG(title string, h int) *svg {
	s := &svg{}
	fmt.Fprintf(&s.b, `<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 %d %d" width="%d" height="%d" role="img" font-family="system-ui, sans-serif" font-size="12">`, Width, h, Width, h)
	s.b.WriteString("<title>" + esc(title) + "</title>")
	return s
}

func (s *svg) end() string {
	s.b.WriteString("</svg>")
	return s.b.String()
}

func esc(s string) string { return html.EscapeString(s) }

// c formats a coordinate.
func c(f float64) string { return num(f, 1) }

func (s *svg) line(x1, y1, x2, y2 float64, color string, width float64, dash bool) {
	d := ""
	if dash {
		d = ` stroke-dasharray="4 3"`
	}
	fmt.Fprintf(&s.b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>`, c(x1), c(y1), c(x2), c(y2), color, num(width, 1), d)
}

func (s *svg) rect(x, y, w, h float64, color, tip string) {
	if w <= 0 || h <= 0 {
		return
	}
	fmt.Fprintf(&s.b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s">`, c(x), c(y), c(w), c(h), color)
	if tip != "" {
		s.b.WriteString("<title>" + esc(tip) + "</title>")
	}
	s.b.WriteString("</rect>")
}

func (s *svg) circle(x, y, r float64, color string) {
	fmt.Fprintf(&s.b, `<circle cx="%s" cy="%s" r="%s" fill="%s"/>`, c(x), c(y), num(r, 1), color)
}

// text writes a label; anchor is start, middle or end.
func (s *svg) text(x, y float64, anchor, color, t string) {
	fmt.Fprintf(&s.b, `<text x="%s" y="%s" text-anchor="%s" fill="%s">%s</text>`, c(x), c(y), anchor, color, esc(t))
}

// clip shortens a label to n runes.
func clip(s string, n int) string {
	r := []rune(strings.Join(strings.Fields(s), " "))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}

// scale maps [lo, hi] onto [x0, x1], clamping.
type scale struct{ lo, hi, x0, x1 float64 }

func (sc scale) at(v float64) float64 {
	if sc.hi == sc.lo {
		return sc.x0
	}
	v = min(max(v, sc.lo), sc.hi)
	return sc.x0 + (v-sc.lo)/(sc.hi-sc.lo)*(sc.x1-sc.x0)
}

// ticks returns about n round values spanning [lo, hi].
func ticks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		return []float64{lo}
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step-1e-9) * step; v <= hi+step*1e-9; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

// Interval is one row of an interval chart: a value with its confidence
// interval (NaN bounds for none).
type Interval struct {
	Label  string
	Value  float64
	Lo, Hi float64
	Note   string // after the value, e.g. "n=40" or "Holm p 0.03"
	Color  string // default ColorNeutral
}

// IntervalOptions shape an interval chart. The zero value draws bars on
// [0, 1] as percentages.
type IntervalOptions struct {
	Min, Max float64 // the axis; both 0 means [0, 1]
	Format   Format  // default Percent
	// Points draws a point on a whisker instead of a bar from Min: a
	// forest plot.
	Points bool
	// Ref draws a dashed reference line at *Ref (0 for a difference, the
	// non-inferiority margin…).
	Ref []float64
}

const (
	rowH     = 22
	labelW   = 150
	valueW   = 250
	topPad   = 8
	axisPadB = 24
)

// Intervals draws one row per interval: a bar (or a point) at the value
// with an error bar from Lo to Hi, the label on the left and the value,
// its interval and its note on the right, over an axis.
func Intervals(title string, rows []Interval, o *IntervalOptions) string {
	var opt IntervalOptions
	if o != nil {
		opt = *o
	}
	if opt.Min == 0 && opt.Max == 0 {
		opt.Max = 1
	}
	if opt.Format == nil {
		opt.Format = Percent
	}
	h := topPad + rowH*max(len(rows), 1) + axisPadB
	s := newSVG(title, h)
	sc := scale{opt.Min, opt.Max, labelW, Width - valueW}
	bottom := float64(topPad + rowH*max(len(rows), 1))
	for _, t := range ticks(opt.Min, opt.Max, 5) {
		x := sc.at(t)
		s.line(x, topPad, x, bottom, "#eeeeee", 1, false)
		s.line(x, bottom, x, bottom+4, colorAxis, 1, false)
		s.text(x, bottom+16, "middle", colorMuted, opt.Format(t))
	}
	s.line(sc.x0, bottom, sc.x1, bottom, colorAxis, 1, false)
	for _, r := range opt.Ref {
		x := sc.at(r)
		s.line(x, topPad-4, x, bottom, colorMuted, 1, true)
	}
	if len(rows) == 0 {
		s.text(Width/2, topPad+15, "middle", colorMuted, "no data")
	}
	for i, r := range rows {
		y := float64(topPad + rowH*i)
		mid := y + rowH/2
		color := r.Color
		if color == "" {
			color = ColorNeutral
		}
		s.text(labelW-8, mid+4, "end", colorText, clip(r.Label, 22))
		value := opt.Format(r.Value)
		if !math.IsNaN(r.Lo) && !math.IsNaN(r.Hi) {
			value += " [" + opt.Format(r.Lo) + ", " + opt.Format(r.Hi) + "]"
		}
		tip := r.Label + ": " + value
		if !math.IsNaN(r.Value) {
			if opt.Points {
				s.circle(sc.at(r.Value), mid, 4, color)
			} else {
				s.rect(sc.x0, y+4, sc.at(r.Value)-sc.x0, rowH-8, color, tip)
			}
		}
		if !math.IsNaN(r.Lo) && !math.IsNaN(r.Hi) {
			lo, hi := sc.at(r.Lo), sc.at(r.Hi)
			s.line(lo, mid, hi, mid, colorText, 1.5, false)
			s.line(lo, mid-5, lo, mid+5, colorText, 1.5, false)
			s.line(hi, mid-5, hi, mid+5, colorText, 1.5, false)
		}
		if r.Note != "" {
			value += "  " + r.Note
		}
		s.text(Width-valueW+8, mid+4, "start", colorText, clip(value, 42))
	}
	return s.end()
}

// Bin is one bar of a histogram.
type Bin struct {
	Label string // the bin's lower edge, shown under some bars
	Count int
}

// Histogram draws the bins as columns, with the largest count marked and
// the labels of evenly spaced bins under the axis.
func Histogram(title, xLabel string, bins []Bin, color string) string {
	const h, left, right, top, bottom = 180, 48, 16, 12, 40
	s := newSVG(title, h)
	if color == "" {
		color = ColorNeutral
	}
	peak := 0
	for _, b := range bins {
		peak = max(peak, b.Count)
	}
	plotW := float64(Width - left - right)
	base := float64(h - bottom)
	s.line(left, base, Width-right, base, colorAxis, 1, false)
	s.line(left, top, left, base, colorAxis, 1, false)
	s.text(left-6, top+10, "end", colorMuted, Count(float64(peak)))
	s.text(left-6, base, "end", colorMuted, "0")
	s.text(Width/2, h-4, "middle", colorMuted, xLabel)
	if len(bins) == 0 || peak == 0 {
		s.text(Width/2, base/2, "middle", colorMuted, "no data")
		return s.end()
	}
	w := plotW / float64(len(bins))
	every := max(1, int(math.Ceil(float64(len(bins))*70/plotW)))
	for i, b := range bins {
		x := left + w*float64(i)
		bh := (base - top) * float64(b.Count) / float64(peak)
		s.rect(x+0.5, base-bh, w-1, bh, color, fmt.Sprintf("%s: %d", b.Label, b.Count))
		if i%every == 0 {
			s.line(x, base, x, base+4, colorAxis, 1, false)
			s.text(x, base+16, "middle", colorMuted, b.Label)
		}
	}
	return s.end()
}

// Series names one layer of a stacked chart.
type Series struct {
	Name  string
	Color string
}

// Column is one time bucket of a stacked chart: a count per series.
type Column struct {
	Label  string
	Counts []int
}

// Stacked draws columns of stacked counts (episodes finished per time
// bucket by status, say) with a legend.
func Stacked(title string, series []Series, cols []Column) string {
	const h, left, right, top, bottom = 200, 48, 16, 28, 28
	s := newSVG(title, h)
	x := float64(left)
	for _, se := range series {
		s.rect(x, 6, 10, 10, se.Color, "")
		s.text(x+14, 15, "start", colorText, se.Name)
		x += 24 + 7*float64(len([]rune(se.Name)))
	}
	peak := 0
	for _, col := range cols {
		t := 0
		for _, n := range col.Counts {
			t += n
		}
		peak = max(peak, t)
	}
	base := float64(h - bottom)
	plotW := float64(Width - left - right)
	s.line(left, base, Width-right, base, colorAxis, 1, false)
	s.line(left, top, left, base, colorAxis, 1, false)
	s.text(left-6, top+10, "end", colorMuted, Count(float64(peak)))
	s.text(left-6, base, "end", colorMuted, "0")
	if len(cols) == 0 || peak == 0 {
		s.text(Width/2, (top+base)/2, "middle", colorMuted, "no data")
		return s.end()
	}
	w := plotW / float64(len(cols))
	every := max(1, int(math.Ceil(float64(len(cols))*90/plotW)))
	for i, col := range cols {
		x := left + w*float64(i)
		y := base
		for j, n := range col.Counts {
			if j >= len(series) || n == 0 {
				continue
			}
			bh := (base - top) * float64(n) / float64(peak)
			y -= bh
			s.rect(x+0.5, y, max(w-1, 0.5), bh, series[j].Color, fmt.Sprintf("%s %s: %d", col.Label, series[j].Name, n))
		}
		if i%every == 0 {
			s.line(x, base, x, base+4, colorAxis, 1, false)
			s.text(x, base+16, "start", colorMuted, col.Label)
		}
	}
	return s.end()
}

// Point is one run of a trend: its pass rate and interval.
type Point struct {
	Label  string // under the axis: the run's date, say
	Y      float64
	Lo, Hi float64
}

// Trend draws points evenly spaced in the order given (oldest first),
// joined by a line, each with its error bar, on a [0, 1] axis.
func Trend(title string, points []Point) string {
	const h, left, right, top, bottom = 200, 56, 24, 12, 40
	s := newSVG(title, h)
	base := float64(h - bottom)
	y := scale{0, 1, base, top}
	for _, t := range ticks(0, 1, 4) {
		yy := y.at(t)
		s.line(left, yy, Width-right, yy, "#eeeeee", 1, false)
		s.text(left-6, yy+4, "end", colorMuted, Percent(t))
	}
	s.line(left, base, Width-right, base, colorAxis, 1, false)
	if len(points) == 0 {
		s.text(Width/2, base/2, "middle", colorMuted, "no runs")
		return s.end()
	}
	step := float64(Width-left-right) / float64(len(points))
	xAt := func(i int) float64 { return left + step*(float64(i)+0.5) }
	var path []string
	for i, p := range points {
		if !math.IsNaN(p.Y) {
			path = append(path, c(xAt(i))+","+c(y.at(p.Y)))
		}
	}
	if len(path) > 1 {
		fmt.Fprintf(&s.b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, strings.Join(path, " "), ColorNeutral)
	}
	every := max(1, int(math.Ceil(float64(len(points))*90/float64(Width-left-right))))
	for i, p := range points {
		x := xAt(i)
		if !math.IsNaN(p.Lo) && !math.IsNaN(p.Hi) {
			s.line(x, y.at(p.Lo), x, y.at(p.Hi), colorText, 1.5, false)
			s.line(x-4, y.at(p.Lo), x+4, y.at(p.Lo), colorText, 1.5, false)
			s.line(x-4, y.at(p.Hi), x+4, y.at(p.Hi), colorText, 1.5, false)
		}
		if !math.IsNaN(p.Y) {
			fmt.Fprintf(&s.b, `<circle cx="%s" cy="%s" r="4" fill="%s"><title>%s</title></circle>`, c(x), c(y.at(p.Y)), ColorNeutral,
				esc(p.Label+": "+Percent(p.Y)+" ["+Percent(p.Lo)+", "+Percent(p.Hi)+"]"))
		}
		if i%every == 0 {
			s.text(x, base+16, "middle", colorMuted, clip(p.Label, 14))
		}
	}
	return s.end()
}
