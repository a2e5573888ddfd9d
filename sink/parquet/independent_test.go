package parquet_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	pqgo "github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/parquet"
)

// independentRow is the shape of a record row as an independent reader,
// parquet-go, sees it: plain Go values for the typed columns.
type independentRow struct {
	Schema       int64              `parquet:"schema"`
	RunID        string             `parquet:"run_id"`
	Eval         string             `parquet:"eval"`
	SampleID     string             `parquet:"sample_id"`
	Epoch        int64              `parquet:"epoch"`
	Attempt      int64              `parquet:"attempt"`
	Status       string             `parquet:"status"`
	Score        float64            `parquet:"score"`
	Scores       map[string]float64 `parquet:"scores"`
	Weight       float64            `parquet:"weight"`
	Reason       string             `parquet:"reason"`
	Error        string             `parquet:"error"`
	ErrorKind    string             `parquet:"error_kind"`
	Input        *string            `parquet:"input,optional"`
	Output       *string            `parquet:"output,optional"`
	Tags         map[string]string  `parquet:"tags"`
	StartedAt    int64              `parquet:"started_at"` // microseconds since the epoch, UTC
	DurationMS   float64            `parquet:"duration_ms"`
	InputTokens  int64              `parquet:"input_tokens"`
	OutputTokens int64              `parquet:"output_tokens"`
	CostUSD      float64            `parquet:"cost_usd"`
	Seed         uint64             `parquet:"seed"`
	Trace        string             `parquet:"trace"`
	ParentRunID  string             `parquet:"parent_run_id"`
}

// TestIndependentReader reads the files the Writer produced with
// parquet-go, a Parquet implementation that shares no code with arrow-go,
// and checks the row counts, the file metadata, the column types and every
// value against the records written, and against the same records as the
// JSONL log carries them (AppendJSON, then json.Unmarshal).
func TestIndependentReader(t *testing.T) {
	t.Parallel()
	recs := benchRecords(2500)
	recs[3].Input = json.RawMessage(`{"q":"日本語 😀","n":[1,2,3]}`)
	recs[4].Scores = map[string]float64{"a": 0.25, "b": 1, "c": 0}
	recs[5].Tags = nil
	recs[6].StartedAt = time.Date(2025, 6, 1, 1, 2, 3, 456789999, time.FixedZone("X", 3600))
	recs[7].Seed = math.MaxUint64
	recs[8].ParentRunID = "run-parent"

	dir := t.TempDir()
	w, err := parquet.New(dir, &parquet.Options{RowGroupRows: 1000, FileRows: 2000})
	require.NoError(t, err)
	ctx := context.Background()
	for _, r := range recs {
		require.NoError(t, w.Write(ctx, r))
	}
	require.NoError(t, w.Close(ctx))

	files, err := parquet.Files(dir)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "part-00000.parquet"), filepath.Join(dir, "part-00001.parquet")}, files)
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	require.Empty(t, tmps)

	var rows []independentRow
	wantGroups := [][]int64{{1000, 1000}, {500}}
	for i, name := range files {
		f, err := os.Open(name)
		require.NoError(t, err)
		defer f.Close()
		st, err := f.Stat()
		require.NoError(t, err)
		pf, err := pqgo.OpenFile(f, st.Size())
		require.NoError(t, err)

		v, ok := pf.Lookup(parquet.MetadataKey)
		require.True(t, ok, "metadata %s", parquet.MetadataKey)
		require.Equal(t, "1", v)

		var groups []int64
		for _, rg := range pf.RowGroups() {
			groups = append(groups, rg.NumRows())
		}
		require.Equal(t, wantGroups[i], groups, "row groups of %s", name)

		for _, col := range []struct{ name, logical string }{
			{"started_at", "TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)"},
			{"scores", "MAP"},
			{"tags", "MAP"},
			{"input", "JSON"},
			{"output", "JSON"},
			{"run_id", "STRING"},
			{"seed", "INT(64,false)"},
		} {
			field, ok := pf.Schema().Lookup(col.name)
			if col.logical == "MAP" {
				f := pf.Schema().Fields()
				var found bool
				for _, x := range f {
					if x.Name() == col.name {
						found = true
						require.Equal(t, col.logical, x.Type().LogicalType().String(), col.name)
					}
				}
				require.True(t, found, col.name)
				continue
			}
			require.True(t, ok, col.name)
			require.Equal(t, col.logical, field.Node.Type().LogicalType().String(), col.name)
		}

		r := pqgo.NewGenericReader[independentRow](f)
		for {
			// A fresh buffer each time: parquet-go decodes into the maps it
			// finds in buf, and rows keeps them.
			buf := make([]independentRow, 300)
			n, err := r.Read(buf)
			rows = append(rows, buf[:n]...)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
		}
		require.NoError(t, r.Close())
	}
	require.Len(t, rows, len(recs))

	for i, rec := range recs {
		// What the log carries for the same record.
		var logged sink.Record
		require.NoError(t, json.Unmarshal(rec.AppendJSON(nil), &logged))
		for _, want := range []sink.Record{rec, logged} {
			// parquet-go reads a null map as an empty one.
			if diff := cmp.Diff(expectedRow(want), rows[i], cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("row %d (-want +got):\n%s", i, diff)
			}
		}
	}
}

// expectedRow is the row the Writer stores for r.
func expectedRow(r sink.Record) independentRow {
	row := independentRow{
		Schema: int64(r.Schema), RunID: r.RunID, Eval: r.Eval, SampleID: r.SampleID,
		Epoch: int64(r.Epoch), Attempt: int64(r.Attempt), Status: string(r.Status),
		Score: r.Score, Scores: r.Scores, Weight: r.Weight, Reason: r.Reason, Error: r.Error,
		ErrorKind: string(r.ErrorKind), Tags: r.Tags, StartedAt: r.StartedAt.UnixMicro(),
		DurationMS: r.DurationMS, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		CostUSD: r.CostUSD, Seed: r.Seed, Trace: r.Trace, ParentRunID: r.ParentRunID,
	}
	if len(r.Input) > 0 {
		s := string(r.Input)
		row.Input = &s
	}
	if len(r.Output) > 0 {
		s := string(r.Output)
		row.Output = &s
	}
	if len(row.Scores) == 0 {
		row.Scores = nil
	}
	if len(row.Tags) == 0 {
		row.Tags = nil
	}
	return row
}
