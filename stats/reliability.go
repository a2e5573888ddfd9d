package stats

import (
	"math"
	"slices"
)

// Confusion counts a judge's pass/fail verdicts against people's grades of
// the same items.
type Confusion struct {
	BothPass  int // judge pass, human pass
	FalsePass int // judge pass, human fail: the judge is too lenient
	FalseFail int // judge fail, human pass: the judge is too strict
	BothFail  int // judge fail, human fail
}

// Add counts one item.
func (c *Confusion) Add(judge, human bool) {
	switch {
	case judge && human:
		c.BothPass++
	case judge:
		c.FalsePass++
	case human:
		c.FalseFail++
	default:
		c.BothFail++
	}
}

// N returns the number of items counted.
func (c Confusion) N() int { return c.BothPass + c.FalsePass + c.FalseFail + c.BothFail }

// Agreement returns the share of items where judge and human agree; NaN
// for none.
func (c Confusion) Agreement() float64 {
	if c.N() == 0 {
		return math.NaN()
	}
	return float64(c.BothPass+c.BothFail) / float64(c.N())
}

// Kappa returns Cohen's kappa of the table: see [CohenKappa].
func (c Confusion) Kappa() float64 {
	n := float64(c.N())
	if n == 0 {
		return math.NaN()
	}
	jp, hp := float64(c.BothPass+c.FalsePass)/n, float64(c.BothPass+c.FalseFail)/n
	pe := jp*hp + (1-jp)*(1-hp)
	if pe >= 1 {
		return math.NaN()
	}
	return (c.Agreement() - pe) / (1 - pe)
}

// Phi returns the phi coefficient of the table: the correlation of the
// judge's and the human's 0/1 grades, the rho of [PPISampleSize]. NaN when
// either is constant.
func (c Confusion) Phi() float64 {
	a, b, cc, d := float64(c.BothPass), float64(c.FalsePass), float64(c.FalseFail), float64(c.BothFail)
	den := math.Sqrt((a + b) * (cc + d) * (a + cc) * (b + d))
	if den == 0 {
		return math.NaN()
	}
	return (a*d - b*cc) / den
}

// KrippendorffAlpha returns Krippendorff's alpha for nominal data: the
// agreement among any number of reviewers, any of whom may have skipped
// any item, corrected for chance. units[u] holds the values item u got
// from the reviewers who graded it (labels, compared only for equality);
// an item with fewer than two values cannot be paired and is left out.
// From the coincidence matrix o (each ordered pair of values within an
// item, counted 1/(m_u − 1) for an item with m_u values), its marginals
// n_c and their total n:
//
//	α = 1 − (n − 1) · Σ_{c≠k} o_ck / Σ_{c≠k} n_c·n_k
//
// α is 1 for perfect agreement, 0 for agreement at chance, negative below.
// Reference: K. Krippendorff, "Computing Krippendorff's alpha-reliability"
// (2011), and "Content Analysis", 4th ed. (2018), ch. 12. It returns NaN
// when fewer than two values can be paired, or when every paired value is
// the same (no variation to agree on).
func KrippendorffAlpha(units [][]int) float64 {
	// Coincidences of distinct values only, and the marginals.
	var disagree float64
	marg := map[int]float64{}
	vals := []int{}
	for _, u := range units {
		m := len(u)
		if m < 2 {
			continue
		}
		vals = append(vals[:0], u...)
		slices.Sort(vals)
		w := 1 / float64(m-1)
		for i := 0; i < m; {
			j := i + 1
			for j < m && vals[j] == vals[i] {
				j++
			}
			cnt := float64(j - i)
			marg[vals[i]] += cnt // Σ_k o_ck = count of c in the unit
			// Ordered pairs (c, k≠c): cnt · (m − cnt), each weighted w.
			disagree += w * cnt * float64(m-j+i)
			i = j
		}
	}
	var n, sq float64
	for _, c := range marg {
		n += c
		sq += c * c
	}
	expected := n*n - sq // Σ_{c≠k} n_c·n_k
	if n < 2 || expected == 0 {
		return math.NaN()
	}
	return 1 - (n-1)*disagree/expected
}
