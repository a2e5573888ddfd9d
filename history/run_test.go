package history_test

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/history"
	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// TestReadIsTheRecordByRecordSummary: Read folds a whole log on every core
// (recordjson.Fold) into the report and the span that reading it record by
// record gives, in many chunks, with episodes out of order and one without
// a start; a log with a torn tail is read record by record, the tail a
// warning.
func TestReadIsTheRecordByRecordSummary(t *testing.T) {
	defer func(n int) { recordjson.ChunkSize = n }(recordjson.ChunkSize)
	recordjson.ChunkSize = 2000
	rng := rand.New(rand.NewPCG(7, 8))
	start := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	var log []byte
	for i := range 600 {
		r := sink.Record{Schema: 1, RunID: "run", Eval: "e", SampleID: "s" + strconv.Itoa(i%150), Epoch: i / 150,
			Status: sink.Fail, Tags: map[string]string{"k": strconv.Itoa(i % 4)}, DurationMS: rng.Float64() * 5000, CostUSD: 0.003,
			StartedAt: start.Add(time.Duration(rng.IntN(3600)) * time.Second)}
		if rng.IntN(2) == 0 {
			r.Status, r.Score = sink.Pass, 1
		}
		if i == 300 {
			r.StartedAt = time.Time{}
		}
		log = append(r.AppendJSON(log), '\n')
	}
	for _, tail := range []string{"", `{"schema":1,"run_id":"ru`} {
		path := filepath.Join(t.TempDir(), "run.jsonl")
		require.NoError(t, os.WriteFile(path, append(log, tail...), 0o644))
		var first, last time.Time
		want, err := report.FromRecords(func(yield func(sink.Record, error) bool) {
			for r, err := range jsonl.Records(path) {
				if err == nil {
					if first.IsZero() || r.StartedAt.Before(first) {
						first = r.StartedAt
					}
					if end := r.StartedAt.Add(time.Duration(r.DurationMS * float64(time.Millisecond))); end.After(last) {
						last = end
					}
				}
				if !yield(r, err) {
					return
				}
			}
		}, nil)
		require.NoError(t, err)
		run, got, err := history.Read(path, nil)
		require.NoError(t, err)
		wantJSON, err := json.Marshal(want)
		require.NoError(t, err)
		gotJSON, err := json.Marshal(got)
		require.NoError(t, err)
		require.JSONEq(t, string(wantJSON), string(gotJSON), "tail %q", tail)
		require.Equal(t, first, run.Start, "tail %q", tail)
		require.Equal(t, last.Sub(first), run.Wall, "tail %q", tail)
		require.Equal(t, tail != "", len(got.Warnings) > 0, "tail %q: warnings %q", tail, got.Warnings)
	}
}
