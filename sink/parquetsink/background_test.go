package parquetsink_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink/parquetsink"
)

// TestOrderAcrossRowGroupsAndFiles: row groups are written in the
// background, one at a time; rows keep their order across row groups and
// files, and every file but the last holds exactly Options.FileRows rows, in
// row groups of Options.RowGroupRows rows cut at the file's end.
func TestOrderAcrossRowGroupsAndFiles(t *testing.T) {
	t.Parallel()
	const (
		n        = 100_000
		groupLen = 997
		fileLen  = 10_007
	)
	dir := t.TempDir()
	w, err := parquetsink.New(dir, &parquetsink.Options{RowGroupRows: groupLen, FileRows: fileLen})
	require.NoError(t, err)
	recs := benchRecords(n)
	for i := range recs {
		recs[i].SampleID = "s" + strconv.Itoa(i)
		recs[i].Tags["i"] = strconv.Itoa(i)
		require.NoError(t, w.Write(t.Context(), recs[i]))
	}
	require.NoError(t, w.Close(t.Context()))

	files, err := parquetsink.Files(dir)
	require.NoError(t, err)
	require.Len(t, files, (n+fileLen-1)/fileLen)
	require.Len(t, names(t, dir), len(files)) // no .tmp left
	for i, name := range files {
		rdr, err := file.OpenParquetFile(name, false)
		require.NoError(t, err)
		rows := min(fileLen, n-i*fileLen)
		require.Equal(t, int64(rows), rdr.NumRows(), name)
		for g := range rdr.NumRowGroups() {
			want := min(groupLen, rows-g*groupLen)
			require.Equal(t, int64(want), rdr.MetaData().RowGroup(g).NumRows(), "%s row group %d", name, g)
		}
		require.NoError(t, rdr.Close())
	}

	got := readAll(t, dir)
	require.Len(t, got, n)
	for i, r := range got {
		if r.SampleID != recs[i].SampleID || r.Tags["i"] != recs[i].Tags["i"] || !r.StartedAt.Equal(recs[i].StartedAt) {
			t.Fatalf("row %d: got sample %q tag %q, want %q", i, r.SampleID, r.Tags["i"], recs[i].SampleID)
		}
	}
}

// TestBackgroundError: an I/O error in the background write breaks the
// writer: the next Write (or Close) returns it, every later call returns
// it too, and Close removes the unfinished .tmp file, leaving the finished
// files whole.
func TestBackgroundError(t *testing.T) {
	t.Parallel()
	const groupLen, fileLen = 100, 1000
	open := func(t *testing.T) (*parquetsink.Writer, string) {
		dir := t.TempDir()
		w, err := parquetsink.New(dir, &parquetsink.Options{RowGroupRows: groupLen, FileRows: fileLen})
		require.NoError(t, err)
		// File 0 finished, file 1 open with one row group handed off.
		for _, r := range benchRecords(fileLen + groupLen + 50) {
			require.NoError(t, w.Write(t.Context(), r))
		}
		require.Equal(t, []string{"part-00000.parquet", "part-00001.parquet.tmp"}, names(t, dir))
		parquetsink.CloseFile(w)
		return w, dir
	}
	check := func(t *testing.T, dir string) {
		t.Helper()
		require.Equal(t, []string{"part-00000.parquet"}, names(t, dir))
		got, want := readAll(t, dir), benchRecords(fileLen)
		require.Len(t, got, fileLen)
		for i, r := range got {
			require.Equal(t, want[i].SampleID, r.SampleID)
		}
	}

	t.Run("Write", func(t *testing.T) {
		t.Parallel()
		w, dir := open(t)
		// The file's last row group and its footer fail in the background;
		// a later Write reports it (at the latest when it hands off the next
		// row group and waits for that write).
		var werr error
		for i, r := range benchRecords(2 * fileLen) {
			if werr = w.Write(t.Context(), r); werr != nil {
				require.Less(t, i, fileLen+groupLen)
				break
			}
		}
		require.ErrorIs(t, werr, os.ErrClosed)
		require.Contains(t, werr.Error(), "parquet: ")
		require.Equal(t, werr, w.Write(t.Context(), benchRecords(1)[0]), "sticky")
		require.Equal(t, werr, w.Close(t.Context()))
		require.NoError(t, w.Close(t.Context()))
		check(t, dir)
	})

	t.Run("Close", func(t *testing.T) {
		t.Parallel()
		w, dir := open(t)
		err := w.Close(t.Context())
		require.ErrorIs(t, err, os.ErrClosed)
		check(t, dir)
		_, err = os.Stat(filepath.Join(dir, "part-00001.parquet"))
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}
