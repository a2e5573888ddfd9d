package jsonl_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

func line(r sink.Record) string { return string(r.AppendJSON(nil)) + "\n" }

// TestOpenLeavesWhatIsNotALog: a file that is not a proctor log is an
// error naming it, and not a byte of it changes. (Before, a one-line file
// was cut to nothing as a "torn tail".)
func TestOpenLeavesWhatIsNotALog(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, content string }{
		{"OneLineNoNewline", "remember the milk"},
		{"OneLine", "remember the milk\n"},
		{"Notes", "# notes\n\n- first\n- second\n"},
		{"CSV", "id,input,answer\n1,2+2,4\n2,3+3,6\n"},
		{"Binary", "\x00\x01\x02\xff\xfe\x7fELF\x00\x00"},
		{"JSONWithoutSchema", `{"id":"a","input":"x"}` + "\n" + `{"id":"b","input":"y"}` + "\n"},
		{"OneJSONObjectNoNewline", `{"id":"a"}`},
		{"JSONArray", `[{"schema":1}]`},
		{"RecordsThenForeignTail", line(rec(0, sink.Pass)) + "not a record"},
		{"RecordsThenForeignLine", line(rec(0, sink.Pass)) + "not a record\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "notes.txt")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
			_, _, err := jsonl.Open(path, &jsonl.OpenOptions{DropErrors: true})
			require.Error(t, err)
			require.ErrorContains(t, err, path, "the error names the file")
			var notLog *jsonl.NotLogError
			var corrupt *jsonl.CorruptError
			require.True(t, errors.As(err, &notLog) || errors.As(err, &corrupt), "%T %v", err, err)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, tc.content, string(after), "the file is untouched")
			st, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
			_, err = os.Stat(path + ".lock")
			require.ErrorIs(t, err, os.ErrNotExist, "the lock is released")
		})
	}
}

func TestOpenEmptyFileIsAFreshLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	w, recov, err := jsonl.Open(path, nil)
	require.NoError(t, err)
	require.Zero(t, recov.Records)
	require.Nil(t, recov.Torn)
	require.NoError(t, w.Write(context.Background(), rec(0, sink.Pass)))
	require.NoError(t, w.Close(context.Background()))
	got, err := readAll(t, path)
	require.NoError(t, err)
	require.Len(t, got, 1)
}

// TestOpenRefusesWhatIsNotAFile: a directory, a FIFO or a device is an
// error at once (a FIFO without a writer must not hang Open).
func TestOpenRefusesWhatIsNotAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	paths := map[string]string{"Directory": dir}
	if runtime.GOOS != "windows" {
		fifo := filepath.Join(t.TempDir(), "fifo")
		require.NoError(t, syscall.Mkfifo(fifo, 0o644))
		paths["FIFO"] = fifo
		paths["Device"] = os.DevNull
	}
	for name, path := range paths {
		t.Run(name, func(t *testing.T) {
			_, _, err := jsonl.Open(path, nil)
			var notLog *jsonl.NotLogError
			require.ErrorAs(t, err, &notLog)
			require.ErrorContains(t, err, path)
			require.ErrorContains(t, err, "not a regular file")
		})
	}
}

// TestOpenCommitsOnlyWhatRecordsReads: a line counts as committed for
// resume exactly when Records returns its record. Before, Open's key scan
// counted lines that no reader could decode, so resume skipped episodes
// whose records were never returned.
func TestOpenCommitsOnlyWhatRecordsReads(t *testing.T) {
	t.Parallel()
	// The key fields are fine; the score does not fit a float64.
	bad := `{"schema":1,"run_id":"run-1","eval":"e","sample_id":"s9","epoch":0,"attempt":0,"status":"pass","score":1e999,"started_at":"2026-01-02T03:04:05Z","duration_ms":1,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":0}`

	t.Run("Middle", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "log.jsonl")
		content := line(rec(0, sink.Pass)) + bad + "\n" + line(rec(1, sink.Pass))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
		_, err := readAll(t, path)
		var corrupt *jsonl.CorruptError
		require.ErrorAs(t, err, &corrupt)
		_, _, err = jsonl.Open(path, nil)
		require.ErrorAs(t, err, &corrupt, "Open agrees with Records")
		require.Equal(t, 2, corrupt.Line)
		after, _ := os.ReadFile(path)
		require.Equal(t, content, string(after))
	})
	t.Run("Last", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "log.jsonl")
		require.NoError(t, os.WriteFile(path, []byte(line(rec(0, sink.Pass))+bad+"\n"), 0o644))
		got, _ := readAll(t, path)
		require.Len(t, got, 1)
		w, recov, err := jsonl.Open(path, nil)
		require.NoError(t, err)
		require.NoError(t, w.Close(context.Background()))
		require.Equal(t, 1, recov.Records)
		require.NotContains(t, recov.Done, sink.Key{SampleID: "s9"}, "an unreadable record is not done")
		require.NotNil(t, recov.Torn)
	})
}

// TestTornTailShapes: what counts as a torn tail is cut and reported,
// with the records before it kept.
func TestTornTailShapes(t *testing.T) {
	t.Parallel()
	full := line(rec(1, sink.Pass))
	for _, tail := range []string{"{", `{"sche`, `{"schema":1,"run_id":"ru`, full[:len(full)-1], `{"schema":1,"run_id":` + "\n"} {
		path := filepath.Join(t.TempDir(), "log.jsonl")
		head := line(rec(0, sink.Pass))
		require.NoError(t, os.WriteFile(path, []byte(head+tail), 0o644))
		w, recov, err := jsonl.Open(path, nil)
		require.NoError(t, err, "%q", tail)
		require.NoError(t, w.Close(context.Background()))
		require.NotNil(t, recov.Torn, "%q", tail)
		require.Equal(t, int64(len(tail)), recov.Torn.Bytes)
		require.Equal(t, 1, recov.Records)
		after, _ := os.ReadFile(path)
		require.Equal(t, head, string(after))
	}
	// A torn first record: the file held nothing committed yet.
	path := filepath.Join(t.TempDir(), "log.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"schema":1,"ru`), 0o644))
	w, recov, err := jsonl.Open(path, nil)
	require.NoError(t, err)
	require.NoError(t, w.Close(context.Background()))
	require.NotNil(t, recov.Torn)
	require.Zero(t, recov.Records)
}

func TestRecordsOfNotALog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(path, []byte("hello\nworld\n"), 0o644))
	_, err := readAll(t, path)
	var notLog *jsonl.NotLogError
	require.ErrorAs(t, err, &notLog)
	require.True(t, strings.Contains(err.Error(), path))
}
