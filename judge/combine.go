package judge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/proctor-evals/proctor/harness"
)

// All passes when every judge passes: a logical AND in three-valued logic
// (pass, fail, unscored).
//
// The judges run in order and the first failing verdict ends the call and
// is returned, so put cheap judges first: the expensive ones never run on
// an output a cheap one already failed. A judge that returns an unscored
// error does not end the call: a later failure still decides (fail
// dominates unscored); if none fails, All is unscored. Any other error ends
// the call and is returned.
//
// When every judge passes, the verdict has the lowest of their scores, the
// union of their sub-scores (later judges win on a shared key), and their
// non-empty reasons joined by "; ". Weight is the product of the weights of
// the verdicts that ran (inverse inclusion probabilities of independent
// sampling steps multiply); see [Subsample].
func All[T, O any](js ...Judge[T, O]) Judge[T, O] {
	js = append([]Judge[T, O](nil), js...)
	return Func[T, O](func(ctx context.Context, ep *harness.Episode[T], out O) (Verdict, error) {
		return logic(ctx, ep, out, js, false)
	})
}

// Any passes when at least one judge passes: a logical OR in three-valued
// logic. The judges run in order and the first passing verdict ends the
// call and is returned (short-circuit: later judges never run). An unscored
// judge does not end the call; if no judge passes and one was unscored, Any
// is unscored. Any other error ends the call and is returned.
//
// When every judge fails, the verdict has the highest of their scores, the
// union of their sub-scores and their reasons joined by "; ". Weight
// combines as in [All].
func Any[T, O any](js ...Judge[T, O]) Judge[T, O] {
	js = append([]Judge[T, O](nil), js...)
	return Func[T, O](func(ctx context.Context, ep *harness.Episode[T], out O) (Verdict, error) {
		return logic(ctx, ep, out, js, true)
	})
}

// logic implements All (decisive = false: a failure decides) and Any
// (decisive = true: a pass decides).
func logic[T, O any](ctx context.Context, ep *harness.Episode[T], out O, js []Judge[T, O], decisive bool) (Verdict, error) {
	name := "all"
	if decisive {
		name = "any"
	}
	if len(js) == 0 {
		return Verdict{}, Permanent(fmt.Errorf("judge: %s of no judges", name))
	}
	acc := Verdict{Pass: !decisive, Score: 1}
	if decisive {
		acc.Score = 0
	}
	weight := 1.0
	var reasons []string
	var unscored error
	for i, j := range js {
		step := fmt.Sprintf("%s[%d]", name, i)
		v, err := callStage(ctx, step, j, ep, out)
		if err != nil {
			err = within(step, err)
			if errors.Is(err, ErrUnscored) {
				if unscored == nil {
					unscored = err
				}
				continue
			}
			return Verdict{}, err
		}
		weight *= effectiveWeight(v.Weight)
		if v.Pass == decisive {
			v.Weight = weightField(weight)
			return v, nil
		}
		if decisive {
			acc.Score = max(acc.Score, v.Score)
		} else {
			acc.Score = min(acc.Score, v.Score)
		}
		acc.Scores = mergeScores(acc.Scores, "", v.Scores)
		if v.Reason != "" {
			reasons = append(reasons, v.Reason)
		}
	}
	if unscored != nil {
		return Verdict{}, unscored
	}
	acc.Reason = strings.Join(reasons, "; ")
	acc.Weight = weightField(weight)
	return acc, nil
}

func effectiveWeight(w float64) float64 {
	if w > 0 {
		return w
	}
	return 1
}

// weightField turns an effective weight back into Verdict.Weight, where 0
// means 1.
func weightField(w float64) float64 {
	if w == 1 {
		return 0
	}
	return w
}

func mergeScores(dst map[string]float64, prefix string, src map[string]float64) map[string]float64 {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]float64, len(src))
	}
	for k, v := range src {
		dst[prefix+k] = v
	}
	return dst
}

// Criterion is one weighted part of a [Weighted] judge.
type Criterion[T, O any] struct {
	Name   string  // the key of its score in Verdict.Scores; unique
	Weight float64 // its share of the total; must be > 0
	Judge  Judge[T, O]
}

// Weighted scores an output on several criteria and averages them: Score is
// Σ weight·score / Σ weight over the criteria, and the verdict passes when
// Score ≥ threshold. Scores holds each criterion's score under its Name and
// the criterion's own sub-scores under "Name.key". Reason joins the reasons
// of the criteria that did not pass, each prefixed by its name.
//
// Every criterion runs (a weighted score needs them all), in order. If one
// returns an error, Weighted returns it; if one is unscored, Weighted is
// unscored: a score with a missing part would be on a different scale from
// the others. Weights of sampled verdicts are ignored.
func Weighted[T, O any](threshold float64, cs ...Criterion[T, O]) Judge[T, O] {
	cs = append([]Criterion[T, O](nil), cs...)
	seen := map[string]bool{}
	for _, c := range cs {
		if c.Weight <= 0 || c.Judge == nil || c.Name == "" || seen[c.Name] {
			panic(fmt.Sprintf("judge: Weighted: criterion %q needs a unique name, a judge and a positive weight", c.Name))
		}
		seen[c.Name] = true
	}
	return Func[T, O](func(ctx context.Context, ep *harness.Episode[T], out O) (Verdict, error) {
		if len(cs) == 0 {
			return Verdict{}, Permanent(errors.New("judge: weighted of no criteria"))
		}
		var sum, total float64
		scores := make(map[string]float64, len(cs))
		var reasons []string
		for _, c := range cs {
			v, err := callStage(ctx, "weighted."+c.Name, c.Judge, ep, out)
			if err != nil {
				var ue *UnscoredError
				if errors.As(err, &ue) {
					err = Unscored(c.Name + ": " + ue.Reason)
				}
				return Verdict{}, within("weighted."+c.Name, err)
			}
			sum += c.Weight * v.Score
			total += c.Weight
			scores[c.Name] = v.Score
			mergeScores(scores, c.Name+".", v.Scores)
			if !v.Pass && v.Reason != "" {
				reasons = append(reasons, c.Name+": "+v.Reason)
			}
		}
		score := sum / total
		return Verdict{Pass: score >= threshold, Score: score, Scores: scores, Reason: strings.Join(reasons, "; ")}, nil
	})
}

// Settle decides whether a cheap verdict is final in a [Cascade].
type Settle func(Verdict) bool

// Common settle rules.
var (
	// PassSettles: a cheap pass is final; anything else goes to the
	// expensive judge. For checks that can prove an answer right but not
	// wrong: exact match against the reference, where a paraphrase fails
	// the check but may still be right.
	PassSettles Settle = func(v Verdict) bool { return v.Pass }
	// FailSettles: a cheap failure is final; a pass goes on. For gates
	// that can prove an answer wrong but not right: the format is invalid,
	// the tests do not compile.
	FailSettles Settle = func(v Verdict) bool { return !v.Pass }
	// NeverSettles always escalates; the cheap verdict's sub-scores are
	// still kept.
	NeverSettles Settle = func(Verdict) bool { return false }
)

// Cascade runs the cheap judge first and calls the expensive one only for
// what the cheap one cannot settle.
//
// The cheap verdict is returned as is when settle(v) reports true. It is
// escalated to the expensive judge when settle(v) is false or when the
// cheap judge is unscored; any other error of the cheap judge is returned
// and the expensive judge does not run. An escalated verdict is the
// expensive judge's, with the cheap verdict's sub-scores added under
// "cheap.key". Scores["escalated"] is 1 for an escalated verdict, 0 for a
// settled one.
//
// Typical use, a QA eval: exact match settles passes, a model grades the
// rest:
//
//	judge.Cascade(scorer.Normalized(ref), rubric, judge.PassSettles)
func Cascade[T, O any](cheap, expensive Judge[T, O], settle Settle) Judge[T, O] {
	if settle == nil {
		panic("judge: Cascade needs a settle rule")
	}
	return Func[T, O](func(ctx context.Context, ep *harness.Episode[T], out O) (Verdict, error) {
		v, err := callStage(ctx, "cascade.cheap", cheap, ep, out)
		if err != nil && !errors.Is(err, ErrUnscored) {
			return Verdict{}, within("cascade.cheap", err)
		}
		if err == nil && settle(v) {
			v.Scores = mergeScores(v.Scores, "", map[string]float64{"escalated": 0})
			return v, nil
		}
		e, err := callStage(ctx, "cascade.expensive", expensive, ep, out)
		if err != nil {
			return e, within("cascade.expensive", err)
		}
		cheapScores := v.Scores
		e.Scores = mergeScores(e.Scores, "", map[string]float64{"escalated": 1})
		e.Scores = mergeScores(e.Scores, "cheap.", cheapScores)
		return e, nil
	})
}

// Vote is a majority vote of several judges, or of n calls of one (a
// model-graded judge sampled at a temperature above zero).
//
// Every judge in js is called n times (n < 1 means once), concurrently;
// each call is a ballot. Unscored ballots abstain. The verdict passes when
// more ballots pass than fail and fails when more fail than pass; a tie, or
// a vote where every ballot abstained, is unscored. Any other error from a
// ballot is returned (the first, in ballot order).
//
// The verdict's Score is the mean score of the non-abstaining ballots and
// its Reason the reason of the first ballot on the winning side.
// Scores["agreement"] is the share of non-abstaining ballots on the
// winning side (1 is unanimous); Scores["ballots"], Scores["abstained"]
// count them. Weights of sampled verdicts are ignored.
func Vote[T, O any](n int, js ...Judge[T, O]) Judge[T, O] {
	js = append([]Judge[T, O](nil), js...)
	n = max(n, 1)
	return Func[T, O](func(ctx context.Context, ep *harness.Episode[T], out O) (Verdict, error) {
		if len(js) == 0 {
			return Verdict{}, Permanent(errors.New("judge: vote of no judges"))
		}
		type ballot struct {
			v   Verdict
			err error
		}
		ballots := make([]ballot, n*len(js))
		var wg sync.WaitGroup
		for i := range ballots {
			wg.Go(func() {
				step := fmt.Sprintf("vote[%d]", i%len(js))
				ballots[i].v, ballots[i].err = callStage(ctx, step, js[i%len(js)], ep, out)
				ballots[i].err = within(step, ballots[i].err)
			})
		}
		wg.Wait()
		var pass, fail, abstain int
		var sum float64
		var firstUnscored error
		for _, b := range ballots {
			switch {
			case b.err == nil:
				if b.v.Pass {
					pass++
				} else {
					fail++
				}
				sum += b.v.Score
			case errors.Is(b.err, ErrUnscored):
				abstain++
				if firstUnscored == nil {
					firstUnscored = b.err
				}
			default:
				return Verdict{}, b.err
			}
		}
		switch {
		case pass+fail == 0:
			var ue *UnscoredError
			if errors.As(firstUnscored, &ue) {
				return Verdict{}, Unscored("vote: every ballot abstained: " + ue.Reason)
			}
			return Verdict{}, Unscored("vote: every ballot abstained")
		case pass == fail:
			return Verdict{}, Unscored(fmt.Sprintf("vote: tied %d to %d", pass, fail))
		}
		win := pass > fail
		v := Verdict{Pass: win, Score: sum / float64(pass+fail)}
		for _, b := range ballots {
			if b.err == nil && b.v.Pass == win {
				v.Reason = b.v.Reason
				break
			}
		}
		v.Scores = map[string]float64{
			"agreement": float64(max(pass, fail)) / float64(pass+fail),
			"ballots":   float64(len(ballots)),
			"abstained": float64(abstain),
		}
		return v, nil
	})
}
