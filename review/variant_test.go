package review_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// variantLog writes a log of two variants, a and b, with the same samples
// and epochs: a passes every episode, b fails every one.
func variantLog(t *testing.T, samples, epochs int) (log string, recs []sink.Record) {
	t.Helper()
	log = filepath.Join(t.TempDir(), "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	for i := range samples {
		for e := range epochs {
			for _, v := range []string{"a", "b"} {
				r := sink.Record{Schema: sink.SchemaVersion, RunID: "run-1", Eval: "ev", Variant: v, SampleID: "s" + strconv.Itoa(i), Epoch: e,
					Status: map[string]sink.Status{"a": sink.Pass, "b": sink.Fail}[v], Input: []byte(`{"q":` + strconv.Itoa(i) + `}`),
					Output: []byte(`"` + v + `"`), StartedAt: t0}
				require.NoError(t, w.Write(context.Background(), r))
				recs = append(recs, r)
			}
		}
	}
	require.NoError(t, w.Close(context.Background()))
	return log, recs
}

// TestQueueOfVariantsReadsBack: a queue of every episode of a log of two
// variants holds each variant's episode of a sample and epoch apart.
// Before the key had the variant, the queue held a's and b's episode of
// one sample and epoch under one key, and ReadQueue refused it ("in the
// queue twice").
func TestQueueOfVariantsReadsBack(t *testing.T) {
	t.Parallel()
	log, recs := variantLog(t, 5, 2)
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 1, Share: 1})
	require.NoError(t, err)
	require.NoError(t, review.WriteQueue(review.QueuePath(log), q))
	back, err := review.ReadQueue(review.QueuePath(log))
	require.NoError(t, err)
	require.Len(t, back.Entries, 20)
}
