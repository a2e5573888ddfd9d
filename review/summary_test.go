package review_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/stats"
)

// TestSummarizeByHand checks Summarize's bookkeeping on a run small
// enough to count by hand.
func TestSummarizeByHand(t *testing.T) {
	t.Parallel()
	x, y := map[string]string{"k": "x"}, map[string]string{"k": "y"}
	recs := []sink.Record{
		{SampleID: "a", Status: sink.Pass, Tags: x},
		{SampleID: "b", Status: sink.Pass, Tags: x},
		{SampleID: "c", Status: sink.Fail, Tags: x},
		{SampleID: "d", Status: sink.Fail, Tags: y},
		{SampleID: "e", Status: sink.Pass, Tags: y},
		{SampleID: "f", Status: sink.Error, Tags: y},
	}
	q := &review.Queue{Entries: []review.Entry{{SampleID: "a", Prob: 0.5}, {SampleID: "c", Prob: 0.5}, {SampleID: "d", Prob: 0.5}, {SampleID: "e", Prob: 0.5}}}
	reviews := []review.Review{
		rv("a", 0, "ana", true, 0),
		rv("a", 0, "bo", false, 1),
		rv("a", 0, "bo", true, 2), // bo's last word
		rv("c", 0, "ana", false, 3),
		rv("d", 0, "ana", true, 4),
		rv("b", 0, "ana", false, 5), // not in the queue
		rv("z", 0, "ana", true, 6),  // not in the log
	}
	reviews[3].SawVerdict = true
	s := review.Summarize(review.Episodes(recs), q, reviews, review.Options{MinItems: 2, LowKappa: 0.6})
	assert.Equal(t, 5, s.Episodes, "the error is not the judge's")
	assert.Equal(t, 3, s.JudgePasses)
	assert.Equal(t, 0.6, float64(s.JudgeRate))
	assert.Equal(t, 4, s.Picked)
	assert.Equal(t, 3, s.Reviewed, "a, c and d; e is not reviewed yet")
	assert.Equal(t, 1, s.OffQueue)
	assert.Equal(t, []review.Key{{SampleID: "z"}}, s.Unknown)
	assert.Equal(t, 6, s.Reviews)
	assert.Equal(t, 2, s.Reviewers)
	assert.Equal(t, 1, s.Seen)
	// The judge against each review of a known episode: a·ana, a·bo
	// both pass; b·ana judge too lenient; c·ana both fail; d·ana judge
	// too strict.
	assert.Equal(t, stats.Confusion{BothPass: 2, FalsePass: 1, FalseFail: 1, BothFail: 1}, s.Confusion)
	assert.Equal(t, 1, s.AlphaEpisodes)
	assert.True(t, math.IsNaN(float64(s.Alpha)), "one pair, in agreement: no variation")
	// k=x: a·ana, a·bo, b·ana, c·ana: agreement 3/4, judge passes 3/4,
	// people 2/4: p_e = 0.5, κ = 0.5, under 0.6: flagged.
	require.Len(t, s.ByTag, 2)
	assert.Equal(t, review.TagAgreement{Tag: "k", Value: "x", Confusion: stats.Confusion{BothPass: 2, FalsePass: 1, BothFail: 1}, Kappa: 0.5, Low: true}, s.ByTag[0])
	assert.False(t, s.ByTag[1].Low, "k=y has one review")
	// The estimate: three of four picks of one cell reviewed, so each
	// counts with probability 0.5 · 3/4.
	pred := []float64{1, 1, 0, 0, 1}
	labels := []stats.Label{{Index: 0, Value: 1, Prob: 0.375}, {Index: 2, Value: 0, Prob: 0.375}, {Index: 3, Value: 1, Prob: 0.375}}
	bySample := []int{0, 1, 2, 3, 4}
	assert.Equal(t, stats.PPIMean(pred, labels, bySample, 0.95), s.PPI)
	assert.Equal(t, stats.PPIMeanLambda(pred, labels, bySample, 0, 0.95), s.ReviewsOnly)
	assert.InDelta(t, 2.0/3, s.ReviewsOnly.Mean, 1e-12)
}

// TestSummarizeClustersBySample: epochs of one sample are one cluster in
// the estimate, as in the report.
func TestSummarizeClustersBySample(t *testing.T) {
	t.Parallel()
	var recs []sink.Record
	var q review.Queue
	var reviews []review.Review
	var pred []float64
	var bySample []int
	var labels []stats.Label
	for i := range 20 {
		for e := range 2 {
			st, pass := sink.Fail, i%3 == 0
			if i%2 == 0 {
				st = sink.Pass
			}
			id := string(rune('a' + i))
			recs = append(recs, sink.Record{SampleID: id, Epoch: e, Status: st})
			pred, bySample = append(pred, b2f(st == sink.Pass)), append(bySample, i)
			if i%2 == 0 || e == 0 {
				q.Entries = append(q.Entries, review.Entry{SampleID: id, Epoch: e, Prob: 0.5})
				reviews = append(reviews, rv(id, e, "ana", pass, 0))
				labels = append(labels, stats.Label{Index: len(pred) - 1, Value: b2f(pass), Prob: 0.5})
			}
		}
	}
	s := review.Summarize(review.Episodes(recs), &q, reviews, review.Options{})
	assert.Equal(t, stats.PPIMean(pred, labels, bySample, 0.95), s.PPI)
	assert.Greater(t, s.PPI.SE, stats.PPIMean(pred, labels, nil, 0.95).SE, "identical epochs: the clustered SE is larger")
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
