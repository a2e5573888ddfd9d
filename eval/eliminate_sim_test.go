package eval

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/proctor-evals/proctor/sink"
)

// TestEliminationErrorRateBySimulation: the chance that a run eliminates
// any variant wrongly (one at least as good as the variant that
// eliminated it) is at most α, and what elimination saves, at gaps of 0
// (every variant alike: any elimination is wrong), 2, 5 and 10 points.
// Three variants, the best at 60 %, the other two `gap` points under it;
// 1,000 samples of one epoch each, each sample with its own difficulty
// (a base rate uniform in [0.2, 0.9] shifted by the variant's gap), the
// variants' outcomes drawn independently given it; α = 0.05; 1,000 runs
// at gap 0 and 300 at each other gap, seeded. The eliminator is fed as
// the engine feeds it: in claim order, every running variant's record of
// a sample before the next sample. Saved is the share of the matrix's
// episodes not run.
func TestEliminationErrorRateBySimulation(t *testing.T) {
	t.Parallel()
	const (
		alpha   = 0.05
		samples = 1000
		best    = 0.6
	)
	ids := make([]string, samples)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%04d", i)
	}
	names := []string{"best", "worse1", "worse2"}
	for _, tc := range []struct {
		gap  float64
		runs int
	}{{0, 1000}, {0.02, 300}, {0.05, 300}, {0.10, 300}} {
		rng := rand.New(rand.NewPCG(uint64(tc.gap*1000)+1, 33))
		means := []float64{best, best - tc.gap, best - tc.gap}
		wrong, eliminations, saved := 0, 0, 0.0
		for run := range tc.runs {
			plan := &variantPlan{names: names, versions: make([]string, 3), epochs: 1,
				index: map[string]int{"best": 0, "worse1": 1, "worse2": 2}, selected: []bool{true, true, true}}
			cfg := Config{EliminateVariants: alpha, Seed: uint64(run), plan: plan}
			el := newEliminator(&cfg, samples, func(i int) string { return ids[i] }, nil)
			for _, s := range el.order {
				base := 0.2 + 0.7*rng.Float64()
				for v := range names {
					if !el.active[v] {
						continue
					}
					rec := sink.Record{Status: sink.Fail}
					if rng.Float64() < base+means[v]-best {
						rec.Status, rec.Score = sink.Pass, 1
					}
					el.add(int(s), v, &rec)
				}
			}
			anyWrong := false
			for _, e := range el.eliminations() {
				eliminations++
				if means[plan.index[e.Variant]] >= means[plan.index[e.By]] {
					anyWrong = true
				}
				saved += float64(e.Saved) / float64(samples*len(names))
			}
			if anyWrong {
				wrong++
			}
		}
		rate := float64(wrong) / float64(tc.runs)
		t.Logf("gap %4.0f points: runs with a wrong elimination %5.3f (%d of %d; α %.2f), eliminations per run %.2f, episodes saved %4.1f%%",
			tc.gap*100, rate, wrong, tc.runs, alpha, float64(eliminations)/float64(tc.runs), 100*saved/float64(tc.runs))
		if rate > alpha {
			t.Errorf("gap %v: %d of %d runs eliminated a variant wrongly: %.3f > α %.2f", tc.gap, wrong, tc.runs, rate, alpha)
		}
		if tc.gap == 0.10 && saved/float64(tc.runs) < 0.2 {
			t.Errorf("gap 10 points: elimination saved %.1f%% of the episodes, want at least 20%%", 100*saved/float64(tc.runs))
		}
	}
}
