package jsonl_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// compactFixture writes a log of n episodes in dir, each with a
// transcript of about 600 bytes in the log's store, linked as the engine
// links them (relative to the log). It returns the log, its records and
// their transcripts.
func compactFixture(t testing.TB, dir string, n int) (string, []sink.Record, [][]byte) {
	t.Helper()
	log := filepath.Join(dir, "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	sw, err := jsonl.Create(filepath.Join(dir, "run.traces.jsonl"), nil)
	require.NoError(t, err)
	var recs []sink.Record
	var transcripts [][]byte
	for i := range n {
		tr := fmt.Appendf(nil, `{"run_id":"r","sample_id":"s%d","epoch":0,"attempt":0,"events":[{"kind":"model","name":"m","output":%q}]}`, i, strings.Repeat("x", 500))
		off, err := sw.WriteLine(append(slices.Clone(tr), '\n'))
		require.NoError(t, err)
		r := sink.Record{Schema: 1, RunID: "r", Eval: "e", SampleID: "s" + strconv.Itoa(i), Status: sink.Pass, Score: 1,
			Transcript: "run.traces.jsonl#" + strconv.FormatInt(off, 10), StartedAt: time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC)}
		if i%5 == 4 {
			r.Transcript = "" // an episode with no transcript
		}
		require.NoError(t, w.Write(context.Background(), r))
		recs, transcripts = append(recs, r), append(transcripts, tr)
	}
	require.NoError(t, sw.Close(context.Background()))
	require.NoError(t, w.Close(context.Background()))
	return log, recs, transcripts
}

// keepEven keeps the transcripts of the even samples.
func keepEven(r *sink.Record) bool {
	n, _ := strconv.Atoi(strings.TrimPrefix(r.SampleID, "s"))
	return n%2 == 0
}

// compactState checks that the log in dir is in the state before
// Compact(keepEven) or after it, and says which: every record is as it
// was but for its link, and every link reads its original transcript, or
// is CompactedLink for an odd sample.
func compactState(t *testing.T, log string, recs []sink.Record, transcripts [][]byte) string {
	t.Helper()
	var got []sink.Record
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		got = append(got, r)
	}
	require.Len(t, got, len(recs))
	state := "old"
	for i, r := range got {
		want := recs[i]
		link := r.Transcript
		r.Transcript, want.Transcript = "", ""
		require.Equal(t, string(want.AppendJSON(nil)), string(r.AppendJSON(nil)), "record %d changed", i)
		switch {
		case recs[i].Transcript == "":
			require.Empty(t, link)
		case link == jsonl.CompactedLink:
			require.False(t, keepEven(&recs[i]), "a kept transcript was dropped: %s", recs[i].SampleID)
			state = "new"
		default:
			path, off, err := jsonl.ResolveTranscript(log, link)
			require.NoError(t, err)
			line, err := jsonl.ReadLineAt(path, off)
			require.NoError(t, err, "record %d links %s", i, link)
			require.Equal(t, string(transcripts[i]), string(line))
			if link != recs[i].Transcript {
				state = "new"
			}
		}
	}
	return state
}

func TestCompactKeepsASampleOfTranscripts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log, recs, transcripts := compactFixture(t, dir, 100)
	old, err := os.Stat(filepath.Join(dir, "run.traces.jsonl"))
	require.NoError(t, err)

	var keptBytes int64
	for i := range recs {
		if recs[i].Transcript != "" && keepEven(&recs[i]) {
			keptBytes += int64(len(transcripts[i]) + 1)
		}
	}
	res, err := jsonl.Compact(log, keepEven)
	require.NoError(t, err)
	require.Equal(t, jsonl.Compacted{Records: 100, Kept: 40, Dropped: 40, Store: filepath.Join(dir, "run.traces.c1.jsonl"),
		Freed: old.Size() - keptBytes}, *res)
	require.Equal(t, "new", compactState(t, log, recs, transcripts))
	require.Equal(t, []string{"run.jsonl", "run.traces.c1.jsonl"}, dirNames(t, dir), "the old store and every temporary file gone")

	// A dropped transcript resolves to ErrCompacted.
	var odd sink.Record
	for r := range jsonl.Records(log) {
		if r.SampleID == "s1" {
			odd = r
		}
	}
	require.Equal(t, jsonl.CompactedLink, odd.Transcript)
	_, _, err = jsonl.ResolveTranscript(log, odd.Transcript)
	require.ErrorIs(t, err, jsonl.ErrCompacted)

	// Again with the same sample: nothing to drop, nothing changes.
	before, err := os.ReadFile(log)
	require.NoError(t, err)
	res, err = jsonl.Compact(log, keepEven)
	require.NoError(t, err)
	require.Equal(t, 0, res.Dropped)
	after, err := os.ReadFile(log)
	require.NoError(t, err)
	require.Equal(t, before, after)

	// Then drop them all: no store is left.
	res, err = jsonl.Compact(log, nil)
	require.NoError(t, err)
	require.Equal(t, 40, res.Dropped)
	require.Empty(t, res.Store)
	require.Equal(t, keptBytes, res.Freed)
	require.Equal(t, []string{"run.jsonl"}, dirNames(t, dir))
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestCompactRefusesALogBeingWrittenOrTorn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log, recs, transcripts := compactFixture(t, dir, 10)
	w, err := jsonl.Append(log, nil)
	require.NoError(t, err)
	_, err = jsonl.Compact(log, nil)
	var locked *jsonl.LockedError
	require.ErrorAs(t, err, &locked)
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, "old", compactState(t, log, recs, transcripts))

	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"schema":1,"run_id":"r","eval":"e","sample_id":"s99"`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	before, err := os.ReadFile(log)
	require.NoError(t, err)
	_, err = jsonl.Compact(log, nil)
	var torn *jsonl.TornTailError
	require.ErrorAs(t, err, &torn)
	after, err := os.ReadFile(log)
	require.NoError(t, err)
	require.Equal(t, before, after, "a torn log is left as it is")
	require.Equal(t, []string{"run.jsonl", "run.traces.jsonl"}, dirNames(t, dir))
}

// compactChild is the child process of TestCompactKill9AtManyPoints: it
// says "start" and compacts the log, keeping the even samples.
func compactChild(log string) {
	os.Stdout.WriteString("start\n")
	if _, err := jsonl.Compact(log, keepEven); err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(0)
}

// TestCompactKill9AtManyPoints SIGKILLs a child process compacting a log
// at moments spread over the time one compaction takes: each time, the
// log is whole, in the old state or the new one, and a Compact run
// afterwards finishes the job and removes what the killed one left.
func TestCompactKill9AtManyPoints(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs a second process and SIGKILL")
	}
	t.Parallel()
	const n, kills = 2000, 12
	src := t.TempDir()
	_, recs, transcripts := compactFixture(t, src, n)
	fresh := func() string {
		dir := t.TempDir()
		for _, name := range []string{"run.jsonl", "run.traces.jsonl"} {
			b, err := os.ReadFile(filepath.Join(src, name))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
		}
		return filepath.Join(dir, "run.jsonl")
	}
	// How long one compaction takes here, in a child as the killed ones.
	start := time.Now()
	out, err := compactCmd(fresh()).CombinedOutput()
	require.NoError(t, err, string(out))
	took := time.Since(start)

	states := map[string]int{}
	for k := range kills {
		log := fresh()
		child := compactCmd(log)
		stdout, err := child.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, child.Start())
		line, err := bufio.NewReader(stdout).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "start\n", line)
		time.Sleep(took * time.Duration(k) / kills)
		require.NoError(t, child.Process.Signal(syscall.SIGKILL))
		err = child.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 1 {
			t.Fatalf("the child failed: %v", err)
		}
		state := compactState(t, log, recs, transcripts)
		states[state]++
		_, err = jsonl.Compact(log, keepEven)
		require.NoError(t, err)
		require.Equal(t, "new", compactState(t, log, recs, transcripts))
		names := dirNames(t, filepath.Dir(log))
		require.Len(t, names, 2, "kill %d (%s state): left %v", k, state, names)
		require.Equal(t, "run.jsonl", names[0])
		require.Regexp(t, `^run\.traces\.c[12]\.jsonl$`, names[1])
	}
	t.Logf("one compaction of %d records: %v; %d kills found the old state %d times, the new %d", n, took, kills, states["old"], states["new"])
}

func compactCmd(log string) *exec.Cmd {
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), "JSONL_COMPACT_CHILD="+log)
	return c
}

// TestCompactKeepsAStoreLinkedByAbsolutePath: older logs link their
// transcripts by absolute path; a Compact (of the log named by a relative
// path, as `proctor compact runs/` names it) with nothing to drop must see
// the store as linked, and leave it.
func TestCompactKeepsAStoreLinkedByAbsolutePath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log, recs, transcripts := compactFixture(t, dir, 10)
	abs := make([]sink.Record, len(recs))
	w, err := jsonl.Create(filepath.Join(dir, "abs.jsonl"), nil)
	require.NoError(t, err)
	for i, r := range recs {
		if r.Transcript != "" {
			r.Transcript = filepath.Join(dir, r.Transcript)
		}
		abs[i] = r
		require.NoError(t, w.Write(context.Background(), r))
	}
	require.NoError(t, w.Close(context.Background()))
	require.NoError(t, os.Rename(filepath.Join(dir, "abs.jsonl"), log))

	wd, err := os.Getwd()
	require.NoError(t, err)
	rel, err := filepath.Rel(wd, log)
	require.NoError(t, err)
	res, err := jsonl.Compact(rel, func(*sink.Record) bool { return true })
	require.NoError(t, err)
	require.Equal(t, 0, res.Dropped)
	require.Equal(t, int64(0), res.Freed)
	require.Equal(t, "old", compactState(t, log, abs, transcripts))
}

// TestCompactRemovesTheCallStore: the model gateway's call store of a
// compacted log (and its lock) go, their bytes counted as freed; a
// symbolic link in its place is not followed nor removed.
func TestCompactRemovesTheCallStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log, _, _ := compactFixture(t, dir, 10)
	calls := filepath.Join(dir, "run.calls.jsonl")
	require.NoError(t, os.WriteFile(calls, []byte("0123456789\n"), 0o644))
	require.NoError(t, os.WriteFile(calls+".lock", nil, 0o644))
	old, err := os.Stat(filepath.Join(dir, "run.traces.jsonl"))
	require.NoError(t, err)
	res, err := jsonl.Compact(log, nil)
	require.NoError(t, err)
	require.Equal(t, old.Size()+11, res.Freed)
	require.Equal(t, []string{"run.jsonl"}, dirNames(t, dir))

	other := filepath.Join(t.TempDir(), "elsewhere")
	require.NoError(t, os.WriteFile(other, []byte("keep"), 0o644))
	require.NoError(t, os.Symlink(other, calls))
	_, err = jsonl.Compact(log, nil)
	require.NoError(t, err)
	_, err = os.Stat(other)
	require.NoError(t, err, "the link's target")
}
