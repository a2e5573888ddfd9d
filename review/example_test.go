package review_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
)

// The whole path in code: pick a queue from a run's records, append
// people's grades, summarize. Here a lenient judge passes every episode
// and people fail one in three of those they review.
func Example() {
	var recs []sink.Record
	for i := range 300 {
		recs = append(recs, sink.Record{RunID: "r", SampleID: fmt.Sprintf("s%03d", i), Status: sink.Pass})
	}
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 1, Count: 30})
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "review-example")
	defer os.RemoveAll(dir)
	w, _, err := review.Open(review.FilePath(filepath.Join(dir, "run.jsonl")))
	if err != nil {
		panic(err)
	}
	for i, e := range q.Entries {
		w.Append(review.Review{SampleID: e.SampleID, Epoch: e.Epoch, Reviewer: "ana", Time: time.Now(), Pass: i%3 != 0})
	}
	w.Close()
	reviews, _, _ := review.Read(review.FilePath(filepath.Join(dir, "run.jsonl")))
	s := review.Summarize(review.Episodes(recs), q, reviews, review.Options{})
	fmt.Printf("picked %d, each with probability %.2f\n", len(q.Entries), q.Entries[0].Prob)
	fmt.Printf("judge %.2f, people %.3f [%.3f, %.3f]\n", float64(s.JudgeRate), s.PPI.Mean, s.PPI.Interval.Lo, s.PPI.Interval.Hi)
	// Output:
	// picked 30, each with probability 0.10
	// judge 1.00, people 0.667 [0.498, 0.836]
}
