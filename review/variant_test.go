package review_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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

// gradeAsTheJudge fills the exported rows' pass column with the judge's
// verdict of the variant the row names: a's pass, b's fail.
func gradeExport(t *testing.T, exported []byte, format review.Format) string {
	t.Helper()
	if format == review.JSONL {
		var out strings.Builder
		for _, line := range strings.Split(strings.TrimSpace(string(exported)), "\n") {
			var row map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &row))
			row["pass"] = map[any]string{"a": "pass", "b": "fail"}[row["variant"]]
			b, err := json.Marshal(row)
			require.NoError(t, err)
			out.Write(append(b, '\n'))
		}
		return out.String()
	}
	rows, err := csv.NewReader(bytes.NewReader(exported)).ReadAll()
	require.NoError(t, err)
	col := slices.Index(rows[0], "variant")
	require.GreaterOrEqual(t, col, 0, "the export has a variant column")
	for _, row := range rows[1:] {
		row[slices.Index(rows[0], "pass")] = map[string]string{"a": "pass", "b": "fail"}[row[col]]
	}
	var out bytes.Buffer
	csv.NewWriter(&out).WriteAll(rows)
	return out.String()
}

// TestVariantsReviewedApart: in a log of two variants with the same
// samples and epochs, where people pass every episode of a and fail every
// one of b, the reviews of each variant stay apart through export, import,
// the review file, Load and the summary, in CSV and in JSONL. Before the
// key had the variant, the queue collided (see
// TestQueueOfVariantsReadsBack) and a's and b's reviews of an episode were
// one episode's.
func TestVariantsReviewedApart(t *testing.T) {
	t.Parallel()
	for _, format := range []review.Format{review.CSV, review.JSONL} {
		t.Run(string(format), func(t *testing.T) {
			t.Parallel()
			log, recs := variantLog(t, 10, 2)
			q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 3, Share: 1})
			require.NoError(t, err)
			require.NoError(t, review.WriteQueue(review.QueuePath(log), q))
			f, err := review.Load(log)
			require.NoError(t, err)
			require.Len(t, f.Queued, 40, "every episode of both variants, whole")

			var exported bytes.Buffer
			require.NoError(t, review.Export(&exported, f.Queue, f.Queued, review.ExportOptions{Format: format}))
			graded := gradeExport(t, exported.Bytes(), format)
			rs, err := review.Import(strings.NewReader(graded), "graded", review.ImportOptions{Format: format, Reviewer: "ana", RunID: f.RunID, Eval: f.Eval})
			require.NoError(t, err)
			require.Len(t, rs, 40)
			w, _, err := review.Open(review.FilePath(log))
			require.NoError(t, err)
			require.NoError(t, w.Append(rs...))
			require.NoError(t, w.Close())

			f, err = review.Load(log)
			require.NoError(t, err)
			require.Len(t, f.Reviews, 40)
			require.Len(t, review.Final(f.Reviews), 40, "a's and b's review of an episode are two episodes' reviews")
			for _, r := range f.Reviews {
				require.Equal(t, r.Variant == "a", r.Pass, "review of %s", r.Key())
			}
			s := review.Summarize(f.Episodes, f.Queue, f.Reviews, review.Options{})
			assert.True(t, math.IsNaN(s.PPI.Mean), "no rate pooled over variants")
			assert.True(t, math.IsNaN(float64(s.JudgeRate)))
			assert.Equal(t, review.MethodByVariant, s.PPI.Interval.Method)
			assert.Equal(t, 40, s.Episodes)
			assert.Equal(t, 40, s.Reviewed)
			assert.Equal(t, 1.0, s.Confusion.Agreement(), "people agree with the judge on every episode")
			require.Len(t, s.Variants, 2)
			for i, want := range []float64{1, 0} {
				v := s.Variants[i]
				assert.Equal(t, []string{"a", "b"}[i], v.Variant)
				assert.Equal(t, 20, v.Episodes)
				assert.Equal(t, 20, v.Reviewed)
				assert.Equal(t, 20, v.PPI.Labelled)
				assert.Equal(t, want, v.PPI.Mean, "variant %s", v.Variant)
				assert.Equal(t, want, v.ReviewsOnly.Mean, "variant %s", v.Variant)
				assert.Empty(t, v.Unknown)
			}

			// Exported again, the rows name each variant once per episode.
			var again bytes.Buffer
			require.NoError(t, review.Export(&again, f.Queue, f.Queued, review.ExportOptions{Format: format}))
			back, err := review.Import(strings.NewReader(gradeExport(t, again.Bytes(), format)), "again", review.ImportOptions{Format: format, Reviewer: "bo"})
			require.NoError(t, err)
			keys := map[review.Key]bool{}
			for _, r := range back {
				keys[r.Key()] = true
			}
			assert.Len(t, keys, 40)
		})
	}
}

// TestVariantSummaryIsItsOwnLog: each variant's summary is the summary
// of a log of one harness holding that variant's episodes, queue entries
// and reviews alone.
func TestVariantSummaryIsItsOwnLog(t *testing.T) {
	t.Parallel()
	_, recs := variantLog(t, 30, 2)
	for i := range recs {
		if i%7 == 0 {
			recs[i].Status = sink.Pass // b passes now and then
		}
	}
	eps := review.Episodes(recs)
	q, err := review.Pick(eps, review.Design{Seed: 5, Count: 40, Failures: 2})
	require.NoError(t, err)
	var reviews []review.Review
	for i, e := range q.Entries[:30] {
		reviews = append(reviews, review.Review{Variant: e.Variant, SampleID: e.SampleID, Epoch: e.Epoch, Reviewer: "ana", Time: t0, Pass: i%3 != 0})
	}
	s := review.Summarize(eps, q, reviews, review.Options{})
	require.Len(t, s.Variants, 2)
	for _, got := range s.Variants {
		var alone []review.Episode
		for _, e := range eps {
			if e.Variant == got.Variant {
				e.Variant = ""
				alone = append(alone, e)
			}
		}
		vq := *q
		vq.Entries = nil
		for _, e := range q.Entries {
			if e.Variant == got.Variant {
				e.Variant = ""
				vq.Entries = append(vq.Entries, e)
			}
		}
		var vr []review.Review
		for _, r := range reviews {
			if r.Variant == got.Variant {
				r.Variant = ""
				vr = append(vr, r)
			}
		}
		want := review.Summarize(alone, &vq, vr, review.Options{})
		want.Variant = got.Variant
		wantJSON, err := json.Marshal(want) // NaN ≠ NaN: compared as JSON, where it is null
		require.NoError(t, err)
		gotJSON, err := json.Marshal(got)
		require.NoError(t, err)
		assert.JSONEq(t, string(wantJSON), string(gotJSON), "variant %s", got.Variant)
		assert.False(t, math.IsNaN(got.PPI.Mean))
	}
}

// TestPickSharesTheCountAmongVariants: each variant is a stratum with an
// equal part of the count, drawn within it, each pick's probability its
// part over the variant's episodes; variants with all their episodes (the
// same samples) get the same samples picked. Over 4,000 seeds, each
// episode's share of queues that pick it is its stated probability, also
// when a variant ran fewer samples (eliminated halfway).
func TestPickSharesTheCountAmongVariants(t *testing.T) {
	t.Parallel()
	_, recs := variantLog(t, 20, 2)
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 1, Count: 10})
	require.NoError(t, err)
	picked := map[string][]string{}
	for _, e := range q.Entries {
		assert.Equal(t, 5.0/40, e.Prob)
		picked[e.Variant] = append(picked[e.Variant], e.SampleID+"/"+strconv.Itoa(e.Epoch))
	}
	assert.Len(t, picked["a"], 5)
	slices.Sort(picked["a"])
	slices.Sort(picked["b"])
	assert.Equal(t, picked["a"], picked["b"], "the same samples for each variant: common random numbers")
	assert.Equal(t, []review.Stratum{{Variant: "a", Episodes: 40, Picks: 5}, {Variant: "b", Episodes: 40, Picks: 5}}, q.Strata)

	// b stopped after 10 samples: its 20 episodes get as many picks as
	// a's 40, at twice the probability.
	short := slices.DeleteFunc(slices.Clone(recs), func(r sink.Record) bool { return r.Variant == "b" && index(r.SampleID) >= 10 })
	eps := review.Episodes(short)
	const runs = 4000
	hits, prob := map[review.Key]int{}, map[review.Key]float64{}
	for seed := range uint64(runs) {
		q, err := review.Pick(eps, review.Design{Seed: seed, Count: 12, StratifyBy: "none"})
		require.NoError(t, err)
		for _, e := range q.Entries {
			hits[e.Key()]++
			prob[e.Key()] = e.Prob
		}
	}
	for _, e := range eps {
		want := map[string]float64{"a": 6.0 / 40, "b": 6.0 / 20}[e.Variant]
		assert.Equal(t, want, prob[e.Key()], "%s", e.Key())
		got := float64(hits[e.Key()]) / runs
		// 4 standard errors of a share of 4,000 at p ≤ 0.3.
		assert.InDelta(t, want, got, 4*math.Sqrt(want*(1-want)/runs), "%s", e.Key())
	}
}

// TestLoadKeepsVariants: Load keeps each episode's variant, and the whole
// records of the queued episodes of each variant, whether the log is read
// on every core (whole) or record by record (a torn tail).
func TestLoadKeepsVariants(t *testing.T) {
	t.Parallel()
	log, recs := variantLog(t, 4, 2)
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 2, Share: 1})
	require.NoError(t, err)
	require.NoError(t, review.WriteQueue(review.QueuePath(log), q))
	for _, torn := range []bool{false, true} {
		if torn {
			f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString(`{"schema":1,"run_id":"run-1","variant":"a","sam`)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
		f, err := review.Load(log)
		require.NoError(t, err)
		require.Equal(t, torn, len(f.Torn) == 1)
		require.Len(t, f.Episodes, len(recs))
		for i := range recs {
			assert.Equal(t, recs[i].Variant, f.Episodes[i].Variant)
		}
		require.Len(t, f.Queued, len(recs))
		seen := map[review.Key]bool{}
		for _, r := range f.Queued {
			assert.Equal(t, `"`+r.Variant+`"`, string(r.Output), "the variant's own record")
			seen[review.Key{Variant: r.Variant, SampleID: r.SampleID, Epoch: r.Epoch}] = true
		}
		assert.Len(t, seen, len(recs))
	}
}
