package parquetsink_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	pqfile "github.com/apache/arrow-go/v18/parquet/file"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	pqgo "github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/parquetsink"
)

// independentRow is the shape of a record row as an independent reader,
// parquet-go, sees it: plain Go values for the typed columns.
type independentRow struct {
	Schema            int64              `parquet:"schema"`
	RunID             string             `parquet:"run_id"`
	Eval              string             `parquet:"eval"`
	SampleID          string             `parquet:"sample_id"`
	Epoch             int64              `parquet:"epoch"`
	Attempt           int64              `parquet:"attempt"`
	Status            string             `parquet:"status"`
	Score             float64            `parquet:"score"`
	Scores            map[string]float64 `parquet:"scores"`
	Weight            float64            `parquet:"weight"`
	Reason            string             `parquet:"reason"`
	Error             string             `parquet:"error"`
	ErrorKind         string             `parquet:"error_kind"`
	Input             *string            `parquet:"input,optional"`
	Output            *string            `parquet:"output,optional"`
	Tags              map[string]string  `parquet:"tags"`
	StartedAt         int64              `parquet:"started_at"` // microseconds since the epoch, UTC
	DurationMS        float64            `parquet:"duration_ms"`
	InputTokens       int64              `parquet:"input_tokens"`
	OutputTokens      int64              `parquet:"output_tokens"`
	CostUSD           float64            `parquet:"cost_usd"`
	Seed              uint64             `parquet:"seed"`
	Transcript        string             `parquet:"trace"`
	ParentRunID       string             `parquet:"parent_run_id"`
	ReusedFrom        string             `parquet:"reused_from"`
	Worker            string             `parquet:"worker"`
	TraceID           string             `parquet:"trace_id"`
	SpanID            string             `parquet:"span_id"`
	ErrorSource       string             `parquet:"error_source"`
	JudgeStages       string             `parquet:"judge_stages"`
	JudgeInputTokens  int64              `parquet:"judge_input_tokens"`
	JudgeOutputTokens int64              `parquet:"judge_output_tokens"`
	JudgeCostUSD      float64            `parquet:"judge_cost_usd"`
	Model             string             `parquet:"model"`
	JudgeModel        string             `parquet:"judge_model"`
	Variant           string             `parquet:"variant"`
	Resources         string             `parquet:"resources"`
	CallsReplayed     int64              `parquet:"calls_replayed"`
	ReplayDivergedAt  int64              `parquet:"replay_diverged_at"`
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
	recs[9].ReusedFrom = "run-earlier"
	recs[10].Worker = "worker-2:31337"
	recs[11].TraceID, recs[11].SpanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	recs[13].ErrorSource, recs[13].Model, recs[13].JudgeModel = "judge/cascade.expensive/rubric", "gpt-4o", "gpt-4o-mini"
	recs[13].JudgeInputTokens, recs[13].JudgeOutputTokens, recs[13].JudgeCostUSD = 120, 30, 0.00125
	recs[13].JudgeStages = "judge/cascade.cheap=1/0,judge/cascade.expensive/rubric=1/1"
	recs[14].Variant, recs[14].Resources, recs[14].CallsReplayed, recs[14].ReplayDivergedAt = "claude/react", "cpus=2 memory=1GiB", 12, 13
	recs[12].ParentRunID, recs[12].ReusedFrom, recs[12].Worker, recs[12].TraceID, recs[12].SpanID = "p é", "r 😀", "w\u2028", "t", "s"
	for i := 1000; i < 2500; i += 3 { // across row groups and files
		recs[i].Worker = "worker-" + strconv.Itoa(i%4) + ":1"
		recs[i].TraceID = fmt.Sprintf("%032x", i)
		recs[i].SpanID = fmt.Sprintf("%016x", i)
	}

	dir := t.TempDir()
	w, err := parquetsink.New(dir, &parquetsink.Options{RowGroupRows: 1000, FileRows: 2000})
	require.NoError(t, err)
	ctx := context.Background()
	for _, r := range recs {
		require.NoError(t, w.Write(ctx, r))
	}
	require.NoError(t, w.Close(ctx))

	files, err := parquetsink.Files(dir)
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

		v, ok := pf.Lookup(parquetsink.MetadataKey)
		require.True(t, ok, "metadata %s", parquetsink.MetadataKey)
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
			{"parent_run_id", "STRING"},
			{"reused_from", "STRING"},
			{"worker", "STRING"},
			{"trace_id", "STRING"},
			{"span_id", "STRING"},
			{"error_source", "STRING"},
			{"judge_stages", "STRING"},
			{"model", "STRING"},
			{"judge_model", "STRING"},
			{"variant", "STRING"},
			{"resources", "STRING"},
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
		CostUSD: r.CostUSD, Seed: r.Seed, Transcript: r.Transcript, ParentRunID: r.ParentRunID,
		ReusedFrom: r.ReusedFrom, Worker: r.Worker, TraceID: r.TraceID, SpanID: r.SpanID,
		ErrorSource: r.ErrorSource, JudgeStages: r.JudgeStages, JudgeInputTokens: r.JudgeInputTokens, JudgeOutputTokens: r.JudgeOutputTokens,
		JudgeCostUSD: r.JudgeCostUSD, Model: r.Model, JudgeModel: r.JudgeModel,
		Variant: r.Variant, Resources: r.Resources, CallsReplayed: int64(r.CallsReplayed), ReplayDivergedAt: int64(r.ReplayDivergedAt),
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

// v1Row is a record row as files written before reused_from, worker,
// trace_id and span_id existed hold it.
type v1Row struct {
	Schema       int64              `parquet:"schema"`
	RunID        string             `parquet:"run_id"`
	Eval         string             `parquet:"eval"`
	SampleID     string             `parquet:"sample_id"`
	Epoch        int64              `parquet:"epoch"`
	Attempt      int64              `parquet:"attempt"`
	Status       string             `parquet:"status"`
	Score        float64            `parquet:"score"`
	Scores       map[string]float64 `parquet:"scores,optional"`
	Weight       float64            `parquet:"weight"`
	Reason       string             `parquet:"reason"`
	Error        string             `parquet:"error"`
	ErrorKind    string             `parquet:"error_kind"`
	Input        *string            `parquet:"input,optional"`
	Output       *string            `parquet:"output,optional"`
	Tags         map[string]string  `parquet:"tags,optional"`
	StartedAt    int64              `parquet:"started_at"`
	DurationMS   float64            `parquet:"duration_ms"`
	InputTokens  int64              `parquet:"input_tokens"`
	OutputTokens int64              `parquet:"output_tokens"`
	CostUSD      float64            `parquet:"cost_usd"`
	Seed         uint64             `parquet:"seed"`
	Transcript   string             `parquet:"trace"`
	ParentRunID  string             `parquet:"parent_run_id"`
}

// TestReadsFilesWithoutNewerColumns: a directory holding a file written
// before the reused_from, worker, trace_id and span_id columns (here by
// parquet-go) reads back with those fields empty, and a run resumed into
// it writes its new files beside it, every field of both read back.
func TestReadsFilesWithoutNewerColumns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := benchRecords(10)
	for i := range old {
		old[i].StartedAt = old[i].StartedAt.Truncate(time.Microsecond)
	}
	old[4].ParentRunID = "run-parent"
	f, err := os.Create(filepath.Join(dir, "part-00000.parquet"))
	require.NoError(t, err)
	pw := pqgo.NewGenericWriter[v1Row](f, pqgo.KeyValueMetadata(parquetsink.MetadataKey, "1"))
	for _, r := range old {
		row := expectedRow(r)
		_, err := pw.Write([]v1Row{{
			Schema: row.Schema, RunID: row.RunID, Eval: row.Eval, SampleID: row.SampleID, Epoch: row.Epoch,
			Attempt: row.Attempt, Status: row.Status, Score: row.Score, Scores: row.Scores, Weight: row.Weight,
			Reason: row.Reason, Error: row.Error, ErrorKind: row.ErrorKind, Input: row.Input, Output: row.Output,
			Tags: row.Tags, StartedAt: row.StartedAt, DurationMS: row.DurationMS, InputTokens: row.InputTokens,
			OutputTokens: row.OutputTokens, CostUSD: row.CostUSD, Seed: row.Seed, Transcript: row.Transcript, ParentRunID: row.ParentRunID,
		}})
		require.NoError(t, err)
	}
	require.NoError(t, pw.Close())
	require.NoError(t, f.Close())
	pf, err := pqfile.OpenParquetFile(f.Name(), false)
	require.NoError(t, err)
	require.Equal(t, -1, pf.MetaData().Schema.ColumnIndexByName("worker"), "the old file lacks the new columns")
	require.NoError(t, pf.Close())

	recent := benchRecords(3)
	for i := range recent {
		recent[i].SampleID = "resumed-" + strconv.Itoa(i)
		recent[i].StartedAt = recent[i].StartedAt.Truncate(time.Microsecond)
		recent[i].ReusedFrom, recent[i].Worker = "run-earlier", "worker-1:99"
		recent[i].TraceID, recent[i].SpanID = fmt.Sprintf("%032x", i+1), fmt.Sprintf("%016x", i+1)
	}
	w, err := parquetsink.New(dir, nil)
	require.NoError(t, err)
	for _, r := range recent {
		require.NoError(t, w.Write(t.Context(), r))
	}
	require.NoError(t, w.Close(t.Context()))

	got := readAll(t, dir)
	want := append(old, recent...)
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
}
