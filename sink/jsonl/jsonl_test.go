package jsonl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

func rec(i int, status sink.Status) sink.Record {
	return sink.Record{Schema: sink.SchemaVersion, RunID: "run-1", Eval: "e", SampleID: fmt.Sprintf("s%d", i),
		Epoch: i % 3, Status: status, Score: 1, Tags: map[string]string{"k": "v"},
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), DurationMS: 1.5, Output: []byte(`"out"`)}
}

func write(t *testing.T, path string, recs ...sink.Record) {
	t.Helper()
	w, err := jsonl.Create(path, nil)
	require.NoError(t, err)
	for _, r := range recs {
		require.NoError(t, w.Write(context.Background(), r))
	}
	require.NoError(t, w.Close(context.Background()))
}

func readAll(t *testing.T, path string) ([]sink.Record, error) {
	t.Helper()
	var out []sink.Record
	for r, err := range jsonl.Records(path) {
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	want := []sink.Record{rec(0, sink.Pass), rec(1, sink.Fail), rec(2, sink.Error)}
	write(t, path, want...)
	got, err := readAll(t, path)
	require.NoError(t, err)
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("records (-want +got):\n%s", d)
	}
}

func TestTornTailIsReportedAfterCommittedRecords(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	write(t, path, rec(0, sink.Pass), rec(1, sink.Pass))
	full, err := os.ReadFile(path)
	require.NoError(t, err)
	// A crash in the middle of writing a third line.
	r2 := rec(2, sink.Pass)
	third := r2.AppendJSON(nil)
	require.NoError(t, os.WriteFile(path, append(full, third[:len(third)/2]...), 0o644))

	got, err := readAll(t, path)
	require.Len(t, got, 2, "the committed records come first")
	var torn *jsonl.TornTailError
	require.ErrorAs(t, err, &torn)
	require.Equal(t, 3, torn.Line)
	require.Equal(t, int64(len(full)), torn.Offset)

	// Open cuts it and says so; appending then gives a clean log.
	w, recov, err := jsonl.Open(path, nil)
	require.NoError(t, err)
	require.NotNil(t, recov.Torn)
	require.Equal(t, int64(len(third)/2), recov.Torn.Bytes)
	require.Equal(t, 2, recov.Records)
	require.NoError(t, w.Write(context.Background(), rec(2, sink.Pass)))
	require.NoError(t, w.Close(context.Background()))
	got, err = readAll(t, path)
	require.NoError(t, err)
	require.Len(t, got, 3)
}

func TestCompleteButUnparseableLastLineIsTorn(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	write(t, path, rec(0, sink.Pass))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	f.WriteString(`{"schema":1,"run_id":"run-1","eval":"e","sample_id":"s9","epoch":0,"attempt":0,"status":"pass","score":1,"tags":{"k":` + "\n")
	f.Close()
	_, recov, err := jsonl.Open(path, nil)
	require.NoError(t, err)
	require.NotNil(t, recov.Torn)
	require.Equal(t, 1, recov.Records)
}

func TestCorruptLineInTheMiddleIsAnError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	r0, r1 := rec(0, sink.Pass), rec(1, sink.Pass)
	a, b := r0.AppendJSON(nil), r1.AppendJSON(nil)
	require.NoError(t, os.WriteFile(path, []byte(string(a)+"\n{not json}\n"+string(b)+"\n"), 0o644))
	before, _ := os.ReadFile(path)

	_, err := readAll(t, path)
	var corrupt *jsonl.CorruptError
	require.ErrorAs(t, err, &corrupt)
	require.Equal(t, 2, corrupt.Line)

	_, _, err = jsonl.Open(path, &jsonl.OpenOptions{DropErrors: true})
	require.ErrorAs(t, err, &corrupt, "nothing behind a corrupt line may be dropped")
	after, _ := os.ReadFile(path)
	require.Equal(t, before, after, "a corrupt log is left untouched")
}

func TestOpenDropsErrorRecordsAndIndexesTheRest(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	write(t, path, rec(0, sink.Pass), rec(1, sink.Error), rec(2, sink.Fail), rec(3, sink.Unscored), rec(4, sink.Error))
	w, recov, err := jsonl.Open(path, &jsonl.OpenOptions{DropErrors: true})
	require.NoError(t, err)
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, "run-1", recov.RunID)
	require.Equal(t, 3, recov.Records)
	require.Equal(t, 2, recov.Dropped)
	want := map[sink.Key]struct{}{{SampleID: "s0", Epoch: 0}: {}, {SampleID: "s2", Epoch: 2}: {}, {SampleID: "s3", Epoch: 0}: {}}
	require.Equal(t, want, recov.Done)
	got, err := readAll(t, path)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for _, r := range got {
		require.NotEqual(t, sink.Error, r.Status)
	}
}

func TestOpenRefusesAMixOfRuns(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	other := rec(1, sink.Pass)
	other.RunID = "run-2"
	write(t, path, rec(0, sink.Pass), other)
	_, _, err := jsonl.Open(path, nil)
	require.ErrorContains(t, err, "one log holds one run")
}

func TestSchemaVersionIsChecked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	r := rec(0, sink.Pass)
	r.Schema = 2
	write(t, path, r)
	_, err := readAll(t, path)
	var se *jsonl.SchemaError
	require.ErrorAs(t, err, &se)
	_, _, err = jsonl.Open(path, nil)
	require.ErrorAs(t, err, &se)
}

func TestEscapedKeysTakeTheSlowPath(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	r := rec(0, sink.Pass)
	r.SampleID = `quote"and\backslash`
	write(t, path, r)
	_, recov, err := jsonl.Open(path, nil)
	require.NoError(t, err)
	require.Contains(t, recov.Done, sink.Key{SampleID: r.SampleID, Epoch: 0})
}

func TestWriteAfterCloseFails(t *testing.T) {
	t.Parallel()
	w, err := jsonl.Create(filepath.Join(t.TempDir(), "log.jsonl"), nil)
	require.NoError(t, err)
	require.NoError(t, w.Close(context.Background()))
	require.NoError(t, w.Close(context.Background()), "closing twice is a no-op")
	require.True(t, errors.Is(w.Write(context.Background(), rec(0, sink.Pass)), sink.ErrClosed))
}

func TestLinesAreWrittenWholeAndOffsetsResolve(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "traces.jsonl")
	w, err := jsonl.Create(path, &jsonl.Options{BufferSize: 64})
	require.NoError(t, err)
	var offs []int64
	for i := range 50 {
		off, err := w.WriteLine([]byte(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", i*7))))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	require.NoError(t, w.Close(context.Background()))
	for i, off := range offs {
		line, err := jsonl.ReadLineAt(path, off)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(line), fmt.Sprintf(`{"i":%d,`, i)), string(line))
	}
}

// distributed is rec as a worker of a distributed, traced run writes it;
// reused adds the run whose result it reuses.
func distributed(i int, status sink.Status, reused bool) sink.Record {
	r := rec(i, status)
	r.Worker = fmt.Sprintf("worker-%d.cluster.local:%d", i%2, 4000+i)
	r.TraceID = fmt.Sprintf("%032x", 0xabc0+i)
	r.SpanID = fmt.Sprintf("%016x", 0xdef0+i)
	if reused {
		r.ReusedFrom, r.ParentRunID = "run-0", "run-0"
	}
	return r
}

// TestDistributedFieldsResume: records carrying reused_from, worker,
// trace_id and span_id read back equal, resume counts and indexes them
// (dropping an error record among them), a torn tail cut inside them is
// cut and reported, and the records appended after all that read back
// with the rest.
func TestDistributedFieldsResume(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	first := []sink.Record{
		distributed(0, sink.Pass, true),
		distributed(1, sink.Error, false),
		distributed(2, sink.Fail, false),
		rec(3, sink.Pass), // a record of the same run without them
		distributed(4, sink.Unscored, true),
	}
	first[2].TraceID, first[4].Worker = "", "" // each may be absent alone
	write(t, path, first...)
	got, err := readAll(t, path)
	require.NoError(t, err)
	if d := cmp.Diff(first, got); d != "" {
		t.Fatalf("records (-want +got):\n%s", d)
	}

	// A crash in the middle of the next line, inside its trace_id.
	next := distributed(5, sink.Pass, false)
	torn := next.AppendJSON(nil)
	cut := strings.Index(string(torn), `"trace_id":"`) + len(`"trace_id":"`) + 7
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(torn[:cut])
	require.NoError(t, err)
	require.NoError(t, f.Close())

	w, recov, err := jsonl.Open(path, &jsonl.OpenOptions{DropErrors: true})
	require.NoError(t, err)
	require.NotNil(t, recov.Torn, "the line cut inside trace_id is a torn tail")
	require.Equal(t, int64(cut), recov.Torn.Bytes)
	require.Equal(t, 4, recov.Records)
	require.Equal(t, 1, recov.Dropped)
	require.Equal(t, "run-1", recov.RunID)
	wantDone := map[sink.Key]struct{}{}
	for _, r := range first {
		if r.Status != sink.Error {
			wantDone[r.Key()] = struct{}{}
		}
	}
	require.Equal(t, wantDone, recov.Done)

	// The resumed run retries the error and runs the torn episode again.
	more := []sink.Record{distributed(1, sink.Pass, false), distributed(5, sink.Pass, false)}
	for _, r := range more {
		require.NoError(t, w.Write(context.Background(), r))
	}
	require.NoError(t, w.Close(context.Background()))
	got, err = readAll(t, path)
	require.NoError(t, err)
	want := append([]sink.Record{first[0], first[2], first[3], first[4]}, more...)
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("records after resume (-want +got):\n%s", d)
	}
}
