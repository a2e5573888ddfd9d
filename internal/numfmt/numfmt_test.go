package numfmt

import (
	"math"
	"testing"

	"github.com/proctor-evals/proctor/stats"
)

func TestFormats(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Pct(0.4321), "43.2%"}, {Pct(math.NaN()), "n/a"},
		{MS(12345.678), "12.3s"}, {MS(1234.5678), "1.23s"}, {MS(12.34567), "12.35ms"}, {MS(0.5), "500µs"},
		{Pts(-0.0251), "-2.5 pts"}, {Signed(0.1234), "+0.123"}, {Num(1.23456), "1.235"},
		{P(0.00001), "<0.0001"}, {P(0.04567), "0.0457"}, {P(math.NaN()), "n/a"},
		{GroupCI(stats.Interval{Lo: 0.1, Hi: 0.2, Method: "wilson"}, "wilson"), "[10.0%, 20.0%]"},
		{GroupCI(stats.Interval{Lo: 0.1, Hi: 0.2, Method: "wilson"}, "cluster-robust"), "[10.0%, 20.0%] wilson"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// A cost keeps two significant digits, at least cents: a run of cheap
// calls never shows as $0.00 (nor a big one as $1234.5678).
func TestUSD(t *testing.T) {
	for f, want := range map[float64]string{
		0: "$0.00", 0.0042: "$0.0042", 0.004249: "$0.0042", 0.00012345: "$0.00012", 0.5: "$0.50",
		0.049: "$0.049", 3.41: "$3.41", 1234.5678: "$1234.57", 1e-12: "$0.0000000000010", 1e-15: "<$0.000000000001",
	} {
		if got := USD(f); got != want {
			t.Errorf("USD(%g) = %q, want %q", f, got, want)
		}
	}
}
