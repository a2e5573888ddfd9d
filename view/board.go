package view

// The leaderboard of a log of variants: a section of its run page (and of
// `proctor report -html`) and a page of its own.

import (
	"fmt"
	"math"
	"strings"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/numfmt"
	"github.com/proctor-evals/proctor/view/internal/plot"
)

type leaderboardBody struct {
	Path   string
	RunURL string
	Report *report.Report
	Board  *boardBody
}

type boardBody struct {
	Level      string
	Rows       []boardRow
	Eliminated []string
	PBestNote  string
	Frontier   string
	Pareto     string // SVG
	Pairs      []report.VariantDifference
}

type boardRow struct {
	Rank                                           int
	Variant                                        string
	Samples, Episodes                              int
	Rate, CI, Worst, Cost, P50, P95, PBest, Status string
	Pareto                                         bool
}

// boardData is what the board template shows of a leaderboard: the text
// report's numbers, formatted alike.
func boardData(lb *report.Leaderboard) *boardBody {
	b := &boardBody{Level: fmt.Sprintf("%g%%", 100*lb.Level), Pairs: lb.Pairs, Frontier: strings.Join(lb.Frontier, ", ")}
	var points []plot.ParetoPoint
	for i, s := range lb.Variants {
		r := boardRow{Rank: i + 1, Variant: s.Variant, Samples: s.Samples, Episodes: s.Episodes, Rate: "n/a", Cost: "n/a", PBest: "n/a",
			P50: ms(s.Latency.P50MS), P95: ms(s.Latency.P95MS), Pareto: s.Pareto}
		if !math.IsNaN(s.PassRate) {
			r.Rate, r.CI = pct(s.PassRate), fmt.Sprintf("[%s, %s]", pct(s.Interval.Lo), pct(s.Interval.Hi))
		}
		if wc := s.WorstCase; wc != nil {
			r.Worst = fmt.Sprintf("%s–%s (%d no verdict)", pct(wc.Lower.PassRate), pct(wc.Upper.PassRate), wc.NoVerdict)
		}
		if !math.IsNaN(s.CostPerSample) {
			r.Cost = numfmt.USD(s.CostPerSample)
		}
		if !math.IsNaN(s.PBest) {
			r.PBest = pct(s.PBest)
		}
		switch {
		case s.Eliminated != nil:
			r.Status = "eliminated by " + s.Eliminated.By
			b.Eliminated = append(b.Eliminated, s.Variant+" "+report.EliminationText(s.Eliminated))
		case s.Sequential != nil:
			r.Status = "sequential gate: " + string(s.Sequential.Decision)
		}
		b.Rows = append(b.Rows, r)
		lo, hi := s.Interval.Lo, s.Interval.Hi
		if math.IsNaN(s.PassRate) {
			lo, hi = math.NaN(), math.NaN()
		}
		points = append(points, plot.ParetoPoint{Label: s.Variant, X: s.CostPerSample, Y: s.PassRate, Lo: lo, Hi: hi, Frontier: s.Pareto})
	}
	b.PBestNote = lb.PBestNote()
	b.Pareto = plot.Pareto("pass rate against cost per sample", points)
	return b
}

// variantRates are the run page's pass-rate chart for a log of variants:
// one row per variant, never a pooled one.
func variantRates(lb *report.Leaderboard) []plot.Interval {
	var rows []plot.Interval
	for _, s := range lb.Variants {
		lo, hi := s.Interval.Lo, s.Interval.Hi
		if math.IsNaN(s.PassRate) {
			lo, hi = math.NaN(), math.NaN()
		}
		rows = append(rows, plot.Interval{Label: s.Variant, Value: s.PassRate, Lo: lo, Hi: hi, Note: fmt.Sprintf("n=%d", s.Samples)})
	}
	return rows
}
