package stats

import (
	"fmt"
	"math"
	"sync"
)

// Method names of the confidence sequences, reported in [Interval.Method].
const (
	MethodEmpiricalBernstein = "predictable-plug-in-empirical-bernstein"
	MethodBetting            = "hedged-capital-betting"
)

// A confidence sequence is a sequence of intervals C_1, C_2, … for the mean
// μ of observations X_1, X_2, … in [0, 1] (independent with a common mean,
// or more generally with E[X_t | X_1..X_{t-1}] = μ) such that
//
//	P(∃t ≥ 1: μ ∉ C_t) ≤ α
//
// at every sample size at once: it may be watched after each observation
// and a decision taken the first time it excludes a value, and the
// probability that it ever excludes μ is still at most α. A fixed-sample
// interval such as [Wilson] promises coverage at one n chosen in advance;
// watched after each observation it excludes μ at some n far more often
// than α.
//
// Both sequences here are from I. Waudby-Smith and A. Ramdas, "Estimating
// means of bounded random variables by betting", JRSS-B 86(1), 2024
// (arXiv:2010.09686), and both take the same predictable plug-in bets, with
// their regularised running mean and variance (the paper's eq. (13)-(15)):
//
//	μ̂_t  = (1/2 + Σ_{i≤t} X_i) / (t + 1)
//	σ̂²_t = (1/4 + Σ_{i≤t} (X_i − μ̂_i)²) / (t + 1)
//	λ_t  = √(2 log(2/α) / (σ̂²_{t−1} · t · log(1 + t)))
//
// Each is incremental (its state is a few sums: O(1) memory and time per
// observation, O(grid) for [Betting]) and reports the running
// intersection of its intervals, which keeps the guarantee.
//
// An observation may be known only to lie in a range [lo, hi] (an episode
// that errored could have passed or failed): AddRange then feeds the
// lower bound with lo and the upper bound with hi, so that the interval is
// one for the mean of the unknown true values, valid whatever they were.
// The bets are predictable (the paper's proofs hold for any predictable
// bet), computed from the midpoints.

// plugIn is the state behind the predictable plug-in bets: t observations,
// their sum and the sum of squared deviations from the running mean, of the
// midpoints of the ranges added.
type plugIn struct {
	t       int
	sum, sq float64
	log2a   float64   // 2·log(2/α)
	logs    []float64 // log(1+n) for small n (logTable)
}

func newPlugIn(fn string, alpha float64) plugIn {
	if !(alpha > 0 && alpha < 1) {
		panic(fmt.Sprintf("stats: %s: alpha %v outside (0, 1)", fn, alpha))
	}
	return plugIn{log2a: 2 * math.Log(2/alpha), logs: logTable()}
}

// logTable holds log(1+n) for n < 2^14, computed once (128 KiB): the
// logarithm was a third of the cost of a bet, which a gate pays on the
// recorder's goroutine for every sample.
var logTable = sync.OnceValue(func() []float64 {
	t := make([]float64, 1<<14)
	for n := range t {
		t[n] = math.Log(1 + float64(n))
	}
	return t
})

// bet is λ_{t+1}, the bet on the next observation: it depends on the
// observations so far only.
func (p *plugIn) bet() float64 {
	n := p.t + 1
	var logN float64
	if n < len(p.logs) {
		logN = p.logs[n]
	} else {
		logN = math.Log(1 + float64(n))
	}
	// σ̂²_t · n is 1/4 + Σ(X_i − μ̂_i)².
	return math.Sqrt(p.log2a / ((0.25 + p.sq) * logN))
}

// mean is μ̂_t, the regularised mean of the observations so far.
func (p *plugIn) mean() float64 { return (0.5 + p.sum) / float64(p.t+1) }

func (p *plugIn) add(x float64) {
	p.t++
	p.sum += x
	d := x - p.mean()
	p.sq += d * d
}

func checkRange(fn string, lo, hi float64) {
	if !(0 <= lo && lo <= hi && hi <= 1) {
		panic(fmt.Sprintf("stats: %s: observation [%v, %v] is not a range within [0, 1]", fn, lo, hi))
	}
}

// EmpiricalBernstein is the predictable plug-in empirical-Bernstein (PrPl-EB)
// confidence sequence for the mean of observations in [0, 1], at level
// 1 − α (Waudby-Smith & Ramdas 2024, Theorem 2 with eq. (13)):
//
//	C_t = Σλ_i X_i / Σλ_i ± (log(2/α) + Σ v_i ψ_E(λ_i)) / Σλ_i
//	v_i = 4 (X_i − μ̂_{i−1})², ψ_E(λ) = (−log(1 − λ) − λ)/4
//
// with the plug-in bets λ_i above truncated at 1/2. It is computed in
// closed form: O(1) time and memory per observation. The zero value is not
// usable: call [NewEmpiricalBernstein].
//
// The cap at 1/2 is what makes [EmpiricalBernstein.AddRange] valid: an
// observation known only to lie in [lo, hi] enters each side's term
// λX − v·ψ_E(λ) as its end (lo below, hi above), which bounds the term of
// the true X only while the term is monotone in X, that is while
// λ ≥ 8ψ_E(λ): up to λ ≈ 0.58. With bets above that, counting an error as a
// failure could raise the lower bound.
type EmpiricalBernstein struct {
	p      plugIn
	logTwo float64 // log(2/α)
	alpha  float64
	// Σλ, and per side Σλ·X and Σ v·ψ_E(λ) (lower: X = lo, upper: X = hi).
	lambda           float64
	loSum, loPenalty float64
	hiSum, hiPenalty float64
	lo, hi           float64 // the running intersection
}

// NewEmpiricalBernstein returns an empty PrPl-EB confidence sequence at
// level 1 − α. It panics if alpha is outside (0, 1).
func NewEmpiricalBernstein(alpha float64) *EmpiricalBernstein {
	return &EmpiricalBernstein{p: newPlugIn("NewEmpiricalBernstein", alpha), logTwo: math.Log(2 / alpha), alpha: alpha, hi: 1}
}

// ebTruncation caps the empirical-Bernstein bets (the paper's c = 1/2);
// AddRange's ranges are valid only under a cap of at most about 0.58 (see
// EmpiricalBernstein).
const ebTruncation = 0.5

// Add adds an observation in [0, 1]. It panics outside [0, 1].
func (s *EmpiricalBernstein) Add(x float64) { s.AddRange(x, x) }

// AddRange adds an observation known only to lie in [lo, hi] ⊆ [0, 1]: the
// lower bound counts it as lo, the upper as hi.
func (s *EmpiricalBernstein) AddRange(lo, hi float64) {
	checkRange("EmpiricalBernstein.AddRange", lo, hi)
	l := min(s.p.bet(), ebTruncation)
	psi := (-math.Log1p(-l) - l) / 4
	m := s.p.mean() // μ̂_{t−1}
	s.lambda += l
	s.loSum += l * lo
	s.loPenalty += 4 * (lo - m) * (lo - m) * psi
	s.hiSum += l * hi
	s.hiPenalty += 4 * (hi - m) * (hi - m) * psi
	s.p.add((lo + hi) / 2)
	s.lo = max(s.lo, (s.loSum-s.logTwo-s.loPenalty)/s.lambda)
	s.hi = min(s.hi, (s.hiSum+s.logTwo+s.hiPenalty)/s.lambda)
}

// N returns the number of observations added.
func (s *EmpiricalBernstein) N() int { return s.p.t }

// Interval returns the running intersection of the sequence's intervals so
// far, clamped to [0, 1]; [0, 1] before any observation.
func (s *EmpiricalBernstein) Interval() Interval {
	return Interval{Lo: s.lo, Hi: s.hi, Level: 1 - s.alpha, Method: MethodEmpiricalBernstein}
}

// Betting is the hedged-capital betting confidence sequence for the mean of
// observations in [0, 1], at level 1 − α (Waudby-Smith & Ramdas 2024,
// Theorem 3 and section 4.3): for each candidate mean m,
//
//	K⁺_t(m) = Π (1 + λ⁺_i(m)(X_i − m)),  λ⁺_i(m) = min(λ_i, c/m)
//	K⁻_t(m) = Π (1 − λ⁻_i(m)(X_i − m)),  λ⁻_i(m) = min(λ_i, c/(1 − m))
//	K_t(m)  = max(θ K⁺_t(m), (1 − θ) K⁻_t(m)),  θ = 1/2, c = 1/2
//	C_t     = {m : K_t(m) < 1/α}
//
// with the plug-in bets λ_i above. Under the mean m, K⁺ and K⁻ are
// nonnegative martingales, so by Ville's inequality K_t(m) ever reaches 1/α
// with probability at most α. It is tighter than [EmpiricalBernstein]
// (the paper's Figure 4), at the price of a grid: Betting tracks the
// capital of grid+1 candidate means m = k/grid, O(grid) time per
// observation, and reports the interval to the grid's resolution, rounded
// outward. A candidate excluded once stays excluded (the running
// intersection). [BettingTest] is the same capital at a single m, O(1).
type Betting struct {
	p     plugIn
	alpha float64
	grid  []bet // grid+1 candidate means
}

// NewBetting returns an empty betting confidence sequence at level 1 − α
// over grid+1 candidate means. It panics if alpha is outside (0, 1) or
// grid < 2.
func NewBetting(alpha float64, grid int) *Betting {
	if grid < 2 {
		panic(fmt.Sprintf("stats: NewBetting: grid %d < 2", grid))
	}
	s := &Betting{p: newPlugIn("NewBetting", alpha), alpha: alpha, grid: make([]bet, grid+1)}
	for k := range s.grid {
		s.grid[k] = newBet(float64(k)/float64(grid), alpha)
	}
	return s
}

// Add adds an observation in [0, 1]. It panics outside [0, 1].
func (s *Betting) Add(x float64) { s.AddRange(x, x) }

// AddRange adds an observation known only to lie in [lo, hi] ⊆ [0, 1]: the
// capital betting that the mean is above m counts it as lo, the capital
// betting below as hi.
func (s *Betting) AddRange(lo, hi float64) {
	checkRange("Betting.AddRange", lo, hi)
	l := s.p.bet()
	for k := range s.grid {
		s.grid[k].add(l, lo, hi)
	}
	s.p.add((lo + hi) / 2)
}

// N returns the number of observations added.
func (s *Betting) N() int { return s.p.t }

// Interval returns the running intersection of the sequence's sets so far,
// as the interval from the largest candidate below which every candidate is
// excluded as too low to the smallest above which every one is excluded as
// too high: [0, 1] before any observation.
func (s *Betting) Interval() Interval {
	iv := Interval{Lo: 0, Hi: 1, Level: 1 - s.alpha, Method: MethodBetting}
	for k := range s.grid {
		if !s.grid[k].above {
			break
		}
		iv.Lo = s.grid[k].m
	}
	for k := len(s.grid) - 1; k >= 0; k-- {
		if !s.grid[k].below {
			break
		}
		iv.Hi = s.grid[k].m
	}
	return iv
}

// BettingTest is the capital of [Betting] at a single candidate mean m: the
// sequential test, at level α, of whether the mean is above or below m,
// in O(1) time per observation. Above reports that the capital betting on
// a mean above m has reached 1/α (that is, θK⁺ ≥ 1/α with θ = 1/2): m is
// excluded from the level 1 − α betting confidence sequence as too low,
// and had the mean been m or less, the chance of that ever happening was
// at most α/2. Below is the mirror image.
type BettingTest struct {
	p plugIn
	b bet
}

// NewBettingTest returns the test of the candidate mean m in [0, 1] at
// level α. It panics if alpha is outside (0, 1) or m outside [0, 1].
func NewBettingTest(m, alpha float64) *BettingTest {
	if !(m >= 0 && m <= 1) {
		panic(fmt.Sprintf("stats: NewBettingTest: m %v outside [0, 1]", m))
	}
	return &BettingTest{p: newPlugIn("NewBettingTest", alpha), b: newBet(m, alpha)}
}

// Add adds an observation in [0, 1]. It panics outside [0, 1].
func (s *BettingTest) Add(x float64) { s.AddRange(x, x) }

// AddRange adds an observation known only to lie in [lo, hi] ⊆ [0, 1]: the
// capital betting above m counts it as lo, the capital betting below as hi,
// so that a range can delay Above or Below but never bring it about.
func (s *BettingTest) AddRange(lo, hi float64) {
	checkRange("BettingTest.AddRange", lo, hi)
	s.b.add(s.p.bet(), lo, hi)
	s.p.add((lo + hi) / 2)
}

// N returns the number of observations added.
func (s *BettingTest) N() int { return s.p.t }

// Above reports whether the mean has been shown to be above m.
func (s *BettingTest) Above() bool { return s.b.above }

// Below reports whether the mean has been shown to be below m.
func (s *BettingTest) Below() bool { return s.b.below }

// bet is the capital of betting for and against one candidate mean m. A
// capital is kept as a float64 times 2^(-scale·k), so that a long losing
// streak (a capital shrinking past 1e-308) is not lost to underflow.
type bet struct {
	m              float64
	capUp, capDown float64 // c/m and c/(1−m)
	up, down       wealth
	above, below   bool // the capital reached 1/α: sticky
	threshold      float64
}

// bettingTruncation is the paper's c, and hedge its θ.
const (
	bettingTruncation = 0.5
	hedge             = 0.5
)

func newBet(m, alpha float64) bet {
	b := bet{m: m, up: wealth{v: 1}, down: wealth{v: 1}, threshold: 1 / (alpha * hedge)}
	b.capUp, b.capDown = math.Inf(1), math.Inf(1)
	if m > 0 {
		b.capUp = bettingTruncation / m
	}
	if m < 1 {
		b.capDown = bettingTruncation / (1 - m)
	}
	return b
}

func (b *bet) add(l, lo, hi float64) {
	up, down := l, l // min(l, cap) without min's NaN handling: l is never NaN
	if up > b.capUp {
		up = b.capUp
	}
	if down > b.capDown {
		down = b.capDown
	}
	b.up.mul(1 + up*(lo-b.m))
	b.down.mul(1 - down*(hi-b.m))
	b.above = b.above || b.up.atLeast(b.threshold)
	b.below = b.below || b.down.atLeast(b.threshold)
}

// wealth is v · 2^(−512·under).
type wealth struct {
	v     float64
	under int
}

func (w *wealth) mul(f float64) {
	w.v *= f
	switch {
	case w.v < 0x1p-512 && w.v > 0:
		w.v *= 0x1p512
		w.under++
	case w.under > 0 && w.v >= 0x1p512:
		w.v *= 0x1p-512
		w.under--
	}
}

func (w *wealth) atLeast(x float64) bool { return w.under == 0 && w.v >= x }

// BettingInterval returns the interval [Betting] reports after the
// observations [lo[i], hi[i]] (lo[i] = hi[i] for an exact one), computed
// by bisection instead of on a grid, to within 1e-9: every factor of
// K⁺_t(m) is positive and non-increasing in m, so the candidates ever
// excluded as too low form an interval [0, Lo), and those excluded as too
// high (Hi, 1]. It costs O(n) per candidate tried, about 60n in all. It
// panics if lo and hi differ in length, an observation is not a range
// within [0, 1], or alpha is outside (0, 1).
func BettingInterval(lo, hi []float64, alpha float64) Interval {
	if len(lo) != len(hi) {
		panic(fmt.Sprintf("stats: BettingInterval: %d lower and %d upper ends", len(lo), len(hi)))
	}
	p := newPlugIn("BettingInterval", alpha)
	bets := make([]float64, len(lo))
	for i := range lo {
		checkRange("BettingInterval", lo[i], hi[i])
		bets[i] = p.bet()
		p.add((lo[i] + hi[i]) / 2)
	}
	excluded := func(m float64, above bool) bool {
		b := newBet(m, alpha)
		for i, l := range bets {
			b.add(l, lo[i], hi[i])
			if above && b.above || !above && b.below {
				return true
			}
		}
		return false
	}
	iv := Interval{Lo: 0, Hi: 1, Level: 1 - alpha, Method: MethodBetting}
	// Lo: the boundary between excluded-as-too-low (below) and not.
	if excluded(0, true) {
		a, z := 0.0, 1.0
		if excluded(1, true) {
			a = 1
		}
		for z-a > 1e-9 && a < 1 {
			if m := (a + z) / 2; excluded(m, true) {
				a = m
			} else {
				z = m
			}
		}
		iv.Lo = a
	}
	if excluded(1, false) {
		a, z := 0.0, 1.0
		if excluded(0, false) {
			z = 0
		}
		for z-a > 1e-9 && z > 0 {
			if m := (a + z) / 2; excluded(m, false) {
				z = m
			} else {
				a = m
			}
		}
		iv.Hi = z
	}
	return iv
}
