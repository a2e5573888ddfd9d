package plot_test

import (
	"encoding/xml"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-evals/proctor/view/internal/plot"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name.golden, or rewrites it with
// -update. It also checks that got is well-formed XML: a chart with an
// unescaped label would not be.
func golden(t *testing.T, name, got string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(got))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s: not well-formed SVG: %v", name, err)
		}
	}
	path := filepath.Join("testdata", name)
	if filepath.Ext(name) == "" {
		path += ".golden"
	}
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./view/internal/plot -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from %s (run go test ./view/internal/plot -update if the change is intended)\ngot:\n%s", name, path, got)
	}
}

func TestIntervals(t *testing.T) {
	t.Parallel()
	golden(t, "intervals", plot.Intervals("pass rate by difficulty", []plot.Interval{
		{Label: "easy", Value: 0.9, Lo: 0.8, Hi: 0.95, Note: "n=40"},
		{Label: "hard", Value: 0.35, Lo: 0.2, Hi: 0.5, Note: "n=12", Color: plot.ColorFail},
		{Label: "none scored", Value: math.NaN(), Lo: math.NaN(), Hi: math.NaN()},
		{Label: "a label far too long to fit in the left column of the chart", Value: 1, Lo: math.NaN(), Hi: math.NaN()},
	}, nil))
}

func TestForest(t *testing.T) {
	t.Parallel()
	golden(t, "forest", plot.Intervals("head − base by tag", []plot.Interval{
		{Label: "all", Value: -0.05, Lo: -0.12, Hi: 0.02},
		{Label: "repo=a", Value: 0.1, Lo: -0.3, Hi: 0.6, Note: "Holm p 0.4"},
	}, &plot.IntervalOptions{Min: -0.5, Max: 0.5, Format: plot.Points, Points: true, Ref: []float64{0, -0.02}}))
}

func TestHistogram(t *testing.T) {
	t.Parallel()
	var bins []plot.Bin
	for i := range 24 {
		bins = append(bins, plot.Bin{Label: plot.Count(float64(i * 10)), Count: (i * 7) % 11})
	}
	golden(t, "histogram", plot.Histogram("latency", "duration (ms)", bins, ""))
	golden(t, "histogram_empty", plot.Histogram("cost", "cost", nil, ""))
}

func TestStacked(t *testing.T) {
	t.Parallel()
	series := []plot.Series{{"pass", plot.ColorPass}, {"fail", plot.ColorFail}, {"error", plot.ColorError}}
	golden(t, "stacked", plot.Stacked("finished over time", series, []plot.Column{
		{"12:00:00", []int{5, 2, 0}}, {"12:00:10", []int{8, 1, 1}}, {"12:00:20", []int{0, 0, 0}}, {"12:00:30", []int{3, 4, 2}},
	}))
}

func TestTrend(t *testing.T) {
	t.Parallel()
	golden(t, "trend", plot.Trend("pass rate over runs", []plot.Point{
		{"2026-11-01", 0.6, 0.5, 0.7}, {"2026-11-08", 0.65, 0.55, 0.75}, {"2026-11-15", math.NaN(), math.NaN(), math.NaN()}, {"2026-11-22", 0.8, 0.72, 0.86},
	}))
}

// TestLabelsAreEscaped draws hostile labels: the SVG stays well-formed and
// holds no element a label tried to open.
func TestLabelsAreEscaped(t *testing.T) {
	t.Parallel()
	evil := `</text><script>alert(1)</script><a href="javascript:x">&amp;`
	out := plot.Intervals(evil, []plot.Interval{{Label: evil, Value: 0.5, Lo: 0.4, Hi: 0.6, Note: evil}}, nil) +
		plot.Histogram(evil, evil, []plot.Bin{{evil, 3}}, "") +
		plot.Stacked(evil, []plot.Series{{evil, plot.ColorPass}}, []plot.Column{{evil, []int{1}}}) +
		plot.Trend(evil, []plot.Point{{evil, 0.5, 0.4, 0.6}})
	for _, bad := range []string{"<script", "<a ", "</text><script"} {
		if strings.Contains(out, bad) {
			t.Errorf("output holds %q", bad)
		}
	}
	golden(t, "escaped", plot.Intervals(evil, []plot.Interval{{Label: evil, Value: 0.5, Lo: 0.4, Hi: 0.6}}, nil))
}

// TestPareto draws three variants, two on the frontier, one without a
// cost: the golden file is what the leaderboard shows.
func TestPareto(t *testing.T) {
	t.Parallel()
	golden(t, "pareto.svg", plot.Pareto("pass rate against cost per sample", []plot.ParetoPoint{
		{Label: "cheap", X: 0.003, Y: 0.5, Lo: 0.343, Hi: 0.657, Frontier: true},
		{Label: "strong", X: 0.03, Y: 0.866, Lo: 0.781, Hi: 0.95, Frontier: true},
		{Label: "mid", X: 0.06, Y: 0.65, Lo: 0.5, Hi: 0.8},
		{Label: "<unpriced>", X: math.NaN(), Y: 0.7, Lo: 0.6, Hi: 0.8},
	}))
	golden(t, "pareto_empty.svg", plot.Pareto("no variants", nil))
}
