package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/harness/replay"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

type task struct {
	Q    int `json:"q"`
	Want int `json:"want"`
}

// mixedRun writes a log of 30 samples × 3 epochs: sample i fails in epochs
// 1 and 2 when i%3 == 0 (so a failing sample has a passing epoch too), errors in
// every epoch when i%10 == 7, and is unscored when i%10 == 8 (these two
// rules win over the first).
func mixedRun(t *testing.T, path string) {
	t.Helper()
	var d dataset.Slice[task]
	for i := range 30 {
		d = append(d, dataset.Sample[task]{ID: fmt.Sprintf("s%02d", i), Input: task{i, 2 * i}, Tags: map[string]string{"level": []string{"easy", "hard"}[i%2]}})
	}
	h := harness.Func[task, int](func(_ context.Context, ep *harness.Episode[task]) (int, error) {
		ep.AddEvent(harness.Event{Kind: "model", Name: "stand-in"})
		switch i := ep.Sample.Input.Q; {
		case i%10 == 7:
			return 0, errors.New("provider outage")
		case i%3 == 0 && ep.Epoch >= 1:
			return -1, nil
		}
		return ep.Sample.Input.Want, nil
	})
	j := judge.Func[task, int](func(_ context.Context, ep *harness.Episode[task], out int) (judge.Verdict, error) {
		if ep.Sample.Input.Q%10 == 8 {
			return judge.Verdict{}, &judge.UnscoredError{Reason: "unparseable grade"}
		}
		if out == ep.Sample.Input.Want {
			return judge.Pass("right"), nil
		}
		return judge.Fail(fmt.Sprintf("got %d", out)), nil
	})
	e := &eval.Eval[task, int]{Name: "mixed", Dataset: d, Harness: h, Judge: j}
	_, err := e.Run(context.Background(), eval.Config{Epochs: 3, Log: path, Retries: -1, MaxErrorRate: -1})
	require.NoError(t, err)
}

func loadExport[T any](t *testing.T, path string) dataset.Slice[T] {
	t.Helper()
	got, err := dataset.Collect(context.Background(), dataset.JSONL[T]{Path: path})
	require.NoError(t, err, "the export loads with dataset.JSONL as it is")
	return got
}

func ids[T any](s dataset.Slice[T]) []string {
	var out []string
	for _, x := range s {
		out = append(out, x.ID)
	}
	return out
}

func TestExportFailuresRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "runs", "run.jsonl")
	mixedRun(t, log)
	out := filepath.Join(dir, "suite", "regressions.jsonl")

	code, stdout, stderr := cli("export", "-failures", "-format", "dataset", "-o", out, log)
	require.Zero(t, code, stderr)
	require.Equal(t, "exported 8 samples to "+out+"\n", stdout)
	got := loadExport[task](t, out)
	require.Equal(t, []string{"s00", "s03", "s06", "s09", "s12", "s15", "s21", "s24"}, sorted(ids(got)),
		"each sample with a failing epoch, once")
	for _, s := range got {
		var i int
		fmt.Sscanf(s.ID, "s%d", &i)
		require.Equal(t, task{i, 2 * i}, s.Input, "the input as the eval had it")
		require.Equal(t, map[string]string{"level": []string{"easy", "hard"}[i%2]}, s.Tags)
	}
	require.Zero(t, fileMode(t, out)&0o044^0o044, "readable like any file the user writes")

	// The transcript link resolves, from anywhere, to the failing episode.
	lines := readLines(t, out)
	require.Len(t, lines, 8)
	for _, l := range lines {
		var row struct{ ID, Trace string }
		require.NoError(t, json.Unmarshal([]byte(l), &row))
		require.True(t, filepath.IsAbs(row.Trace[:strings.LastIndexByte(row.Trace, '#')]), row.Trace)
		code, stdout, stderr := cli("trace", "-json", row.Trace)
		require.Zero(t, code, stderr)
		var tr struct {
			Trace struct {
				SampleID string `json:"sample_id"`
				Epoch    int
			}
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &tr), stdout)
		require.Equal(t, row.ID, tr.Trace.SampleID)
		require.Contains(t, []int{1, 2}, tr.Trace.Epoch, "a failing epoch's transcript")
	}

	// Other statuses.
	out2 := filepath.Join(dir, "errors.jsonl")
	code, _, stderr = cli("export", "-failures", "-status", "error,unscored", "-o", out2, log)
	require.Zero(t, code, stderr)
	require.Equal(t, []string{"s07", "s08", "s17", "s18", "s27", "s28"}, sorted(ids(loadExport[task](t, out2))))
	code, _, stderr = cli("export", "-failures", "-status", "fail,error,unscored", "-o", filepath.Join(dir, "all.jsonl"), log)
	require.Zero(t, code, stderr)
	require.Len(t, loadExport[task](t, filepath.Join(dir, "all.jsonl")), 8+6)
}

func sorted(s []string) []string { slices.Sort(s); return s }

func fileMode(t *testing.T, path string) os.FileMode {
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Mode().Perm()
}

func readLines(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// The production path: failures of a replay run become cases with their
// trace and span IDs, which load back as replay.Case.
func TestExportFailuresOfProductionTraffic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	at := time.Date(2026, 11, 23, 10, 4, 5, 0, time.UTC)
	cases := dataset.Slice[replay.Case]{
		{ID: "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", Tags: map[string]string{"gen_ai.request.model": "m-small"}, Input: replay.Case{
			Input: json.RawMessage(`[{"role":"user","content":"refund?"}]`), Output: json.RawMessage(`"Sorry, I cannot help with that."`),
			TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331", Time: at, Attrs: map[string]string{"gen_ai.response.finish_reasons": `["stop"]`},
		}},
		{ID: "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", Input: replay.Case{
			Input: json.RawMessage(`"hi"`), Output: json.RawMessage(`"hello"`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", Time: at,
		}},
	}
	refuses := judge.Func[replay.Case, json.RawMessage](func(_ context.Context, _ *harness.Episode[replay.Case], out json.RawMessage) (judge.Verdict, error) {
		if strings.Contains(string(out), "Sorry") {
			return judge.Fail("refused"), nil
		}
		return judge.Pass("answered"), nil
	})
	log := filepath.Join(dir, "online.jsonl")
	e := &eval.Eval[replay.Case, json.RawMessage]{Name: "online", Dataset: cases, Harness: replay.Harness(), Judge: refuses}
	_, err := e.Run(context.Background(), eval.Config{Log: log, Epochs: 2})
	require.NoError(t, err)

	out := filepath.Join(dir, "regressions.jsonl")
	code, _, stderr := cli("export", "-failures", "-format", "dataset", "-o", out, log)
	require.Zero(t, code, stderr)
	got := loadExport[replay.Case](t, out)
	require.Equal(t, cases[:1], got, "the failing case, whole: input, recorded output, trace and span IDs, time, attributes, tags")
	tid, sid := got[0].Input.OriginSpan()
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c/b7ad6b7169203331", tid+"/"+sid)
}

func TestExportFailuresKeepsTheLastRecordOfAnEpisode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	ctx := context.Background()
	rec := func(id string, epoch int, st sink.Status, kind sink.ErrorKind) sink.Record {
		return sink.Record{Schema: sink.SchemaVersion, RunID: "r", Eval: "e", SampleID: id, Epoch: epoch, Status: st, ErrorKind: kind,
			Input: json.RawMessage(`"` + id + `"`), StartedAt: time.Unix(0, 0).UTC()}
	}
	for _, r := range []sink.Record{
		rec("a", 0, sink.Error, sink.KindHarness), // retried on resume, then passed
		rec("b", 0, sink.Error, sink.KindHarness),
		rec("a", 0, sink.Pass, ""),
		rec("c", 0, sink.Unscored, sink.KindNotSampled), // left out of a subsample: not flagged
		rec("d", 0, sink.Unscored, sink.KindJudge),
	} {
		require.NoError(t, w.Write(ctx, r))
	}
	require.NoError(t, w.Close(ctx))
	out := filepath.Join(dir, "out.jsonl")
	code, _, stderr := cli("export", "-failures", "-status", "error,unscored", "-o", out, log)
	require.Zero(t, code, stderr)
	got := loadExport[string](t, out)
	require.Equal(t, []string{"b", "d"}, ids(got))
	require.Equal(t, `{"id":"b","input":"b","trace":""}`, readLines(t, out)[0], "no transcript, no link; the trace field is always there")
}

func TestExportFailuresNeverOverwritesOthersFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	runEval(t, log, 4)
	out := filepath.Join(dir, "out.jsonl")

	// Someone's own dataset (no trace field): never replaced.
	mine := `{"id":"x","input":1,"tags":{"a":"b"}}` + "\n"
	require.NoError(t, os.WriteFile(out, []byte(mine), 0o644))
	for _, args := range [][]string{{}, {"-force"}} {
		code, _, stderr := cli(append(append([]string{"export", "-failures", "-o", out}, args...), log)...)
		require.Equal(t, exitError, code)
		require.Contains(t, stderr, out)
		b, _ := os.ReadFile(out)
		require.Equal(t, mine, string(b), "untouched")
	}
	require.Equal(t, []string{"out.jsonl", "run.jsonl", "run.manifest.json", "run.traces.jsonl"}, dirNames(t, dir), "no temporary file left")

	// An earlier export: replaced with -force only.
	require.NoError(t, os.Remove(out))
	code, _, stderr := cli("export", "-failures", "-o", out, log)
	require.Zero(t, code, stderr)
	first, _ := os.ReadFile(out)
	code, _, stderr = cli("export", "-failures", "-o", out, log)
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "already exists (-force replaces an earlier export)")
	code, _, stderr = cli("export", "-failures", "-force", "-o", out, log)
	require.Zero(t, code, stderr)
	again, _ := os.ReadFile(out)
	require.Equal(t, string(first), string(again))

	// An empty file holds nothing to lose; a directory is never replaced.
	require.NoError(t, os.WriteFile(out, nil, 0o644))
	code, _, stderr = cli("export", "-failures", "-force", "-o", out, log)
	require.Zero(t, code, stderr)
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	code, _, stderr = cli("export", "-failures", "-force", "-o", sub, log)
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "not a regular file")

	// A log that fails to read leaves nothing behind.
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{\"schema\":1}\nnot json\n"), 0o644))
	code, _, _ = cli("export", "-failures", "-o", filepath.Join(dir, "fromBad.jsonl"), bad)
	require.Equal(t, exitError, code)
	require.NotContains(t, strings.Join(dirNames(t, dir), " "), "fromBad")
}

func dirNames(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestExportFailuresUsage(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-failures", log}, "-o OUT is required"},
		{[]string{"-failures", "-format", "parquet", "-o", "x", log}, `-format "parquet"`},
		{[]string{"-failures", "-parquet", "d", "-o", "x", log}, "do not go together"},
		{[]string{"-failures", "-status", "fail,bogus", "-o", "x", log}, `-status "bogus"`},
		{[]string{"-failures", "-status", "", "-o", "x", log}, "-status is empty"},
		{[]string{"-format", "dataset", "-o", "x", log}, "go with -failures"},
		{[]string{log}, "-parquet DIR (or -failures) is required"},
	} {
		code, _, stderr := cli(append([]string{"export"}, tc.args...)...)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.msg)
	}
	code, stdout, _ := cli("help", "export")
	require.Zero(t, code)
	require.Contains(t, stdout, "-failures")
	require.Contains(t, stdout, `{"id", "input", "tags", "trace"}`)
}
