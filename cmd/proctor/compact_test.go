package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/history/catalog"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

func TestCompactDropsOldTranscriptsAndKeepsRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := nightly(t, dir, "old", 30, "h1")
	time.Sleep(5 * time.Millisecond) // the two runs' starts differ
	recent := nightly(t, dir, "recent", 30, "h1")
	_, reportBefore, _ := cli("report", old)
	res, err := catalog.Update(dir)
	require.NoError(t, err)
	require.Len(t, res.Runs, 2)
	cut := res.Runs[1].Start.Format(time.RFC3339Nano) // before the recent run only
	storeBefore, err := os.Stat(filepath.Join(dir, "old.traces.jsonl"))
	require.NoError(t, err)

	code, out, errOut := cli("compact", "-before", cut, "-keep", "0.1", "-seed", "7", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, old+": ")
	require.NotContains(t, out, recent)
	require.Contains(t, out, "compacted 1 runs started before")

	// About a tenth of the samples keep their transcripts; the records
	// and the report are unchanged; the recent run is untouched.
	kept, dropped := 0, 0
	var droppedID string
	for r, err := range jsonl.Records(old) {
		require.NoError(t, err)
		if r.Transcript == jsonl.CompactedLink {
			dropped++
			droppedID = r.SampleID
		} else {
			kept++
		}
	}
	require.Equal(t, 300, kept+dropped)
	require.InDelta(t, 30, kept, 15)
	require.Contains(t, out, "transcripts dropped, ")
	_, reportAfter, _ := cli("report", old)
	link := regexp.MustCompile(`old\.traces(\.c1)?\.jsonl#\d+|compacted`) // the failures' links change, nothing else
	require.Equal(t, link.ReplaceAllString(reportBefore, "LINK"), link.ReplaceAllString(reportAfter, "LINK"))
	require.NoFileExists(t, filepath.Join(dir, "old.traces.jsonl"))
	store, err := os.Stat(filepath.Join(dir, "old.traces.c1.jsonl"))
	require.NoError(t, err)
	require.Less(t, store.Size(), storeBefore.Size()/4)
	require.FileExists(t, filepath.Join(dir, "recent.traces.jsonl"))

	// proctor trace says "compacted" for a dropped transcript.
	code, out, errOut = cli("trace", old, droppedID)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "(transcript compacted: proctor compact dropped it; the record is kept)")

	// The catalog keeps both runs, and the history reads them.
	runs, err := catalog.Read(dir)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	require.Equal(t, 270, runs[0].Passed)
	code, out, _ = cli("history", dir)
	require.Equal(t, 0, code)
	require.Contains(t, out, "no drift nightly: run recent against baseline old")

	// Again: nothing more to drop, nothing freed.
	code, out, _ = cli("compact", "-before", cut, "-keep", "0.1", "-seed", "7", dir)
	require.Equal(t, 0, code)
	require.Contains(t, out, "0 transcripts dropped")
	require.True(t, strings.HasSuffix(out, ": 0 B freed\n"), out)
}

func TestCompactUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{{"compact", dir}, {"compact", "-before", "yesterday", dir}, {"compact", "-before", "2026-01-01", "-keep", "2", dir}, {"compact", "-before", "2026-01-01"}} {
		code, _, errOut := cli(args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, errOut)
	}
}
