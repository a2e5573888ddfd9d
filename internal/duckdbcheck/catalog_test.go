package duckdbcheck

import (
	"math"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/history/catalog"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// catalogRun writes a finished run of 20 samples (half tagged hard),
// passing easyPass easy ones and hardPass hard ones, each episode costing
// one cent, started at start.
func catalogRun(t *testing.T, dir, name, eval string, start time.Time, easyPass, hardPass int) {
	t.Helper()
	path := filepath.Join(dir, name+".jsonl")
	w, err := jsonl.Create(path, nil)
	require.NoError(t, err)
	for i := range 20 {
		d, k := "easy", i
		if i >= 10 {
			d, k = "hard", i-10
		}
		pass := (d == "easy" && k < easyPass) || (d == "hard" && k < hardPass)
		r := sink.Record{Schema: sink.SchemaVersion, RunID: name, Eval: eval, SampleID: "s" + strconv.Itoa(i),
			Status: sink.Fail, Tags: map[string]string{"difficulty": d}, StartedAt: start, DurationMS: 1000,
			InputTokens: 90, OutputTokens: 10, CostUSD: 0.01}
		if pass {
			r.Status, r.Score = sink.Pass, 1
		}
		require.NoError(t, w.Write(t.Context(), r))
	}
	require.NoError(t, w.Close(t.Context()))
	require.NoError(t, manifest.Write(path, &manifest.Manifest{Schema: manifest.Schema, RunID: name, Eval: eval,
		CreatedAt: start, Epochs: 1, Seed: "1", Dataset: manifest.DatasetIdentity{Samples: 20, Hash: "sum:1"}}))
}

// TestCatalogInDuckDB answers docs/history.md's three questions over the
// history catalog with DuckDB: the weekly pass-rate trend, what a month
// cost, and the tag values that changed most between an eval's last two
// runs.
func TestCatalogInDuckDB(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	feb := time.Date(2026, 2, 23, 9, 0, 0, 0, time.UTC) // a Monday
	catalogRun(t, dir, "c1", "capitals", feb, 10, 6)
	catalogRun(t, dir, "c2", "capitals", feb.Add(7*24*time.Hour), 10, 8)
	catalogRun(t, dir, "c3", "capitals", feb.Add(8*24*time.Hour), 9, 3)
	catalogRun(t, dir, "m1", "math", feb.Add(9*24*time.Hour), 5, 5)
	_, err := catalog.Update(dir)
	require.NoError(t, err)
	runs := filepath.Join(dir, catalog.Dir, catalog.RunsFile)
	tags := filepath.Join(dir, catalog.Dir, catalog.TagsFile)
	db := open(t)

	// 1. Is the agent getting better? The pass rate by eval and week.
	rows, err := db.Query(`SELECT eval, date_trunc('week', started_at) AS week, avg(pass_rate) AS pass_rate, count(*) AS runs
		FROM read_parquet(?) GROUP BY ALL ORDER BY eval, week`, runs)
	require.NoError(t, err)
	type trend struct {
		Eval, Week string
		Rate       float64
		Runs       int
	}
	var got []trend
	for rows.Next() {
		var tr trend
		var week time.Time
		require.NoError(t, rows.Scan(&tr.Eval, &week, &tr.Rate, &tr.Runs))
		tr.Week, tr.Rate = week.UTC().Format("2006-01-02"), math.Round(tr.Rate*1000)/1000
		got = append(got, tr)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []trend{{"capitals", "2026-02-23", 0.8, 1}, {"capitals", "2026-03-02", 0.75, 2}, {"math", "2026-03-02", 0.5, 1}}, got)

	// 2. What did March cost, by eval?
	var eval string
	var cost float64
	var tokens int64
	err = db.QueryRow(`SELECT eval, sum(cost_usd) AS cost, sum(input_tokens + output_tokens) AS tokens
		FROM read_parquet(?) WHERE started_at >= '2026-03-01' AND started_at < '2026-04-01'
		GROUP BY eval ORDER BY cost DESC LIMIT 1`, runs).Scan(&eval, &cost, &tokens)
	require.NoError(t, err)
	require.Equal(t, "capitals", eval)
	require.InDelta(t, 0.40, cost, 1e-9)
	require.Equal(t, int64(4000), tokens)

	// 3. Which tag values changed most between each eval's last two runs?
	var tag, value string
	var change float64
	err = db.QueryRow(`SELECT eval, tag, value, pass_rate - lag(pass_rate) OVER w AS change
		FROM read_parquet(?)
		WINDOW w AS (PARTITION BY eval, tag, value ORDER BY started_at)
		QUALIFY row_number() OVER (PARTITION BY eval, tag, value ORDER BY started_at DESC) = 1 AND change IS NOT NULL
		ORDER BY change LIMIT 1`, tags).Scan(&eval, &tag, &value, &change)
	require.NoError(t, err)
	require.Equal(t, []any{"capitals", "difficulty", "hard"}, []any{eval, tag, value})
	require.InDelta(t, -0.5, change, 1e-12)
}
