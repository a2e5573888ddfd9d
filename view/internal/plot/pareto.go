package plot

import (
	"fmt"
	"math"
	"strings"
)

// ParetoPoint is one variant of a Pareto chart: its pass rate Y with its
// interval, against its cost per sample X.
type ParetoPoint struct {
	Label    string
	X        float64 // cost per sample, USD; NaN when not on record
	Y        float64
	Lo, Hi   float64
	Frontier bool // on the Pareto frontier: joined by the frontier line
}

// Pareto draws pass rate against cost per sample: each point with its
// error bar and label, the points on the frontier filled and joined,
// cheapest first, by a line; the others hollow. Points without a cost or
// a pass rate are listed under the axis instead.
func Pareto(title string, points []ParetoPoint) string {
	const h, left, right, top, bottom = 320, 56, 120, 16, 56
	s := newSVG(title, h)
	base := float64(h - bottom)
	hiX := 0.0
	var drawn, missing []ParetoPoint
	for _, p := range points {
		if math.IsNaN(p.X) || math.IsNaN(p.Y) {
			missing = append(missing, p)
			continue
		}
		drawn = append(drawn, p)
		hiX = max(hiX, p.X)
	}
	if hiX == 0 {
		hiX = 1
	}
	xt := ticks(0, hiX*1.1, 5)
	if n := len(xt); n >= 2 && xt[n-1] < hiX*1.1 {
		xt = append(xt, xt[n-1]+(xt[1]-xt[0])) // room right of the costliest point for its label
	}
	hiX = xt[len(xt)-1]
	x := scale{0, hiX, left, Width - right}
	y := scale{0, 1, base, top}
	for _, t := range ticks(0, 1, 4) {
		yy := y.at(t)
		s.line(left, yy, Width-right, yy, "#eeeeee", 1, false)
		s.text(left-6, yy+4, "end", colorMuted, Percent(t))
	}
	for _, t := range xt {
		xx := x.at(t)
		s.line(xx, base, xx, base+4, colorAxis, 1, false)
		s.text(xx, base+16, "middle", colorMuted, usd(t))
	}
	s.line(left, base, Width-right, base, colorAxis, 1, false)
	s.line(left, top, left, base, colorAxis, 1, false)
	s.text((left+Width-right)/2, base+34, "middle", colorMuted, "cost per sample")
	if len(drawn) == 0 {
		s.text(Width/2, base/2, "middle", colorMuted, "no variant with a pass rate and a cost")
	}
	var front []string
	for _, p := range drawn {
		if p.Frontier {
			front = append(front, c(x.at(p.X))+","+c(y.at(p.Y)))
		}
	}
	if len(front) > 1 {
		fmt.Fprintf(&s.b, `<polyline class="frontier" points="%s" fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="6 3"/>`, strings.Join(front, " "), ColorPass)
	}
	for _, p := range drawn {
		px, py := x.at(p.X), y.at(p.Y)
		if !math.IsNaN(p.Lo) && !math.IsNaN(p.Hi) {
			s.line(px, y.at(p.Lo), px, y.at(p.Hi), colorText, 1.5, false)
			s.line(px-4, y.at(p.Lo), px+4, y.at(p.Lo), colorText, 1.5, false)
			s.line(px-4, y.at(p.Hi), px+4, y.at(p.Hi), colorText, 1.5, false)
		}
		fill, class := "#ffffff", "variant"
		if p.Frontier {
			fill, class = ColorPass, "variant on-frontier"
		}
		fmt.Fprintf(&s.b, `<circle class="%s" cx="%s" cy="%s" r="5" fill="%s" stroke="%s" stroke-width="1.5"><title>%s</title></circle>`,
			class, c(px), c(py), fill, ColorPass, esc(p.Label+": "+Percent(p.Y)+" ["+Percent(p.Lo)+", "+Percent(p.Hi)+"] at "+usd(p.X)+" a sample"))
		s.text(px+8, py-6, "start", colorText, clip(p.Label, 18))
	}
	if len(missing) > 0 {
		var names []string
		for _, p := range missing {
			names = append(names, p.Label)
		}
		s.text(left, h-4, "start", colorMuted, clip("not drawn (no pass rate or no cost): "+strings.Join(names, ", "), 100))
	}
	return s.end()
}

// usd formats a cost: four significant decimals under a dollar.
func usd(f float64) string {
	switch {
	case f == 0:
		return "$0"
	case f < 0.01:
		return "$" + num(f, 4)
	case f < 1:
		return "$" + num(f, 3)
	}
	return "$" + num(f, 2)
}
