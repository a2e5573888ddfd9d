package review_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
)

// simLog returns n records of one run: each truly passes with probability
// truth(i); the judge passes 95% of true passes and 30% of true failures
// (the biased judge). grade[i] is the truth, for reviewers.
func simLog(rng *rand.Rand, n int, truth func(i int) float64, tags func(i int) map[string]string) (recs []sink.Record, grade map[review.Key]bool) {
	grade = map[review.Key]bool{}
	for i := range n {
		y := rng.Float64() < truth(i)
		f := rng.Float64() < 0.30
		if y {
			f = rng.Float64() < 0.95
		}
		st := sink.Fail
		if f {
			st = sink.Pass
		}
		id := "s" + strconv.Itoa(i)
		recs = append(recs, sink.Record{RunID: "run", SampleID: id, Status: st, Tags: tags(i)})
		grade[review.Key{SampleID: id}] = y
	}
	return recs, grade
}

func noTags(int) map[string]string { return nil }

func TestPickUniform(t *testing.T) {
	t.Parallel()
	recs, _ := simLog(rand.New(rand.NewPCG(1, 1)), 1000, func(int) float64 { return 0.6 }, noTags)
	recs = append(recs, sink.Record{RunID: "run", SampleID: "err", Status: sink.Error}, sink.Record{RunID: "run", SampleID: "u", Status: sink.Unscored})
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 7, Count: 50})
	require.NoError(t, err)
	assert.Equal(t, 1000, q.Episodes, "errors and unscored episodes are not the judge's pass rate")
	require.Len(t, q.Entries, 50)
	seen := map[review.Key]bool{}
	for _, e := range q.Entries {
		assert.Equal(t, 0.05, e.Prob)
		assert.NotContains(t, []string{"err", "u"}, e.SampleID)
		seen[e.Key()] = true
	}
	assert.Len(t, seen, 50)

	again, err := review.Pick(review.Episodes(recs), review.Design{Seed: 7, Count: 50})
	require.NoError(t, err)
	assert.Equal(t, q.Entries, again.Entries, "seeded")
	more, err := review.Pick(review.Episodes(recs), review.Design{Seed: 7, Share: 0.1})
	require.NoError(t, err)
	require.Len(t, more.Entries, 100)
	inMore := map[review.Key]bool{}
	for _, e := range more.Entries {
		inMore[e.Key()] = true
	}
	for k := range seen {
		assert.True(t, inMore[k], "a larger count of the same seed picks a superset")
	}
	other, err := review.Pick(review.Episodes(recs), review.Design{Seed: 8, Count: 50})
	require.NoError(t, err)
	assert.NotEqual(t, q.Entries, other.Entries)

	for _, d := range []review.Design{{}, {Count: -1}, {Share: 1.5}, {Count: 5, Failures: -1}, {Count: 5, Tags: map[string]float64{"a=b": 0}}} {
		_, err := review.Pick(review.Episodes(recs), d)
		assert.Error(t, err, "%+v", d)
	}
}

func TestPickStratified(t *testing.T) {
	t.Parallel()
	// Three tags of 900, 90 and 10 episodes; 60 picks: 20 each, but the
	// smallest has 10, so the other two share 50.
	tag := func(i int) map[string]string {
		switch {
		case i < 900:
			return map[string]string{"kind": "big"}
		case i < 990:
			return map[string]string{"kind": "mid"}
		}
		return map[string]string{"kind": "small"}
	}
	recs, _ := simLog(rand.New(rand.NewPCG(2, 2)), 1000, func(int) float64 { return 0.5 }, tag)
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 1, Count: 60, StratifyBy: "kind"})
	require.NoError(t, err)
	require.Equal(t, []review.Stratum{{Value: "big", Episodes: 900, Picks: 25}, {Value: "mid", Episodes: 90, Picks: 25}, {Value: "small", Episodes: 10, Picks: 10}}, q.Strata)
	probs := map[string]float64{}
	for _, e := range q.Entries {
		probs[e.Stratum] = e.Prob
	}
	assert.InDelta(t, 25.0/900, probs["big"], 1e-12)
	assert.InDelta(t, 25.0/90, probs["mid"], 1e-12)
	assert.Equal(t, 1.0, probs["small"])
}

// TestPickOversamplesFailures: with the judge's failures weighted 4, a
// failure is 4 times likelier to be picked (until its probability
// reaches 1), the probabilities sum to the count, and picks are those
// with u < π.
func TestPickOversamplesFailures(t *testing.T) {
	t.Parallel()
	recs, _ := simLog(rand.New(rand.NewPCG(3, 3)), 4000, func(int) float64 { return 0.6 }, noTags)
	recs[0].Scores = map[string]float64{"agreement": 0.6}
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 3, Count: 200, Failures: 4, Disagreeing: 1000})
	require.NoError(t, err)
	var pPass, pFail float64
	disagreeing := false
	for _, e := range q.Entries {
		if e.SampleID == "s0" {
			disagreeing = true
			assert.Equal(t, 1.0, e.Prob)
			continue
		}
		if recs[index(e.SampleID)].Status == sink.Pass {
			pPass = e.Prob
		} else {
			pFail = e.Prob
		}
	}
	assert.True(t, disagreeing, "an episode weighted 1000 is certain to be picked")
	assert.InDelta(t, 4, pFail/pPass, 1e-9)
	fails := 0
	for _, r := range recs[1:] {
		if r.Status == sink.Fail {
			fails++
		}
	}
	assert.InDelta(t, 200, 1+float64(fails)*pFail+float64(3999-fails)*pPass, 1e-6, "the probabilities sum to the count")
	assert.InDelta(t, 200, len(q.Entries), 45, "Poisson sampling picks the count on average")
}

func index(id string) int {
	i, _ := strconv.Atoi(id[1:])
	return i
}

// TestPickThenEstimateCovers runs the whole path several hundred times:
// pick a queue from a simulated log with a biased judge, grade it with
// the truth, summarize: the prediction-powered interval holds the true
// rate at the nominal level under each design, and the judge's own never
// does.
func TestPickThenEstimateCovers(t *testing.T) {
	t.Parallel()
	const runs, n = 200, 1000
	hard := func(i int) bool { return i%5 < 2 } // 40% hard
	truth := func(i int) float64 {
		if hard(i) {
			return 0.3
		}
		return 0.8
	} // mean 0.6
	tag := func(i int) map[string]string {
		if hard(i) {
			return map[string]string{"level": "hard"}
		}
		return map[string]string{"level": "easy"}
	}
	for _, d := range []review.Design{
		{Count: 100},
		{Count: 100, StratifyBy: "level"},
		{Count: 100, Failures: 3},
		{Count: 100, Tags: map[string]float64{"level=hard": 2}},
	} {
		t.Run(designName(d), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(d.Count)+uint64(d.Failures*10)+uint64(len(d.StratifyBy)), 9))
			covers, judge := 0, 0
			for r := range runs {
				recs, grade := simLog(rng, n, truth, tag)
				d.Seed = uint64(r)
				q, err := review.Pick(review.Episodes(recs), d)
				require.NoError(t, err)
				var reviews []review.Review
				for _, e := range q.Entries {
					reviews = append(reviews, rv(e.SampleID, e.Epoch, "truth", grade[e.Key()], 0))
				}
				s := review.Summarize(review.Episodes(recs), q, reviews, review.Options{})
				require.Equal(t, len(q.Entries), s.PPI.Labelled)
				if s.PPI.Interval.Contains(0.6) {
					covers++
				}
				if s.JudgeCI.Contains(0.6) {
					judge++
				}
			}
			t.Logf("PPI covers %d/%d, the judge %d/%d", covers, runs, judge, runs)
			// 95% of 200 is 190, standard deviation 3.1. The precise
			// coverage claim is stats' (2,000 runs a design); this checks
			// that the queue's probabilities reach the estimate (taken
			// for uniform, the oversampled designs cover a third).
			assert.GreaterOrEqual(t, covers, 178)
			assert.Zero(t, judge)
		})
	}
}

func designName(d review.Design) string {
	switch {
	case d.StratifyBy != "":
		return "stratified"
	case d.Failures != 0:
		return "failures"
	case d.Tags != nil:
		return "tags"
	}
	return "uniform"
}

func TestQueueFile(t *testing.T) {
	t.Parallel()
	recs, _ := simLog(rand.New(rand.NewPCG(4, 4)), 100, func(int) float64 { return 0.5 }, noTags)
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 1, Share: 0.2, Failures: 2})
	require.NoError(t, err)
	path := review.QueuePath(filepath.Join(t.TempDir(), "run.jsonl"))
	require.NoError(t, review.WriteQueue(path, q))
	got, err := review.ReadQueue(path)
	require.NoError(t, err)
	assert.Equal(t, q.Entries, got.Entries)
	assert.Equal(t, q.Design, got.Design)
	assert.Equal(t, "run", got.RunID)
	for _, e := range got.Entries {
		assert.False(t, math.IsNaN(e.Prob))
	}
}
