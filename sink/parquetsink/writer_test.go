package parquetsink_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/parquetsink"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestRolling checks the file set while writing: finished files under their
// final names, the open one only as .tmp, so that a crash at any point
// leaves whole files plus at most one .tmp, which readers skip.
func TestRolling(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := parquetsink.New(dir, &parquetsink.Options{RowGroupRows: 4, FileRows: 10})
	require.NoError(t, err)
	ctx := context.Background()
	recs := benchRecords(25)
	for i, r := range recs[:15] {
		require.NoError(t, w.Write(ctx, r), i)
	}
	// 15 written: file 0 finished, file 1 open with one row group flushed.
	require.Equal(t, []string{"part-00000.parquet", "part-00001.parquet.tmp"}, names(t, dir))
	// A crash now: readers see exactly the finished file.
	got := readAll(t, dir)
	require.Len(t, got, 10)

	for _, r := range recs[15:] {
		require.NoError(t, w.Write(ctx, r))
	}
	require.NoError(t, w.Close(ctx))
	require.Equal(t, []string{"part-00000.parquet", "part-00001.parquet", "part-00002.parquet"}, names(t, dir))
	got = readAll(t, dir)
	require.Len(t, got, 25)
	for i := range got {
		require.Equal(t, recs[i].SampleID, got[i].SampleID)
	}

	// Each file reads on its own too.
	n := 0
	for _, err := range parquetsink.Records(filepath.Join(dir, "part-00002.parquet")) {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 5, n)
}

// TestExactMultipleOfFileRows: a run that ends on a file boundary leaves
// no trailing empty file.
func TestExactMultipleOfFileRows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := parquetsink.New(dir, &parquetsink.Options{FileRows: 5})
	require.NoError(t, err)
	for _, r := range benchRecords(10) {
		require.NoError(t, w.Write(t.Context(), r))
	}
	require.NoError(t, w.Close(t.Context()))
	require.Equal(t, []string{"part-00000.parquet", "part-00001.parquet"}, names(t, dir))
}

func TestEmptyRunLeavesOneFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := parquetsink.New(dir, nil)
	require.NoError(t, err)
	require.NoError(t, w.Close(t.Context()))
	require.Equal(t, []string{"part-00000.parquet"}, names(t, dir))
	rdr, err := file.OpenParquetFile(filepath.Join(dir, "part-00000.parquet"), false)
	require.NoError(t, err)
	defer rdr.Close()
	require.Equal(t, int64(0), rdr.NumRows())
	require.Equal(t, 43, rdr.MetaData().Schema.NumColumns()-2) // scores and tags hold 2 leaves each
}

// TestNewResumesOwnDir: a run resumed into its own Parquet directory
// writes new part files after the ones there (a .tmp left by a crash
// included, which stays untouched), and the directory reads back as all
// the records of both runs. It failed before: New refused the directory.
func TestNewResumesOwnDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	recs := benchRecords(30)
	w, err := parquetsink.New(dir, &parquetsink.Options{RowGroupRows: 4, FileRows: 10})
	require.NoError(t, err)
	for _, r := range recs[:25] {
		require.NoError(t, w.Write(t.Context(), r))
	}
	// A crash: two files finished, the third open as .tmp.
	require.Equal(t, []string{"part-00000.parquet", "part-00001.parquet", "part-00002.parquet.tmp"}, names(t, dir))

	w2, err := parquetsink.New(dir, &parquetsink.Options{FileRows: 10})
	require.NoError(t, err)
	for _, r := range recs[20:] {
		require.NoError(t, w2.Write(t.Context(), r))
	}
	require.NoError(t, w2.Close(t.Context()))
	require.Equal(t, []string{"part-00000.parquet", "part-00001.parquet", "part-00002.parquet.tmp", "part-00003.parquet"}, names(t, dir))
	got := readAll(t, dir)
	require.Len(t, got, 30)
	for i, r := range got {
		require.Equal(t, recs[i].SampleID, r.SampleID, i)
	}

	// Resuming with nothing to write adds no empty file.
	w3, err := parquetsink.New(dir, nil)
	require.NoError(t, err)
	require.NoError(t, w3.Close(t.Context()))
	require.Len(t, names(t, dir), 4)
}

// TestNewRefusesForeignParts: part files that are not proctor record
// files are someone else's; New refuses the directory and leaves them.
func TestNewRefusesForeignParts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := filepath.Join(dir, "part-00000.parquet")
	require.NoError(t, os.WriteFile(name, []byte("not ours"), 0o644))
	_, err := parquetsink.New(dir, nil)
	require.ErrorContains(t, err, "not this sink's")
	require.ErrorContains(t, err, dir)
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	require.Equal(t, "not ours", string(b))
	require.Equal(t, []string{"part-00000.parquet"}, names(t, dir))

	// Other files are fine; a missing dir is created.
	dir = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.jsonl"), nil, 0o644))
	w, err := parquetsink.New(filepath.Join(dir, "a", "b"), nil)
	require.NoError(t, err)
	require.NoError(t, w.Close(t.Context()))
}

func TestWriteAfterClose(t *testing.T) {
	t.Parallel()
	w, err := parquetsink.New(t.TempDir(), nil)
	require.NoError(t, err)
	require.NoError(t, w.Close(t.Context()))
	err = w.Write(t.Context(), sink.Record{})
	require.ErrorIs(t, err, sink.ErrClosed)
	require.True(t, strings.HasPrefix(err.Error(), "parquet: "), err.Error())
}

// TestRowGroupBytes: large outputs end a row group before its row limit,
// so buffered memory stays bounded by Options.RowGroupBytes.
func TestRowGroupBytes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := parquetsink.New(dir, &parquetsink.Options{RowGroupBytes: 1 << 20})
	require.NoError(t, err)
	big := json.RawMessage(`"` + strings.Repeat("x", 300<<10) + `"`)
	for i := range 10 {
		r := benchRecords(1)[0]
		r.Output = big
		r.Epoch = i
		require.NoError(t, w.Write(t.Context(), r))
	}
	require.NoError(t, w.Close(t.Context()))
	rdr, err := file.OpenParquetFile(filepath.Join(dir, "part-00000.parquet"), false)
	require.NoError(t, err)
	defer rdr.Close()
	require.Equal(t, 3, rdr.NumRowGroups()) // 4 + 4 + 2 rows (4 × 300 KiB ≥ 1 MiB)
	require.Equal(t, int64(10), rdr.NumRows())
}

func TestRecordsErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var n int
	for _, err := range parquetsink.Records(filepath.Join(dir, "missing")) {
		require.ErrorIs(t, err, fs.ErrNotExist)
		n++
	}
	require.Equal(t, 1, n)

	notParquet := filepath.Join(dir, "x.parquet")
	require.NoError(t, os.WriteFile(notParquet, []byte("not parquet at all"), 0o644))
	for _, err := range parquetsink.Records(notParquet) {
		require.Error(t, err)
		require.Contains(t, err.Error(), "parquet: ")
	}

	// An empty directory holds zero records and no error.
	for _, err := range parquetsink.Records(t.TempDir()) {
		t.Fatalf("unexpected item, err %v", err)
	}

	// Stopping early is fine.
	d2 := t.TempDir()
	w, err := parquetsink.New(d2, nil)
	require.NoError(t, err)
	for _, r := range benchRecords(100) {
		require.NoError(t, w.Write(t.Context(), r))
	}
	require.NoError(t, w.Close(t.Context()))
	for _, err := range parquetsink.Records(d2) {
		require.NoError(t, err)
		break
	}
}
