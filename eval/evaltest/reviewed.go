package evaltest

import (
	"fmt"
	"testing"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/review"
)

// checkReviewed applies Gate.MinLowerBound to the prediction-powered pass
// rate of the reviews beside log; in a log of variants, to each variant's
// (a pass rate pooled over variants describes no agent) that the run did
// not eliminate: as Check, which leaves out the variants rep's leaderboard
// marks eliminated (Standing.Eliminated), stopped on evidence they lose.
func checkReviewed(t testing.TB, log string, rep *report.Report, g Gate) {
	t.Helper()
	s, err := reviewed(log)
	if err != nil {
		t.Errorf("evaltest: reviewed gate: %v", err)
		return
	}
	if len(s.Variants) == 0 {
		checkPPI(t, log, "", s, g)
		return
	}
	eliminated := map[string]bool{}
	if lb := rep.Leaderboard; lb != nil {
		for _, st := range lb.Variants {
			if st.Eliminated != nil {
				eliminated[st.Variant] = true
			}
		}
	}
	for i := range s.Variants {
		if v := s.Variants[i].Variant; eliminated[v] {
			t.Logf("evaltest: variant %s: eliminated by the run, not gated", v)
			continue
		}
		checkPPI(t, log, "variant "+s.Variants[i].Variant+": ", &s.Variants[i], g)
	}
}

// checkPPI applies the gate to one summary; what names its variant.
func checkPPI(t testing.TB, log, what string, s *review.Summary, g Gate) {
	t.Helper()
	iv := s.PPI.Interval
	switch {
	case s.PPI.Labelled < 2:
		t.Errorf("evaltest: reviewed gate: %s%d reviewed episodes of the queue beside %s: the gate needs people's grades (proctor review pick, then proctor view -review)", what, s.PPI.Labelled, log)
	case iv.Lo < g.MinLowerBound:
		t.Errorf("evaltest: %sprediction-powered pass rate %.1f%%, %.0f%% CI [%.1f%%, %.1f%%] from %d reviews and %d judge verdicts (the judge alone says %.1f%%): lower bound under the gate's %.1f%%",
			what, 100*s.PPI.Mean, 100*iv.Level, 100*iv.Lo, 100*iv.Hi, s.PPI.Labelled, s.Episodes, 100*float64(s.JudgeRate), 100*g.MinLowerBound)
	default:
		t.Logf("evaltest: %sprediction-powered pass rate %.1f%% [%.1f%%, %.1f%%] from %d reviews", what, 100*s.PPI.Mean, 100*iv.Lo, 100*iv.Hi, s.PPI.Labelled)
	}
}

func reviewed(log string) (*review.Summary, error) {
	f, err := review.Load(log)
	if err != nil {
		return nil, err
	}
	if f.Queue == nil {
		return nil, fmt.Errorf("%s has no review queue: run proctor review pick, and have people grade it", log)
	}
	return review.Summarize(f.Episodes, f.Queue, f.Reviews, review.Options{}), nil
}
