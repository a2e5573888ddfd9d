package plot_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/view/internal/plot"
)

func TestTimeline(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 3, 2, 2, 0, 0, 0, time.UTC)
	golden(t, "timeline", plot.Timeline("pass rate of nightly over time", []plot.TimePoint{
		{T: day, Label: "mon", Y: 0.9, Lo: 0.86, Hi: 0.93},
		{T: day.Add(24 * time.Hour), Label: "tue", Y: 0.89, Lo: 0.85, Hi: 0.92},
		{T: day.Add(48 * time.Hour), Label: "wed", Y: 0.69, Lo: 0.64, Hi: 0.74, Alert: true},
		{T: day.Add(5 * 24 * time.Hour), Label: "sat", Y: math.NaN(), Lo: math.NaN(), Hi: math.NaN()},
		{T: day.Add(6 * 24 * time.Hour), Label: "<sun>", Y: 1, Lo: 0.98, Hi: 1, Mark: "harness"},
	}, nil))
}

// TestTimelineSpacesPointsByTime: the x of a point is proportional to
// its time, not its rank; one point, or points at one instant, do not
// divide by zero.
func TestTimelineSpacesPointsByTime(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	svg := plot.Timeline("t", []plot.TimePoint{
		{T: day, Y: 0.5, Lo: math.NaN(), Hi: math.NaN()},
		{T: day.Add(time.Hour), Y: 0.5, Lo: math.NaN(), Hi: math.NaN()},
		{T: day.Add(10 * time.Hour), Y: 0.5, Lo: math.NaN(), Hi: math.NaN()},
	}, nil)
	xs := circleXs(svg)
	if len(xs) != 3 {
		t.Fatalf("want 3 points, got %v", xs)
	}
	if r := (xs[2] - xs[1]) / (xs[1] - xs[0]); math.Abs(r-9) > 0.1 {
		t.Errorf("gaps of 1 h and 9 h drawn in the ratio %.2f, want 9", r)
	}
	for _, one := range [][]plot.TimePoint{{{T: day, Y: 0.5}}, {{T: day, Y: 0.5}, {T: day, Y: 0.7}}} {
		svg := plot.Timeline("t", one, &plot.TimelineOptions{Max: 2, Format: plot.Count})
		if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
			t.Errorf("degenerate timeline: %s", svg)
		}
	}
}

func circleXs(svg string) []float64 {
	var xs []float64
	for _, part := range strings.Split(svg, `<circle cx="`)[1:] {
		var x float64
		for i, r := range part {
			if r == '"' {
				x = parseFloat(part[:i])
				break
			}
		}
		xs = append(xs, x)
	}
	return xs
}

func parseFloat(s string) float64 {
	var f float64
	var frac, div float64 = 0, 1
	dot := false
	for _, r := range s {
		switch {
		case r == '.':
			dot = true
		case dot:
			div *= 10
			frac += float64(r-'0') / div
		default:
			f = f*10 + float64(r-'0')
		}
	}
	return f + frac
}
