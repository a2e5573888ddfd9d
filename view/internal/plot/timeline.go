package plot

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// TimePoint is one run on a time axis: its value and interval (NaN bounds
// for none), a mark where what the run measured changed ("harness"), and
// whether it raised an alert.
type TimePoint struct {
	T      time.Time
	Label  string // the run, in the point's tooltip
	Y      float64
	Lo, Hi float64
	Mark   string
	Alert  bool
}

// TimelineOptions shape a timeline. The zero value draws [0, 1] as
// percentages.
type TimelineOptions struct {
	Min, Max float64 // the axis; both 0 means [0, 1]
	Format   Format  // default Percent
}

// Timeline draws points at their times (UTC) on the x axis, joined by a
// line, each with its error bar; a mark is a dashed vertical line labelled
// at the top, an alert a red ring around the point.
func Timeline(title string, points []TimePoint, o *TimelineOptions) string {
	const h, left, right, top, bottom = 220, 64, 24, 24, 40
	var opt TimelineOptions
	if o != nil {
		opt = *o
	}
	if opt.Min == 0 && opt.Max == 0 {
		opt.Max = 1
	}
	if opt.Format == nil {
		opt.Format = Percent
	}
	s := newSVG(title, h)
	base := float64(h - bottom)
	y := scale{opt.Min, opt.Max, base, top}
	for _, t := range ticks(opt.Min, opt.Max, 4) {
		yy := y.at(t)
		s.line(left, yy, Width-right, yy, "#eeeeee", 1, false)
		s.text(left-6, yy+4, "end", colorMuted, opt.Format(t))
	}
	s.line(left, base, Width-right, base, colorAxis, 1, false)
	if len(points) == 0 {
		s.text(Width/2, base/2, "middle", colorMuted, "no runs")
		return s.end()
	}
	t0, t1 := points[0].T, points[0].T
	for _, p := range points {
		if p.T.Before(t0) {
			t0 = p.T
		}
		if p.T.After(t1) {
			t1 = p.T
		}
	}
	// One run, or runs at one instant, sit in the middle.
	pad := max(t1.Sub(t0)/20, time.Minute)
	x := scale{float64(t0.Add(-pad).UnixMilli()), float64(t1.Add(pad).UnixMilli()), left, Width - right}
	xAt := func(t time.Time) float64 { return x.at(float64(t.UnixMilli())) }
	for _, t := range timeTicks(t0.Add(-pad), t1.Add(pad), 7) {
		xx := xAt(t.at)
		s.line(xx, base, xx, base+4, colorAxis, 1, false)
		s.text(xx, base+16, "middle", colorMuted, t.label)
	}
	for _, p := range points {
		if p.Mark != "" {
			xx := xAt(p.T)
			s.line(xx, top-8, xx, base, ColorOther, 1, true)
			s.text(xx+3, top-10, "start", ColorOther, clip(p.Mark, 24))
		}
	}
	var path []string
	for _, p := range points {
		if !math.IsNaN(p.Y) {
			path = append(path, c(xAt(p.T))+","+c(y.at(p.Y)))
		}
	}
	if len(path) > 1 {
		fmt.Fprintf(&s.b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, strings.Join(path, " "), ColorNeutral)
	}
	for _, p := range points {
		xx := xAt(p.T)
		if !math.IsNaN(p.Lo) && !math.IsNaN(p.Hi) {
			s.line(xx, y.at(p.Lo), xx, y.at(p.Hi), colorText, 1.5, false)
			s.line(xx-4, y.at(p.Lo), xx+4, y.at(p.Lo), colorText, 1.5, false)
			s.line(xx-4, y.at(p.Hi), xx+4, y.at(p.Hi), colorText, 1.5, false)
		}
		if math.IsNaN(p.Y) {
			continue
		}
		tip := p.Label + " " + p.T.UTC().Format("2006-01-02 15:04Z") + ": " + opt.Format(p.Y)
		if !math.IsNaN(p.Lo) && !math.IsNaN(p.Hi) {
			tip += " [" + opt.Format(p.Lo) + ", " + opt.Format(p.Hi) + "]"
		}
		if p.Mark != "" {
			tip += "; changed: " + p.Mark
		}
		if p.Alert {
			tip += "; drift"
			fmt.Fprintf(&s.b, `<circle class="alert" cx="%s" cy="%s" r="8" fill="none" stroke="%s" stroke-width="2"/>`, c(xx), c(y.at(p.Y)), ColorFail)
		}
		fmt.Fprintf(&s.b, `<circle cx="%s" cy="%s" r="4" fill="%s"><title>%s</title></circle>`, c(xx), c(y.at(p.Y)), ColorNeutral, esc(tip))
	}
	return s.end()
}

type timeTick struct {
	at    time.Time
	label string
}

// timeTicks are about n round instants (UTC) in [lo, hi], labelled at
// the precision their spacing needs.
func timeTicks(lo, hi time.Time, n int) []timeTick {
	span := hi.Sub(lo)
	steps := []struct {
		d      time.Duration
		layout string
	}{
		{time.Minute, "15:04"}, {5 * time.Minute, "15:04"}, {15 * time.Minute, "15:04"}, {time.Hour, "01-02 15:04"},
		{3 * time.Hour, "01-02 15:04"}, {6 * time.Hour, "01-02 15:04"}, {24 * time.Hour, "2006-01-02"},
		{7 * 24 * time.Hour, "2006-01-02"}, {30 * 24 * time.Hour, "2006-01"}, {365 * 24 * time.Hour, "2006"},
	}
	step := steps[len(steps)-1]
	for _, st := range steps {
		if span/st.d <= time.Duration(n) {
			step = st
			break
		}
	}
	var out []timeTick
	for t := lo.UTC().Truncate(step.d); !t.After(hi); t = t.Add(step.d) {
		if !t.Before(lo) {
			out = append(out, timeTick{t, t.Format(step.layout)})
		}
	}
	return out
}
