package duckdbcheck

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/sink/parquetsink"
)

// records are n records whose seeds fit int64 except the last one's,
// MaxUint64: past DuckDB's inference sample (20,480 lines) when n is
// larger, which is what defeats read_json_auto's defaults. One in three
// ran on a worker of a traced run (worker, trace_id, span_id); one in
// five reuses an earlier run's result (reused_from, parent_run_id).
func records(n int) []sink.Record {
	recs := make([]sink.Record, n)
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for i := range recs {
		recs[i] = sink.Record{
			Schema: sink.SchemaVersion, RunID: "run-1", Eval: "duck", SampleID: "s" + strconv.Itoa(i),
			Status: sink.Pass, Score: 1, Scores: map[string]float64{"exact": 1},
			Tags:      map[string]string{"difficulty": []string{"easy", "hard"}[i%2]},
			Input:     []byte(`{"q":` + strconv.Itoa(i) + `}`),
			Output:    []byte(`{"answer":"a` + strconv.Itoa(i) + `"}`),
			StartedAt: start.Add(time.Duration(i) * time.Millisecond),
			Seed:      uint64(i),
		}
		if i%3 == 0 {
			recs[i].Worker = "worker-" + strconv.Itoa(i%2) + ":4242"
			recs[i].TraceID, recs[i].SpanID = fmt.Sprintf("%032x", i), fmt.Sprintf("%016x", i)
		}
		if i%5 == 0 {
			recs[i].ReusedFrom, recs[i].ParentRunID = "run-0", "run-0"
		}
	}
	recs[n-1].Seed = math.MaxUint64
	return recs
}

func open(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestJSONLInDuckDB: a log loads with the one-line query the docs give,
// `read_json_auto(path, sample_size = -1)`, whatever its seeds; with the
// defaults, a seed above the int64 range past the first 20,480 lines fails
// the cast (this test notices if DuckDB ever stops failing there, so the
// docs can drop the option).
func TestJSONLInDuckDB(t *testing.T) {
	t.Parallel()
	const n = 25_000
	log := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	for _, r := range records(n) {
		require.NoError(t, w.Write(t.Context(), r))
	}
	require.NoError(t, w.Close(t.Context()))
	db := open(t)

	var count int
	var maxSeed, tag, answer string
	err = db.QueryRow(`SELECT count(*), max(seed)::VARCHAR, any_value(tags.difficulty), max(output.answer)
		FROM read_json_auto(?, sample_size = -1)`, log).Scan(&count, &maxSeed, &tag, &answer)
	require.NoError(t, err)
	require.Equal(t, n, count)
	require.Equal(t, strconv.FormatUint(math.MaxUint64, 10), maxSeed)
	require.Contains(t, []string{"easy", "hard"}, tag)
	require.Equal(t, "a9999", answer)

	// The optional fields, absent from most lines, load as columns.
	var traced, onWorker0, reused int
	var span string
	err = db.QueryRow(`SELECT count(trace_id), count(*) FILTER (worker = 'worker-0:4242'), count(reused_from),
			any_value(span_id) FILTER (sample_id = 's300')
		FROM read_json_auto(?, sample_size = -1)`, log).Scan(&traced, &onWorker0, &reused, &span)
	require.NoError(t, err)
	require.Equal(t, (n+2)/3, traced)
	require.Equal(t, (n+5)/6, onWorker0)
	require.Equal(t, (n+4)/5, reused)
	require.Equal(t, fmt.Sprintf("%016x", 300), span)

	err = db.QueryRow(`SELECT count(*), max(seed)::VARCHAR FROM read_json_auto(?)`, log).Scan(&count, &maxSeed)
	require.Error(t, err, "read_json_auto's defaults now read a late seed above int64: the docs can drop sample_size = -1")
}

// TestParquetInDuckDB: the Parquet sink's columns reach DuckDB with their
// logical types, and the queries in the sink's docs run.
func TestParquetInDuckDB(t *testing.T) {
	t.Parallel()
	const n = 3000
	dir := filepath.Join(t.TempDir(), "results")
	w, err := parquetsink.New(dir, &parquetsink.Options{FileRows: 1000})
	require.NoError(t, err)
	recs := records(n)
	recs[7].Input, recs[7].Tags, recs[7].Scores = nil, nil, nil
	for _, r := range recs {
		require.NoError(t, w.Write(context.Background(), r))
	}
	require.NoError(t, w.Close(context.Background()))
	glob := filepath.Join(dir, "*.parquet")
	db := open(t)

	rows, err := db.Query(`SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))`, glob)
	require.NoError(t, err)
	types := map[string]string{}
	for rows.Next() {
		var name, typ string
		require.NoError(t, rows.Scan(&name, &typ))
		types[name] = typ
	}
	require.NoError(t, rows.Err())
	for col, want := range map[string]string{
		"input": "JSON", "output": "JSON",
		"tags": "MAP(VARCHAR, VARCHAR)", "scores": "MAP(VARCHAR, DOUBLE)",
		"started_at": "TIMESTAMP WITH TIME ZONE", "seed": "UBIGINT",
		"sample_id": "VARCHAR", "epoch": "BIGINT", "score": "DOUBLE",
		"parent_run_id": "VARCHAR", "reused_from": "VARCHAR", "worker": "VARCHAR",
		"trace_id": "VARCHAR", "span_id": "VARCHAR",
		"error_source": "VARCHAR", "judge_stages": "VARCHAR", "model": "VARCHAR", "judge_model": "VARCHAR",
		"judge_input_tokens": "BIGINT", "judge_output_tokens": "BIGINT", "judge_cost_usd": "DOUBLE",
		"simulator_input_tokens": "BIGINT", "simulator_output_tokens": "BIGINT", "simulator_cost_usd": "DOUBLE",
		"simulator_model": "VARCHAR", "variant": "VARCHAR", "resources": "VARCHAR",
		"calls_replayed": "BIGINT", "replay_diverged_at": "BIGINT",
	} {
		require.Equal(t, want, types[col], col)
	}

	var count, hard, nullInput int
	var maxSeed, answer string
	var first time.Time
	err = db.QueryRow(`SELECT count(*), count(*) FILTER (tags['difficulty'] = 'hard'), count(*) FILTER (input IS NULL),
			max(seed)::VARCHAR, max(output->>'answer'), min(started_at)
		FROM read_parquet(?)`, glob).Scan(&count, &hard, &nullInput, &maxSeed, &answer, &first)
	require.NoError(t, err)
	require.Equal(t, n, count)
	require.Equal(t, n/2-1, hard) // recs[7] has no tags
	require.Equal(t, 1, nullInput)
	require.Equal(t, strconv.FormatUint(math.MaxUint64, 10), maxSeed)
	require.Equal(t, "a999", answer)
	require.True(t, first.Equal(recs[0].StartedAt), "%v", first)

	// The optional strings are empty, not null, where a record has none.
	var traced, onWorker0, reused int
	var span string
	err = db.QueryRow(`SELECT count(*) FILTER (trace_id <> ''), count(*) FILTER (worker = 'worker-0:4242'),
			count(*) FILTER (reused_from = 'run-0' AND parent_run_id = 'run-0'), any_value(span_id) FILTER (sample_id = 's300')
		FROM read_parquet(?)`, glob).Scan(&traced, &onWorker0, &reused, &span)
	require.NoError(t, err)
	require.Equal(t, n/3, traced)
	require.Equal(t, n/6, onWorker0)
	require.Equal(t, n/5, reused)
	require.Equal(t, fmt.Sprintf("%016x", 300), span)
}
