// Package numfmt holds the number formats of proctor's reports, so that
// the text report, the viewer and the HTML report print the same numbers.
package numfmt

import (
	"fmt"
	"math"
	"time"

	"github.com/proctor-evals/proctor/stats"
)

// Pct prints a rate as a percentage with one decimal.
func Pct(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

// MS prints a duration given in milliseconds to about three digits.
func MS(f float64) string {
	d := time.Duration(f * float64(time.Millisecond))
	switch {
	case d >= 10*time.Second:
		d = d.Round(100 * time.Millisecond)
	case d >= time.Second:
		d = d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		d = d.Round(10 * time.Microsecond)
	}
	return d.String()
}

// Pts prints a pass-rate difference in percentage points.
func Pts(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f pts", 100*f)
}

// Signed prints a difference with its sign and three decimals.
func Signed(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return fmt.Sprintf("%+.3f", f)
}

// Num prints a statistic with three decimals.
func Num(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", f)
}

// P prints a p-value.
func P(p float64) string {
	switch {
	case math.IsNaN(p):
		return "n/a"
	case p < 1e-4:
		return "<0.0001"
	default:
		return fmt.Sprintf("%.4f", p)
	}
}

// GroupCI prints a group's interval, and its method when it is not the
// report's (a group of one sample, say).
func GroupCI(iv stats.Interval, method string) string {
	s := fmt.Sprintf("[%s, %s]", Pct(iv.Lo), Pct(iv.Hi))
	if iv.Method != method {
		s += " " + iv.Method
	}
	return s
}

// USD prints a cost in dollars to two significant digits and at least
// cents ($0.0042, $0.50, $3.41, $1234.57), so that a run of cheap calls
// never shows as $0.00.
func USD(f float64) string {
	a := math.Abs(f)
	switch {
	case a == 0:
		return "$0.00"
	case math.IsNaN(f) || math.IsInf(f, 0):
		return fmt.Sprintf("$%v", f)
	case a < 1e-12:
		return "<$0.000000000001"
	}
	return fmt.Sprintf("$%.*f", max(2, 1-int(math.Floor(math.Log10(a)))), f)
}

// Bytes formats a size in bytes: "512 B", "1.5 kB", "2.0 MB", "1.1 GB"
// (binary multiples); a negative size (a difference) keeps its sign.
func Bytes(n int64) string {
	switch a := max(n, -n); {
	case a >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
