package evaltest_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/evaltest"
	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// TestReviewedGateDecidesOnPeople: the judge passes every episode, people
// fail half of those they review; the reviewed gate decides on the
// prediction-powered bound and fails, where the judge's bound passes.
func TestReviewedGateDecidesOnPeople(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rec := &recorder{TB: t}
	evaltest.Run(rec, arithmetic(adder(-1)), eval.Config{Log: log}, evaltest.Gate{MinLowerBound: 0.9, Reviewed: true})
	require.Len(t, rec.errors, 1, "no reviews yet: the reviewed gate cannot pass")
	require.Contains(t, rec.errors[0], "has no review queue")

	var recs []sink.Record
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		recs = append(recs, r)
	}
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 1, Count: 60})
	require.NoError(t, err)
	require.NoError(t, review.WriteQueue(review.QueuePath(log), q))
	w, _, err := review.Open(review.FilePath(log))
	require.NoError(t, err)
	for i, e := range q.Entries {
		require.NoError(t, w.Append(review.Review{SampleID: e.SampleID, Epoch: e.Epoch, Reviewer: "ana", Time: time.Now(), Pass: i%2 == 0}))
	}
	require.NoError(t, w.Close())

	rec = &recorder{TB: t}
	rep := evaltest.Run(rec, arithmetic(adder(-1)), eval.Config{Log: log}, evaltest.Gate{MinLowerBound: 0.9, Reviewed: true})
	require.Greater(t, rep.Interval.Lo, 0.9, "the judge alone clears the bar")
	require.Len(t, rec.errors, 1)
	require.Contains(t, rec.errors[0], "prediction-powered pass rate 50.0%")
	require.Contains(t, rec.errors[0], "from 60 reviews and 200 judge verdicts")

	rec = &recorder{TB: t}
	evaltest.Run(rec, arithmetic(adder(-1)), eval.Config{Log: log}, evaltest.Gate{MinLowerBound: 0.3, Reviewed: true})
	require.Empty(t, rec.errors, "a bar the reviews clear passes")
}

// TestReviewedGateHoldsPerVariant: in a run of two variants whose judge
// passes every episode, people pass a's reviewed episodes and fail b's:
// the reviewed gate fails on b alone, naming it, and pools nothing.
func TestReviewedGateHoldsPerVariant(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	e := arithmetic(nil)
	e.Harness = nil
	e.Variants = []eval.Variant[question, string]{{Name: "a", Harness: adder(-1)}, {Name: "b", Harness: adder(-1)}}
	evaltest.Run(&recorder{TB: t}, e, eval.Config{Log: log}, evaltest.Gate{})

	var recs []sink.Record
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		recs = append(recs, r)
	}
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 1, Count: 60})
	require.NoError(t, err)
	w, _, err := review.Open(review.FilePath(log))
	require.NoError(t, err)
	require.NoError(t, review.WriteQueue(review.QueuePath(log), q))
	for _, e := range q.Entries {
		require.NoError(t, w.Append(review.Review{Variant: e.Variant, SampleID: e.SampleID, Epoch: e.Epoch, Reviewer: "ana", Time: time.Now(), Pass: e.Variant == "a"}))
	}
	require.NoError(t, w.Close())

	rec := &recorder{TB: t}
	evaltest.Run(rec, e, eval.Config{Log: log}, evaltest.Gate{MinLowerBound: 0.5, Reviewed: true})
	require.Len(t, rec.errors, 1, "%q", rec.errors)
	require.Contains(t, rec.errors[0], "variant b: prediction-powered pass rate 0.0%")
	require.Contains(t, rec.errors[0], "from 30 reviews and 200 judge verdicts")
}

// TestReviewedGateLeavesOutEliminatedVariants: a run of two variants
// eliminates b (it fails half the samples a passes); people pass a's
// reviewed episodes and fail b's. The report's gate leaves b out, as the
// run stopped it on evidence it loses; the reviewed gate did not, and
// failed on b. Now it leaves b out too, and passes on a.
func TestReviewedGateLeavesOutEliminatedVariants(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	e := arithmetic(nil)
	e.Harness = nil
	e.Variants = []eval.Variant[question, string]{{Name: "a", Harness: adder(-1)}, {Name: "b", Harness: adder5()}}
	cfg := eval.Config{Log: log, EliminateVariants: 0.05, Seed: 3}
	rep := evaltest.Run(&recorder{TB: t}, e, cfg, evaltest.Gate{})
	require.NotNil(t, rep.Leaderboard)
	var eliminated []string
	for _, st := range rep.Leaderboard.Variants {
		if st.Eliminated != nil {
			eliminated = append(eliminated, st.Variant)
		}
	}
	require.Equal(t, []string{"b"}, eliminated, "the test needs b eliminated")

	var recs []sink.Record
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		recs = append(recs, r)
	}
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 1, Count: 60})
	require.NoError(t, err)
	w, _, err := review.Open(review.FilePath(log))
	require.NoError(t, err)
	require.NoError(t, review.WriteQueue(review.QueuePath(log), q))
	reviewedB := 0
	for _, e := range q.Entries {
		if e.Variant == "b" {
			reviewedB++
		}
		require.NoError(t, w.Append(review.Review{Variant: e.Variant, SampleID: e.SampleID, Epoch: e.Epoch, Reviewer: "ana", Time: time.Now(), Pass: e.Variant == "a"}))
	}
	require.NoError(t, w.Close())
	require.GreaterOrEqual(t, reviewedB, 2, "b's episodes reviewed, enough for its own gate")

	rec := &recorder{TB: t}
	evaltest.Run(rec, e, cfg, evaltest.Gate{MinLowerBound: 0.5, Reviewed: true})
	require.Empty(t, rec.errors, "b was eliminated: the reviewed gate holds for a alone")
}
