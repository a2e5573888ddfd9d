package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
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

// TestCompactActsOnlyInsideDir: a catalog row kept from a log since moved
// away, its directory replaced by a link to another place, made compact
// follow it there and drop another log's transcripts. Now compact acts
// only on the logs it finds inside DIR.
func TestCompactActsOnlyInsideDir(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir, elsewhere := filepath.Join(root, "runs"), filepath.Join(root, "elsewhere")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "team"), 0o755))
	nightly(t, filepath.Join(dir, "team"), "old", 30, "h1")
	_, err := catalog.Update(dir)
	require.NoError(t, err)
	require.NoError(t, os.Rename(filepath.Join(dir, "team"), elsewhere))
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(dir, "team")))

	code, out, errOut := cli("compact", "-before", "2999-01-01", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "compacted 0 runs")
	require.FileExists(t, filepath.Join(elsewhere, "old.traces.jsonl"), "a store outside DIR is not touched")
}

// TestCompactOneBadLogCostsThatLog: a log whose kept transcript was
// missing stopped compact for every later log, and compacting a log
// removed the store a copy of it (beside it) links to. Now a bad log is
// reported and skipped, and a store another log links to stays.
func TestCompactOneBadLogCostsThatLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := nightly(t, dir, "a", 30, "h1")
	b := nightly(t, dir, "b", 30, "h1")
	c := nightly(t, dir, "c", 30, "h1")
	require.NoError(t, os.Remove(filepath.Join(dir, "a.traces.jsonl"))) // a's kept transcripts are gone
	data, err := os.ReadFile(b)
	require.NoError(t, err)
	copied := filepath.Join(dir, "b2.jsonl") // a copy of b, compacted after it: links to b.traces.jsonl
	require.NoError(t, os.WriteFile(copied, data, 0o644))

	code, out, errOut := cli("compact", "-before", "2999-01-01", "-keep", "0.5", dir)
	require.NotEqual(t, 0, code, "a log could not be compacted")
	require.Contains(t, errOut, a)
	for _, log := range []string{b, copied, c} {
		require.Contains(t, out, log+": ", "every other log is compacted")
		n := 0
		for r, err := range jsonl.Records(log) {
			require.NoError(t, err)
			if r.Transcript == jsonl.CompactedLink {
				continue
			}
			_, err := eval.ReadTranscript(r.Transcript, dir)
			require.NoError(t, err, "%s: %s's transcript", log, r.SampleID)
			n++
		}
		require.NotZero(t, n)
	}
}
