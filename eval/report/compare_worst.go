package report

import (
	"fmt"
	"math"

	"github.com/proctor-evals/proctor/stats"
)

// WorstDifference is a comparison's paired pass-rate difference in the
// worst case for the head: its errored and unscored episodes counted as
// failures, the base's as passes, over every sample both runs recorded.
// An error is not evidence that the head did as well: gates decide on it
// ([Comparison.Decision]) unless told to exclude errors.
type WorstDifference struct {
	PassRate stats.Difference `json:"pass_rate"`
	// Regressed and NonInferior are the comparison's, on this
	// difference.
	Regressed   bool `json:"regressed"`
	NonInferior bool `json:"non_inferior"`
}

// worstCase sets c.WorstCase when either run has errored or unscored
// episodes.
func (c *Comparison) worstCase(bs, hs []SampleResult, headIndex map[string]int, level float64) {
	noVerdict := func(s *SampleResult) int { return s.Errored + s.Unscored }
	var any bool
	var base, head []float64
	for i := range bs {
		b := &bs[i]
		j, ok := headIndex[b.ID]
		if !ok {
			continue
		}
		h := &hs[j]
		nb, nh := b.Scored()+noVerdict(b), h.Scored()+noVerdict(h)
		if nb == 0 || nh == 0 {
			continue
		}
		any = any || noVerdict(b) > 0 || noVerdict(h) > 0
		base = append(base, float64(b.Passed+noVerdict(b))/float64(nb))
		head = append(head, float64(h.Passed)/float64(nh))
	}
	if !any {
		return
	}
	d := stats.Paired(base, head, level)
	c.WorstCase = &WorstDifference{PassRate: d, Regressed: d.Hi < 0,
		NonInferior: d.Lo > -c.Margin || (d.Mean == 0 && d.SE == 0)}
}

// Decision is what a gate decides from the comparison: on the worst case
// when there is one, or with excludeErrors on the samples both runs
// scored, leaving errored and unscored episodes out.
func (c *Comparison) Decision(excludeErrors bool) (nonInferior, regressed bool) {
	if c.WorstCase == nil || excludeErrors {
		return c.NonInferior, c.Regressed
	}
	return c.WorstCase.NonInferior, c.WorstCase.Regressed
}

// String says the worst case in a sentence.
func (w *WorstDifference) String() string {
	d := w.PassRate
	const what = "worst case (the head's errored and unscored episodes as failures, the base's as passes)"
	if math.IsNaN(d.Lo) {
		return fmt.Sprintf("%s: %d paired samples, too few for an interval", what, d.N)
	}
	s := fmt.Sprintf("%s: %s → %s, difference %s [%s, %s]: ", what, pct(d.MeanA), pct(d.MeanB), pts(d.Mean), pts(d.Lo), pts(d.Hi))
	switch {
	case w.Regressed:
		return s + "REGRESSED"
	case w.NonInferior:
		return s + "non-inferior"
	}
	return s + "NOT non-inferior"
}
