package jsonl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// mergeRec is a record of run "run-m" whose reason names where it was
// written, so that a test sees which duplicate was kept.
func mergeRec(id string, epoch int, status sink.Status, from string) sink.Record {
	return sink.Record{Schema: sink.SchemaVersion, RunID: "run-m", Eval: "e", SampleID: id, Epoch: epoch,
		Status: status, Reason: from, Tags: map[string]string{"k": "v"},
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Output: json.RawMessage(`"out"`)}
}

type transcript struct {
	SampleID string `json:"sample_id"`
	Epoch    int    `json:"epoch"`
	From     string `json:"from"`
}

// writeShard writes a log with its transcript store, as the engine does: each
// record links to its transcript, "NAME#OFFSET" relative to the log.
func writeShard(t testing.TB, path string, recs ...sink.Record) {
	t.Helper()
	ctx := context.Background()
	store := strings.TrimSuffix(path, ".jsonl") + ".traces.jsonl"
	traces, err := jsonl.Create(store, nil)
	require.NoError(t, err)
	w, err := jsonl.Create(path, nil)
	require.NoError(t, err)
	w.FlushFirst(traces)
	for _, r := range recs {
		line, err := json.Marshal(transcript{r.SampleID, r.Epoch, r.Reason})
		require.NoError(t, err)
		off, err := traces.WriteLine(line)
		require.NoError(t, err)
		r.Transcript = fmt.Sprintf("%s#%d", filepath.Base(store), off)
		require.NoError(t, w.Write(ctx, r))
	}
	require.NoError(t, w.Close(ctx))
	require.NoError(t, traces.Close(ctx))
}

func mergedRecords(t *testing.T, path string) []sink.Record {
	t.Helper()
	var out []sink.Record
	for r, err := range jsonl.Records(path) {
		require.NoError(t, err)
		out = append(out, r)
	}
	return out
}

// resolve reads the transcript a merged record links to.
func resolve(t *testing.T, log string, r sink.Record) transcript {
	t.Helper()
	path, off, err := jsonl.ResolveTranscript(log, r.Transcript)
	require.NoError(t, err)
	line, err := jsonl.ReadLineAt(path, off)
	require.NoError(t, err)
	var tr transcript
	require.NoError(t, json.Unmarshal(line, &tr))
	return tr
}

// threeShards writes 20 samples × 2 epochs split across three logs as
// shards split them: all epochs of a sample in one shard, in completion
// order (not sorted).
func threeShards(t *testing.T, dir string) []string {
	t.Helper()
	shards := make([][]sink.Record, 3)
	for _, i := range []int{7, 3, 19, 0, 12, 5, 18, 1, 10, 2, 14, 9, 16, 4, 11, 6, 13, 8, 17, 15} {
		for epoch := range 2 {
			status := sink.Pass
			if i%4 == 0 {
				status = sink.Fail
			}
			shards[i%3] = append(shards[i%3], mergeRec(fmt.Sprintf("q%d", i), epoch, status, fmt.Sprintf("shard-%d", i%3)))
		}
	}
	var logs []string
	for s, recs := range shards {
		path := filepath.Join(dir, fmt.Sprintf("shard-%d.jsonl", s))
		writeShard(t, path, recs...)
		logs = append(logs, path)
	}
	return logs
}

func TestMergeShards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := threeShards(t, dir)
	out := filepath.Join(dir, "merged", "run.jsonl") // a directory not there yet
	res, err := jsonl.Merge(out, logs, nil)
	require.NoError(t, err)
	require.Equal(t, &jsonl.Merged{RunID: "run-m", Records: 40}, res)

	got := mergedRecords(t, out)
	require.Len(t, got, 40)
	for i, r := range got {
		require.Equal(t, fmt.Sprintf("q%d", i/2), r.SampleID, "natural order: q2 before q10")
		require.Equal(t, i%2, r.Epoch)
		require.True(t, strings.HasPrefix(r.Transcript, "run.traces.jsonl#"), r.Transcript)
		tr := resolve(t, out, r)
		require.Equal(t, transcript{r.SampleID, r.Epoch, r.Reason}, tr, "the link resolves to this record's transcript")
	}

	// The merged log is a log: Open resumes it.
	w, rec, err := jsonl.Open(out, nil)
	require.NoError(t, err)
	require.Equal(t, 40, rec.Records)
	require.Nil(t, rec.Torn)
	require.NoError(t, w.Close(context.Background()))

	// Moving the directory keeps the links working: they are relative.
	moved := filepath.Join(dir, "moved")
	require.NoError(t, os.Rename(filepath.Dir(out), moved))
	r := mergedRecords(t, filepath.Join(moved, "run.jsonl"))[5]
	require.Equal(t, r.SampleID, resolve(t, filepath.Join(moved, "run.jsonl"), r).SampleID)
}

func TestMergeKeepsOneRecordPerKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	writeShard(t, a,
		mergeRec("s1", 0, sink.Error, "a"), // b's fail wins: not an error
		mergeRec("s2", 0, sink.Pass, "a"),  // first in argument order wins
		mergeRec("s3", 0, sink.Error, "a"), // errors only: the first
		mergeRec("s4", 0, sink.Pass, "a"),  // only in a
		mergeRec("s2", 0, sink.Fail, "a2")) // a duplicate within a log: the first line wins
	writeShard(t, b,
		mergeRec("s1", 0, sink.Fail, "b"),
		mergeRec("s2", 0, sink.Pass, "b"),
		mergeRec("s3", 0, sink.Error, "b"),
		mergeRec("s1", 1, sink.Pass, "b")) // another epoch: another key

	out := filepath.Join(dir, "out.jsonl")
	res, err := jsonl.Merge(out, []string{a, b}, nil)
	require.NoError(t, err)
	require.Equal(t, 5, res.Records)
	require.Equal(t, 4, res.Duplicates)
	type kept struct {
		id    string
		epoch int
		from  string
	}
	var got []kept
	for _, r := range mergedRecords(t, out) {
		got = append(got, kept{r.SampleID, r.Epoch, r.Reason})
		require.Equal(t, r.Reason, resolve(t, out, r).From, "the kept record's own transcript")
	}
	require.Equal(t, []kept{{"s1", 0, "b"}, {"s1", 1, "b"}, {"s2", 0, "a"}, {"s3", 0, "a"}, {"s4", 0, "a"}}, got)

	// In the other order, b's records come first.
	out2 := filepath.Join(dir, "out2.jsonl")
	_, err = jsonl.Merge(out2, []string{b, a}, nil)
	require.NoError(t, err)
	require.Equal(t, "b", mergedRecords(t, out2)[2].Reason)
}

// TestMergeKeepsEachVariant: the variants of one sample and epoch are
// episodes apart (shard logs of a run of variants), merged with their own
// duplicates only. Before the merge's key had the variant, variant b's
// records were dropped as duplicates of variant a's.
func TestMergeKeepsEachVariant(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	variant := func(v string, r sink.Record) sink.Record { r.Variant = v; return r }
	writeShard(t, a,
		variant("x", mergeRec("s1", 0, sink.Pass, "a-x")),
		variant("y", mergeRec("s1", 0, sink.Fail, "a-y")),
		variant("y", mergeRec("s2", 0, sink.Error, "a-y2")))
	writeShard(t, b,
		variant("y", mergeRec("s2", 0, sink.Pass, "b-y2")), // b's pass wins over a's error
		variant("x", mergeRec("s2", 0, sink.Pass, "b-x2")))
	out := filepath.Join(dir, "out.jsonl")
	res, err := jsonl.Merge(out, []string{a, b}, nil)
	require.NoError(t, err)
	require.Equal(t, 4, res.Records)
	require.Equal(t, 1, res.Duplicates)
	var got []string
	for _, r := range mergedRecords(t, out) {
		got = append(got, r.Variant+" "+r.SampleID+" "+r.Reason)
	}
	require.Equal(t, []string{"x s1 a-x", "y s1 a-y", "x s2 b-x2", "y s2 b-y2"}, got)
}

func TestMergeRefusesAnotherRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	writeShard(t, a, mergeRec("s1", 0, sink.Pass, "a"))
	other := mergeRec("s2", 0, sink.Pass, "b")
	other.RunID = "run-other"
	writeShard(t, b, other)

	out := filepath.Join(dir, "out.jsonl")
	_, err := jsonl.Merge(out, []string{a, b}, nil)
	var mm *jsonl.RunMismatchError
	require.ErrorAs(t, err, &mm)
	require.Equal(t, jsonl.RunMismatchError{Log: a, RunID: "run-m", OtherLog: b, OtherRunID: "run-other"}, *mm)
	require.ErrorContains(t, err, `a.jsonl holds run "run-m" and `+b+` run "run-other"`)
	requireOnly(t, dir, "a.jsonl", "a.traces.jsonl", "b.jsonl", "b.traces.jsonl")
}

// requireOnly fails unless dir holds exactly these files: nothing
// half-written is left behind.
func requireOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(names)
	require.Equal(t, names, got)
}

func TestMergeCutsATornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := threeShards(t, dir)
	// Shard 1 was killed in the middle of a write.
	f, err := os.OpenFile(logs[1], os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	torn := `{"schema":1,"run_id":"run-m","eval":"e","sample_id":"q99","epo`
	_, err = f.WriteString(torn)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	before, err := os.ReadFile(logs[1])
	require.NoError(t, err)

	out := filepath.Join(dir, "out.jsonl")
	res, err := jsonl.Merge(out, logs, nil)
	require.NoError(t, err)
	require.Len(t, res.Torn, 1)
	require.Equal(t, logs[1], res.Torn[0].Path)
	require.Equal(t, int64(len(torn)), res.Torn[0].Bytes)
	require.Equal(t, 40, res.Records)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NotContains(t, string(b), "q99", "the torn line is never written")
	mergedRecords(t, out) // every line of the output is committed
	after, err := os.ReadFile(logs[1])
	require.NoError(t, err)
	require.Equal(t, before, after, "an input is read, never cut")
}

func TestMergeIsDeterministic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := threeShards(t, dir)
	var logBytes, storeBytes [][]byte
	for i, order := range [][]int{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}, {2, 1, 0}} {
		var in []string
		for _, j := range order {
			in = append(in, logs[j])
		}
		out := filepath.Join(dir, fmt.Sprintf("out%d", i), "run.jsonl")
		_, err := jsonl.Merge(out, in, nil)
		require.NoError(t, err)
		lb, err := os.ReadFile(out)
		require.NoError(t, err)
		sb, err := os.ReadFile(filepath.Join(filepath.Dir(out), "run.traces.jsonl"))
		require.NoError(t, err)
		logBytes, storeBytes = append(logBytes, lb), append(storeBytes, sb)
	}
	for i := 1; i < len(logBytes); i++ {
		require.Equal(t, string(logBytes[0]), string(logBytes[i]), "log of argument order %d", i)
		require.Equal(t, string(storeBytes[0]), string(storeBytes[i]), "transcript store of argument order %d", i)
	}
}

func TestMergeOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := threeShards(t, dir)
	out := filepath.Join(dir, "out.jsonl")

	_, err := jsonl.Merge(out, nil, nil)
	require.ErrorContains(t, err, "no logs")

	_, err = jsonl.Merge(out, logs, nil)
	require.NoError(t, err)
	first, err := os.ReadFile(out)
	require.NoError(t, err)

	_, err = jsonl.Merge(out, logs[:1], nil)
	require.ErrorContains(t, err, "already exists", "no force: an existing output is kept")
	b, _ := os.ReadFile(out)
	require.Equal(t, first, b)

	res, err := jsonl.Merge(out, logs[:1], &jsonl.MergeOptions{Force: true})
	require.NoError(t, err, "force replaces an earlier merge")
	require.Less(t, res.Records, 40)
	require.Len(t, mergedRecords(t, out), res.Records)

	_, err = jsonl.Merge(logs[0], logs, &jsonl.MergeOptions{Force: true})
	require.ErrorContains(t, err, "is one of the logs merged")

	notes := filepath.Join(dir, "notes.jsonl")
	require.NoError(t, os.WriteFile(notes, []byte("my notes\n"), 0o644))
	_, err = jsonl.Merge(notes, logs, &jsonl.MergeOptions{Force: true})
	var notLog *jsonl.NotLogError
	require.ErrorAs(t, err, &notLog, "force replaces only a log")
	b, _ = os.ReadFile(notes)
	require.Equal(t, "my notes\n", string(b))

	orphan := filepath.Join(dir, "orphan.jsonl")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "orphan.traces.jsonl"), []byte("mine\n"), 0o644))
	_, err = jsonl.Merge(orphan, logs, &jsonl.MergeOptions{Force: true})
	require.ErrorContains(t, err, "orphan.traces.jsonl exists without the log")

	_, err = jsonl.Merge(filepath.Join(dir, "x.jsonl"), []string{filepath.Join(dir, "missing.jsonl")}, nil)
	require.ErrorContains(t, err, "missing.jsonl")

	requireOnly(t, dir, "notes.jsonl", "orphan.traces.jsonl", "out.jsonl", "out.traces.jsonl",
		"shard-0.jsonl", "shard-0.traces.jsonl", "shard-1.jsonl", "shard-1.traces.jsonl", "shard-2.jsonl", "shard-2.traces.jsonl")
}

func TestMergeRefusesALogInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := threeShards(t, dir)
	w, _, err := jsonl.Open(logs[2], nil) // shard 2 still running
	require.NoError(t, err)
	defer w.Close(context.Background())
	_, err = jsonl.Merge(filepath.Join(dir, "out.jsonl"), logs, nil)
	var locked *jsonl.LockedError
	require.ErrorAs(t, err, &locked)
	require.Equal(t, logs[2], locked.Path)
	require.Equal(t, os.Getpid(), locked.PID)

	// The output's lock is held while merging: a run cannot write it.
	require.NoError(t, w.Close(context.Background()))
	_, err = jsonl.Merge(logs[2], logs[:2], &jsonl.MergeOptions{Force: true})
	require.NoError(t, err, "an ended shard's log may be the output of others")
}

func TestMergeKeepsARecordWhoseTranscriptIsGone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := threeShards(t, dir)
	require.NoError(t, os.Remove(filepath.Join(dir, "shard-0.traces.jsonl")))
	out := filepath.Join(dir, "out.jsonl")
	res, err := jsonl.Merge(out, logs, nil)
	require.NoError(t, err)
	require.Equal(t, 40, res.Records)
	require.Len(t, res.Warnings, 2)
	require.Contains(t, res.Warnings[0], "shard-0.traces.jsonl")
	require.Contains(t, res.Warnings[1], "14 transcripts could not be read")
	for _, r := range mergedRecords(t, out) {
		if r.Reason == "shard-0" {
			require.Empty(t, r.Transcript, "no link to a transcript that is not there")
		} else {
			require.Equal(t, r.SampleID, resolve(t, out, r).SampleID)
		}
	}
}

// FuzzMerge: whatever a log holds, Merge fails or writes a log whose every
// line is a committed record, one per key.
func FuzzMerge(f *testing.F) {
	good := mergeRec("s1", 0, sink.Pass, "a")
	line := good.AppendJSON(nil)
	f.Add(append(append([]byte{}, line...), '\n'))
	f.Add(append(append(append([]byte{}, line...), '\n'), line[:20]...))
	f.Add([]byte("not a log\n"))
	f.Add([]byte(`{"schema":1,"run_id":"r","eval":"e","sample_id":"a","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2026-01-01T00:00:00Z","duration_ms":0,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":0,"trace":"../../etc/passwd#0"}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		in := filepath.Join(dir, "in.jsonl")
		if err := os.WriteFile(in, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out.jsonl")
		res, err := jsonl.Merge(out, []string{in}, nil)
		if err != nil {
			if _, serr := os.Stat(out); serr == nil {
				t.Fatalf("failed (%v) but wrote %s", err, out)
			}
			return
		}
		seen := map[sink.Key]bool{}
		n := 0
		for r, err := range jsonl.Records(out) {
			if err != nil {
				t.Fatalf("merged log does not read: %v", err)
			}
			if seen[r.Key()] {
				t.Fatalf("key %v twice", r.Key())
			}
			seen[r.Key()] = true
			n++
		}
		if n != res.Records {
			t.Fatalf("%d records read, %d reported", n, res.Records)
		}
	})
}

// BenchmarkMerge merges three shard logs of 10,000 records each, with
// their transcripts; records/s is what to compare.
func BenchmarkMerge(b *testing.B) {
	dir := b.TempDir()
	shards := make([][]sink.Record, 3)
	for i := range 10_000 {
		for epoch := range 3 {
			r := mergeRec(fmt.Sprintf("q%d", i), epoch, sink.Pass, "shard")
			r.Output = json.RawMessage(`{"answer":"` + strings.Repeat("x", 200) + `"}`)
			shards[i%3] = append(shards[i%3], r)
		}
	}
	var logs []string
	for s, recs := range shards {
		path := filepath.Join(dir, fmt.Sprintf("shard-%d.jsonl", s))
		writeShard(b, path, recs...)
		logs = append(logs, path)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := jsonl.Merge(filepath.Join(dir, fmt.Sprintf("out-%d.jsonl", i)), logs, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(30_000*b.N)/b.Elapsed().Seconds(), "records/s")
}
