package stats_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/stats"
)

// paperBets are the predictable plug-in bets of Waudby-Smith & Ramdas
// (2024), eq. (13)-(15), computed in one batch from the whole sequence:
// lambda[i] and muPrev[i] (μ̂_{i−1}) are what observation i is bet with.
func paperBets(x []float64, alpha float64) (lambda, muPrev []float64) {
	var sum, sq float64
	mu, sigma2 := 0.5, 0.25 // μ̂_0, σ̂²_0
	for i, xi := range x {
		t := float64(i + 1)
		lambda = append(lambda, math.Sqrt(2*math.Log(2/alpha)/(sigma2*t*math.Log(1+t))))
		muPrev = append(muPrev, mu)
		sum += xi
		mu = (0.5 + sum) / (t + 1)
		sq += (xi - mu) * (xi - mu)
		sigma2 = (0.25 + sq) / (t + 1)
	}
	return lambda, muPrev
}

// paperEB is the PrPl-EB interval at each t, by the paper's formula, and
// its running intersection.
func paperEB(x []float64, alpha float64) []stats.Interval {
	lambda, muPrev := paperBets(x, alpha)
	var out []stats.Interval
	lo, hi := 0.0, 1.0
	for t := range x {
		var sl, slx, pen float64
		for i := 0; i <= t; i++ {
			l := math.Min(lambda[i], 0.5)
			sl += l
			slx += l * x[i]
			pen += 4 * (x[i] - muPrev[i]) * (x[i] - muPrev[i]) * (-math.Log(1-l) - l) / 4
		}
		lo = math.Max(lo, (slx-math.Log(2/alpha)-pen)/sl)
		hi = math.Min(hi, (slx+math.Log(2/alpha)+pen)/sl)
		out = append(out, stats.Interval{Lo: lo, Hi: hi})
	}
	return out
}

// paperCapital is the hedged capital's two parts at m after all of x.
func paperCapital(x []float64, m, alpha float64) (up, down float64) {
	lambda, _ := paperBets(x, alpha)
	up, down = 1, 1
	for i, xi := range x {
		up *= 1 + math.Min(lambda[i], 0.5/m)*(xi-m)
		down *= 1 - math.Min(lambda[i], 0.5/(1-m))*(xi-m)
	}
	return up, down
}

func bernoulliSeq(r *rand.Rand, p float64, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		if r.Float64() < p {
			x[i] = 1
		}
	}
	return x
}

func TestEmpiricalBernsteinMatchesThePapersFormula(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for _, x := range [][]float64{bernoulliSeq(r, 0.7, 300), {0.2, 0.9, 0.4, 0.4, 1, 0, 0.65}} {
		want := paperEB(x, 0.05)
		cs := stats.NewEmpiricalBernstein(0.05)
		for i, xi := range x {
			cs.Add(xi)
			got := cs.Interval()
			require.InDelta(t, want[i].Lo, got.Lo, 1e-12, "t=%d", i+1)
			require.InDelta(t, want[i].Hi, got.Hi, 1e-12, "t=%d", i+1)
		}
		require.Equal(t, len(x), cs.N())
	}
}

// TestEmpiricalBernsteinByHand checks the first steps against numbers
// worked out by hand from the paper's formulas, at α = 0.05 after the
// observations 1, 1, 1, 1 … 1 (40 of them), where every bet is the
// truncation 1/2 until σ̂² is small: ψ_E(1/2) = (log 2 − 1/2)/4 =
// 0.0482868, and the lower bound after t ones is
// (Σλ − log 40 − Σ v ψ_E(λ))/Σλ.
func TestEmpiricalBernsteinByHand(t *testing.T) {
	t.Parallel()
	cs := stats.NewEmpiricalBernstein(0.05)
	// t = 1: λ = min(√(2·log 40/(0.25·1·log 2)), 1/2) = 1/2; v = 4·(1 − 1/2)² = 1.
	// Lower: (0.5 − 3.6888795 − 0.0482868)/0.5 < 0, so 0.
	cs.Add(1)
	assert.Equal(t, 0.0, cs.Interval().Lo)
	assert.Equal(t, 1.0, cs.Interval().Hi)
	// t = 2: μ̂_1 = 3/4, σ̂²_1 = (1/4 + 1/16)/2 = 0.15625;
	// λ₂ = √(7.3777589/(0.15625·2·log 3)) = 4.63… → 1/2; v₂ = 4·(1/4)² = 1/4.
	// Upper stays 1 (the observations are 1); lower (1 − 3.6888795 −
	// 0.0482868·1.25)/1 < 0.
	cs.Add(1)
	assert.Equal(t, 0.0, cs.Interval().Lo)
	// After 20 ones: every λ is 1/2 (σ̂² stays ≥ 0.0049 and
	// 2·log 40/(σ̂² t log(1+t)) ≥ 1/4 throughout), μ̂_{i−1} = (i − 1/2)/i,
	// so v_i = 4/(4i²) = 1/i² and the lower bound is
	// (10 − 3.6888795 − 0.0482868·Σ1/i²)/10 with Σ_{i≤20} 1/i² = 1.5961632.
	for range 18 {
		cs.Add(1)
	}
	assert.InDelta(t, (10-3.6888795-0.0482868*1.5961632)/10, cs.Interval().Lo, 1e-6)
}

func TestBettingMatchesThePapersCapital(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	x := bernoulliSeq(r, 0.8, 200)
	const alpha, grid = 0.1, 20
	cs := stats.NewBetting(alpha, grid)
	test := stats.NewBettingTest(0.7, alpha)
	// A grid point is excluded as too low once θK⁺ has reached 1/α, as
	// too high once (1−θ)K⁻ has; the interval runs from the last of the
	// grid points excluded as too low from 0 up, to the first of those
	// excluded as too high from 1 down.
	var low, high [grid + 1]bool
	for i, xi := range x {
		cs.Add(xi)
		test.Add(xi)
		for k := range grid + 1 {
			up, down := paperCapital(x[:i+1], float64(k)/grid, alpha)
			low[k] = low[k] || 0.5*up >= 1/alpha
			high[k] = high[k] || 0.5*down >= 1/alpha
		}
		want := stats.Interval{Lo: 0, Hi: 1}
		for k := 0; k <= grid && low[k]; k++ {
			want.Lo = float64(k) / grid
		}
		for k := grid; k >= 0 && high[k]; k-- {
			want.Hi = float64(k) / grid
		}
		iv := cs.Interval()
		require.Equal(t, [2]float64{want.Lo, want.Hi}, [2]float64{iv.Lo, iv.Hi}, "t=%d", i+1)
		require.Equal(t, wasAbove(x[:i+1], alpha), test.Above(), "t=%d", i+1)
		require.Equal(t, wasBelow(x[:i+1], alpha), test.Below(), "t=%d", i+1)
	}
	require.True(t, test.Above(), "200 draws at 0.8 show the mean is above 0.7")
	require.False(t, test.Below())
	iv := cs.Interval()
	require.Greater(t, iv.Lo, 0.65)
	require.Equal(t, stats.MethodBetting, iv.Method)
	require.InDelta(t, 0.9, iv.Level, 1e-12)
}

// wasAbove and wasBelow report whether the capital at 0.7 reached 1/α
// (hedged) at some prefix of x: the test's verdict is sticky.
func wasAbove(x []float64, alpha float64) bool {
	for n := 1; n <= len(x); n++ {
		if up, _ := paperCapital(x[:n], 0.7, alpha); 0.5*up >= 1/alpha {
			return true
		}
	}
	return false
}

func wasBelow(x []float64, alpha float64) bool {
	for n := 1; n <= len(x); n++ {
		if _, down := paperCapital(x[:n], 0.7, alpha); 0.5*down >= 1/alpha {
			return true
		}
	}
	return false
}

// TestConfidenceSequencesCoverTimeUniformly: over 300 runs of 800
// observations for each truth, the fraction of runs in which the
// sequence EVER excludes the true mean is at most α = 0.1 (it is far
// below: both are conservative). A Wilson interval at the same level,
// checked after every observation, excludes it in many more runs: the
// reason a sequential gate needs a confidence sequence.
func TestConfidenceSequencesCoverTimeUniformly(t *testing.T) {
	t.Parallel()
	const runs, n, alpha = 300, 800, 0.1
	for _, p := range []float64{0.1, 0.5, 0.7} {
		var eb, bet, wilson int
		for run := range runs {
			r := rand.New(rand.NewPCG(uint64(run), math.Float64bits(p)))
			x := bernoulliSeq(r, p, n)
			e, b := stats.NewEmpiricalBernstein(alpha), stats.NewBetting(alpha, 100)
			var eMiss, bMiss, wMiss bool
			passes := 0
			for i, xi := range x {
				e.Add(xi)
				b.Add(xi)
				passes += int(xi)
				eMiss = eMiss || !e.Interval().Contains(p)
				// The grid rounds outward: the truth is covered when it
				// lies between the bounds.
				bMiss = bMiss || !b.Interval().Contains(p)
				wMiss = wMiss || !stats.Wilson(passes, i+1, 1-alpha).Contains(p)
			}
			eb += btoi(eMiss)
			bet += btoi(bMiss)
			wilson += btoi(wMiss)
		}
		t.Logf("p=%.1f: ever excluded in %d (PrPl-EB), %d (betting), %d (Wilson watched) of %d runs", p, eb, bet, wilson, runs)
		assert.LessOrEqual(t, eb, int(alpha*runs), "p=%v", p)
		assert.LessOrEqual(t, bet, int(alpha*runs), "p=%v", p)
		assert.Greater(t, wilson, int(alpha*runs), "p=%v: a fixed-sample interval watched continuously should miss more often than α", p)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestConfidenceSequencesShrink(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	x := bernoulliSeq(r, 0.6, 20000)
	e, b := stats.NewEmpiricalBernstein(0.05), stats.NewBetting(0.05, 1000)
	widths := map[int][2]float64{}
	for i, xi := range x {
		e.Add(xi)
		b.Add(xi)
		if n := i + 1; n == 200 || n == 2000 || n == 20000 {
			widths[n] = [2]float64{e.Interval().Width(), b.Interval().Width()}
		}
	}
	for k := range 2 {
		// Ten times the data: the width falls by about √10 (times a
		// log log factor), so by at least half.
		assert.Less(t, widths[2000][k], widths[200][k]/2, "method %d: %v", k, widths)
		assert.Less(t, widths[20000][k], widths[2000][k]/2, "method %d: %v", k, widths)
		assert.Less(t, widths[20000][k], 0.05, "method %d", k)
	}
	assert.True(t, e.Interval().Contains(0.6) && b.Interval().Contains(0.6))
}

// TestRangesCountAgainstEachBound: observations known only to lie in
// [0, 1] (errors) move neither bound towards a decision: a sequence of
// 60% passes and 40% unknowns cannot show the mean above 0.7 nor below
// 0.5, whereas the same passes with the unknowns dropped would look like
// 100%.
func TestRangesCountAgainstEachBound(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	e, b := stats.NewEmpiricalBernstein(0.05), stats.NewBettingTest(0.7, 0.05)
	low := stats.NewBettingTest(0.5, 0.05)
	for range 5000 {
		if r.Float64() < 0.6 {
			e.Add(1)
			b.Add(1)
			low.Add(1)
		} else {
			e.AddRange(0, 1)
			b.AddRange(0, 1)
			low.AddRange(0, 1)
		}
	}
	assert.Less(t, e.Interval().Lo, 0.7)
	assert.False(t, b.Above(), "unknowns counted as failures: 60% is not above 70%")
	assert.False(t, b.Below(), "unknowns counted as passes: 100% is not below 70%")
	assert.True(t, low.Above(), "the passes alone show the mean above 50%")
}

func TestConfidenceSequencesRejectBadInput(t *testing.T) {
	t.Parallel()
	assert.Panics(t, func() { stats.NewEmpiricalBernstein(0) })
	assert.Panics(t, func() { stats.NewBetting(1, 10) })
	assert.Panics(t, func() { stats.NewBetting(0.05, 1) })
	assert.Panics(t, func() { stats.NewBettingTest(1.5, 0.05) })
	assert.Panics(t, func() { stats.NewEmpiricalBernstein(0.05).Add(1.5) })
	assert.Panics(t, func() { stats.NewBettingTest(0.5, 0.05).AddRange(0.6, 0.4) })
	assert.Panics(t, func() { stats.NewBetting(0.05, 10).Add(math.NaN()) })
	iv := stats.NewEmpiricalBernstein(0.05).Interval()
	assert.Equal(t, [2]float64{0, 1}, [2]float64{iv.Lo, iv.Hi}, "no observation: [0, 1]")
}

// TestBettingIntervalIsTheGridsWithoutTheGrid: bisection finds the bounds
// the grid rounds outward, within one grid step inside them.
func TestBettingIntervalIsTheGridsWithoutTheGrid(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 10))
	for _, p := range []float64{0.05, 0.5, 0.9} {
		x := bernoulliSeq(r, p, 500)
		lo, hi := make([]float64, len(x)), make([]float64, len(x))
		grid := stats.NewBetting(0.05, 200)
		for i, xi := range x {
			lo[i], hi[i] = xi, xi
			if i%7 == 0 {
				lo[i], hi[i] = 0, 1 // an unknown, now and then
			}
			grid.AddRange(lo[i], hi[i])
		}
		g, exact := grid.Interval(), stats.BettingInterval(lo, hi, 0.05)
		assert.GreaterOrEqual(t, exact.Lo, g.Lo, "p=%v", p)
		assert.Less(t, exact.Lo, g.Lo+1.0/200+1e-9, "p=%v", p)
		assert.LessOrEqual(t, exact.Hi, g.Hi, "p=%v", p)
		assert.Greater(t, exact.Hi, g.Hi-1.0/200-1e-9, "p=%v", p)
	}
	assert.Equal(t, stats.Interval{Lo: 0, Hi: 1, Level: 0.95, Method: stats.MethodBetting}, stats.BettingInterval(nil, nil, 0.05))
}
