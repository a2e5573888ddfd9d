package judge

import (
	"context"
	"errors"
	"fmt"

	"github.com/proctor-evals/proctor/harness"
)

// ErrNotSampled marks an episode that [Subsample] left out of the expensive
// judge's sample. It satisfies errors.Is(err, ErrUnscored) too, so an engine
// that knows nothing of sampling records the episode as unscored, which is
// exactly its weight in the estimator: zero.
var ErrNotSampled = errors.New("judge: not sampled")

type notSampledError struct{ u *UnscoredError }

func (e *notSampledError) Error() string        { return e.u.Error() }
func (e *notSampledError) Unwrap() error        { return e.u }
func (e *notSampledError) Is(target error) bool { return target == ErrNotSampled }

// Subsample is asymmetric sampling for an expensive judge: every suspected
// failure goes to it, and only a seeded fraction rate of suspected
// successes.
//
// The suspect judge (cheap, deterministic) runs first. An output it fails or
// cannot score is a suspected failure and always goes to the expensive
// judge. An output it passes is a suspected success and goes to the
// expensive judge with probability rate, decided by a hash of ep.Seed and
// seed alone: the same episode is sampled the same way on every retry,
// resume and rerun, and independently of its output. An error of the
// suspect judge (other than unscored) is returned.
//
// # The estimator
//
// Let π be the probability that an episode reaches the expensive judge:
// π = 1 for suspected failures, π = rate for suspected successes. An
// episode that reaches it gets the expensive verdict Y with Weight 1/π
// (1/rate for a sampled suspected success, 1 otherwise); one that does not
// is excluded: weight 0. The report computes Σ w·Y / Σ w over scored
// records. Its numerator is the Horvitz–Thompson estimator of the number
// of passes (E[Σ w·Y] = Σ over all episodes of Y: each is counted with
// probability π and weight 1/π), and its denominator is the
// Horvitz–Thompson estimator of the number of episodes, so the ratio (the
// Hájek estimator) is consistent for the pass rate, with a bias of order
// 1/n that the simulation test shows is negligible; Σ w·Y / N, with N the
// number of episodes, is exactly unbiased.
//
// Why weight 0 and not the cheap verdict with weight 1: among suspected
// successes a share q truly passes, q unknown. For their group to add
// n·q to Σ w·Y and n to Σ w whatever q is, with weights a (unsampled,
// counted as a pass), b (sampled pass) and c (sampled failure):
// (1−rate)·a + rate·q·b = q for every q forces a = 0 and b = 1/rate,
// then c = 1/rate. Keeping the cheap pass with weight 1 is the naive
// estimator, biased upwards by the cheap judge's false-pass rate.
//
// Since Verdict.Weight 0 means 1, an unsampled episode is returned as the
// suspect's verdict (with its sub-scores) together with an error wrapping
// [ErrNotSampled], which is also an unscored error: the engine records it
// as unscored, so it counts in neither sum; the report shows how many
// there were. Every verdict Subsample returns has Scores["sampled"] (1 or 0)
// and Scores["suspect_pass"] (1 or 0); a sampled suspected success has
// Scores["inclusion_probability"] = rate and a Reason ending in
// "[sampled 1/rate]".
//
// Caveat: a sampled episode the expensive judge cannot score (unscored)
// drops out, which biases the estimate if that correlates with the
// outcome; keep the expensive judge's unscored rate low.
//
// rate must be in (0, 1]; Subsample panics otherwise. With rate 1 every
// episode goes to the expensive judge and every weight is 1.
func Subsample[T, O any](suspect, expensive Judge[T, O], rate float64, seed uint64) Judge[T, O] {
	if !(rate > 0 && rate <= 1) {
		panic(fmt.Sprintf("judge: Subsample rate %v is not in (0, 1]", rate))
	}
	return Func[T, O](func(ctx context.Context, ep *harness.Episode[T], out O) (Verdict, error) {
		s, err := callStage(ctx, "subsample.suspect", suspect, ep, out)
		if err != nil && !errors.Is(err, ErrUnscored) {
			return Verdict{}, within("subsample.suspect", err)
		}
		suspectPass := err == nil && s.Pass
		if suspectPass && !Sampled(ep.Seed, seed, rate) {
			s.Scores = mergeScores(s.Scores, "", map[string]float64{"sampled": 0, "suspect_pass": 1})
			return s, &notSampledError{&UnscoredError{Reason: fmt.Sprintf(
				"not sampled: suspected pass outside the %g sample for the expensive judge (weight 0)", rate)}}
		}
		v, err := callStage(ctx, "subsample.expensive", expensive, ep, out)
		if err != nil {
			return v, within("subsample.expensive", err)
		}
		extra := map[string]float64{"sampled": 1, "suspect_pass": 0}
		if suspectPass {
			extra["suspect_pass"] = 1
			if rate < 1 {
				extra["inclusion_probability"] = rate
				v.Weight = weightField(effectiveWeight(v.Weight) / rate)
				v.Reason += fmt.Sprintf(" [sampled 1/%g]", 1/rate)
			}
		}
		v.Scores = mergeScores(v.Scores, "", extra)
		return v, nil
	})
}

// Sampled reports whether an episode with seed epSeed is in a rate sample
// drawn with seed: the decision [Subsample] makes for a suspected success. It
// is a pure function of its arguments.
func Sampled(epSeed, seed uint64, rate float64) bool {
	x := splitmix(epSeed ^ splitmix(seed+0x5bd1e995))
	return float64(x>>11)*0x1p-53 < rate
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
