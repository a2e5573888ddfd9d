package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/sink/parquetsink"
)

// runEval writes a log of 40 samples × 2 epochs where the agent is right
// unless the sample index is a multiple of wrongEvery.
func runEval(t *testing.T, path string, wrongEvery int) *report.Report {
	t.Helper()
	var d dataset.Slice[int]
	for i := range 40 {
		level := []string{"easy", "hard"}[i%2]
		d = append(d, dataset.Sample[int]{ID: fmt.Sprintf("s%02d", i), Input: i, Tags: map[string]string{"level": level}})
	}
	h := harness.Func[int, int](func(_ context.Context, ep *harness.Episode[int]) (int, error) {
		ep.AddEvent(harness.Event{Kind: "model", Name: "stand-in", Usage: harness.Usage{InputTokens: 7, OutputTokens: 1}})
		if ep.Sample.Input%wrongEvery == 0 {
			return -1, nil
		}
		return ep.Sample.Input, nil
	})
	j := judge.Func[int, int](func(_ context.Context, ep *harness.Episode[int], out int) (judge.Verdict, error) {
		if out == ep.Sample.Input {
			return judge.Pass("right"), nil
		}
		return judge.Fail(fmt.Sprintf("got %d", out)), nil
	})
	e := &eval.Eval[int, int]{Name: "cli", Dataset: d, Harness: h, Judge: j}
	rep, err := e.Run(context.Background(), eval.Config{Epochs: 2, Log: path})
	require.NoError(t, err)
	return rep
}

func cli(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestReportMatchesTheRun(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	want := runEval(t, log, 4)

	code, out, errs := cli("report", "-json", log)
	require.Zero(t, code, errs)
	var got report.Report
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, want.RunID, got.RunID)
	require.Equal(t, want.Passed, got.Passed)
	require.Equal(t, want.Failed, got.Failed)
	require.InDelta(t, want.PassRate, got.PassRate, 1e-12)
	require.InDelta(t, want.Interval.Lo, got.Interval.Lo, 1e-12)
	require.Equal(t, want.PassAtK, got.PassAtK)

	code, out, _ = cli("report", log)
	require.Zero(t, code)
	require.Contains(t, out, "pass rate")
	require.Contains(t, out, "by level")
	code, out, _ = cli("report", "-markdown", log)
	require.Zero(t, code)
	require.Contains(t, out, "| metric | value |")
}

func TestExportThenReportFromParquet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	runEval(t, log, 4)
	pq := filepath.Join(dir, "parquet")
	code, out, errs := cli("export", "-parquet", pq, log)
	require.Zero(t, code, errs)
	require.Contains(t, out, "exported 80 records")

	_, fromLog, _ := cli("report", "-json", log)
	code, fromParquet, errs := cli("report", "-json", pq)
	require.Zero(t, code, errs)
	var a, b report.Report
	require.NoError(t, json.Unmarshal([]byte(fromLog), &a))
	require.NoError(t, json.Unmarshal([]byte(fromParquet), &b))
	a.Latency, b.Latency = report.Latency{}, report.Latency{} // Parquet keeps µs
	require.Equal(t, a, b, "the same numbers from the log and from Parquet")
}

func TestCompareFailsOnRegression(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, same, worse := filepath.Join(dir, "base.jsonl"), filepath.Join(dir, "same.jsonl"), filepath.Join(dir, "worse.jsonl")
	runEval(t, base, 10)
	runEval(t, same, 10)
	runEval(t, worse, 2) // half the samples now fail

	code, out, errs := cli("compare", "-fail-on-regression", base, same)
	require.Zero(t, code, errs+out)
	code, out, _ = cli("compare", "-fail-on-regression", base, worse)
	require.Equal(t, exitRegression, code, out)
	require.Contains(t, out, "s02     100.0%  0.0%", "the flipped samples are listed")
	code, _, _ = cli("compare", base, worse)
	require.Zero(t, code, "without the flag, a regression is only reported")
	code, out, _ = cli("compare", "-json", base, worse)
	require.Zero(t, code)
	var c map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &c))
	require.Equal(t, true, c["regressed"])
}

func TestTracePrintsTheTranscript(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	runEval(t, log, 4)
	code, out, errs := cli("trace", log, "s04", "1")
	require.Zero(t, code, errs)
	require.Contains(t, out, "== s04 epoch 1")
	require.Contains(t, out, "fail")
	require.Contains(t, out, "reason: got -1")
	require.Contains(t, out, "model    stand-in")
	require.Equal(t, 1, strings.Count(out, "=="), "one epoch asked for")
	_, out, _ = cli("trace", log, "s04")
	require.Equal(t, 2, strings.Count(out, "== s04"), "every epoch without EPOCH")

	code, _, errs = cli("trace", log, "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errs, `no episode of sample "nope"`)
}

func TestClearErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	runEval(t, log, 4)

	code, _, errs := cli("report", filepath.Join(dir, "missing.jsonl"))
	require.Equal(t, 1, code)
	require.Contains(t, errs, "no such file")

	v2 := filepath.Join(dir, "v2.jsonl")
	r := sink.Record{Schema: 2, RunID: "r", SampleID: "s", Status: sink.Pass}
	require.NoError(t, os.WriteFile(v2, append(r.AppendJSON(nil), '\n'), 0o644))
	code, _, errs = cli("report", v2)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "record schema 2, this version of proctor reads schema 1")

	torn := filepath.Join(dir, "torn.jsonl")
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(torn, append(b, `{"schema":1,"run_id":"x","sam`...), 0o644))
	code, out, errs := cli("report", "-json", torn)
	require.Zero(t, code)
	require.Contains(t, errs, "torn tail")
	var rep report.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, 80, rep.Episodes, "the committed records are used")

	for _, args := range [][]string{{}, {"frobnicate"}, {"report"}, {"compare", log}, {"export", log}, {"trace", log, "s1", "x"}} {
		code, _, errs := cli(args...)
		require.Equal(t, 2, code, "%v: %s", args, errs)
		require.Contains(t, errs, "usage:")
	}
}

// TestHelpAndVersion: help asked for (-h, help, help CMD, CMD -h) goes to
// stdout with status 0; bad usage to stderr with status 2; version comes
// from the build information.
func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		code, out, errs := cli(args...)
		require.Zero(t, code, "%v: %s", args, errs)
		require.Contains(t, out, "usage: proctor <command>", args)
		require.Contains(t, out, "compare", args)
	}
	for _, name := range []string{"report", "compare", "export", "trace", "version"} {
		code, out, errs := cli("help", name)
		require.Zero(t, code, errs)
		require.Contains(t, out, "usage: proctor "+name, name)
		code, out2, errs := cli(name, "-h")
		require.Zero(t, code, errs)
		require.Equal(t, out, out2, "help %s and %s -h", name, name)
	}
	code, out, _ := cli("help", "export")
	require.Zero(t, code)
	require.Contains(t, out, "-force")
	code, _, errs := cli("help", "nope")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "unknown command")
	code, _, errs = cli("report", "-nope", "x.jsonl")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "flag provided but not defined: -nope")
	require.Contains(t, errs, "usage: proctor report")

	code, out, errs = cli("version")
	require.Zero(t, code, errs)
	require.True(t, strings.HasPrefix(out, "proctor "), out)
	require.Contains(t, out, runtime.Version())
	code, _, _ = cli("version", "extra")
	require.Equal(t, 2, code)
}

// TestReportSeveralLogs: one report per log, in order: under a heading in
// text, as a stream of JSON documents with -json.
func TestReportSeveralLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	ra, rb := runEval(t, a, 4), runEval(t, b, 2)

	code, out, errs := cli("report", a, b)
	require.Zero(t, code, errs)
	ia, ib := strings.Index(out, "== "+a), strings.Index(out, "== "+b)
	require.True(t, ia >= 0 && ib > ia, out)
	require.Equal(t, 2, strings.Count(out, "samples × epochs"), out)

	code, out, errs = cli("report", "-json", a, b)
	require.Zero(t, code, errs)
	dec := json.NewDecoder(strings.NewReader(out))
	for _, want := range []*report.Report{ra, rb} {
		var got report.Report
		require.NoError(t, dec.Decode(&got))
		require.Equal(t, want.RunID, got.RunID)
		require.Equal(t, want.Passed, got.Passed)
	}
	require.False(t, dec.More())

	code, _, errs = cli("report", a, filepath.Join(dir, "missing.jsonl"))
	require.Equal(t, 1, code)
	require.Contains(t, errs, "missing.jsonl")
}

// TestCompareNothingPaired: runs with no sample in common cannot pass or
// fail a gate: -fail-on-regression exits 1 and says why; without it the
// comparison is printed with a warning. It exited 3 ("regression") before,
// without saying why.
func TestCompareNothingPaired(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, other := filepath.Join(dir, "base.jsonl"), filepath.Join(dir, "other.jsonl")
	runEval(t, base, 10)
	b, err := os.ReadFile(base)
	require.NoError(t, err)
	b = bytes.ReplaceAll(b, []byte(`"sample_id":"s`), []byte(`"sample_id":"t`))
	require.NoError(t, os.WriteFile(other, b, 0o644))

	code, out, errs := cli("compare", "-fail-on-regression", base, other)
	require.Equal(t, 1, code, out)
	require.Contains(t, errs, "nothing to compare: 0 samples scored in both runs")
	require.Contains(t, errs, "-fail-on-regression cannot decide")
	code, _, errs = cli("compare", base, other)
	require.Zero(t, code)
	require.Contains(t, errs, "warning: nothing to compare")
}

// TestExportIsAtomic: export never leaves a partial output, never
// overwrites one without -force, and -force replaces only an earlier
// export. It failed before: a corrupt log left a partial directory, and an
// existing output was written into.
func TestExportIsAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	runEval(t, log, 4)
	out := filepath.Join(dir, "out")
	entries := func() []string {
		es, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}
	before := entries()

	// A log with a corrupt line in the middle: an error, nothing written.
	corrupt := filepath.Join(dir, "corrupt.jsonl")
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := bytes.SplitAfter(b, []byte("\n"))
	bad := append(append(append([]byte(nil), bytes.Join(lines[:50], nil)...), "{not json}\n"...), bytes.Join(lines[50:], nil)...)
	require.NoError(t, os.WriteFile(corrupt, bad, 0o644))
	code, _, errs := cli("export", "-parquet", out, corrupt)
	require.Equal(t, 1, code, errs)
	require.NoDirExists(t, out)
	require.ElementsMatch(t, append(before, "corrupt.jsonl"), entries(), "no temporary directory left")
	require.NoError(t, os.Remove(corrupt))

	code, _, errs = cli("export", "-parquet", out, log)
	require.Zero(t, code, errs)
	first, err := parquetsink.Files(out)
	require.NoError(t, err)
	require.Len(t, first, 1)
	st, err := os.Stat(out)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), st.Mode().Perm())

	// An existing output: refused without -force, untouched.
	code, _, errs = cli("export", "-parquet", out, log)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "already exists (-force")
	code, stdout, errs := cli("export", "-force", "-parquet", out, log)
	require.Zero(t, code, errs)
	require.Contains(t, stdout, "exported 80 records")
	n := 0
	for _, err := range parquetsink.Records(out) {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 80, n, "replaced, not appended to")
	require.ElementsMatch(t, append(before, "out"), entries())

	// -force never replaces a directory holding anything but part files.
	mine := filepath.Join(dir, "mine")
	require.NoError(t, os.MkdirAll(mine, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mine, "notes.txt"), []byte("mine"), 0o644))
	code, _, errs = cli("export", "-force", "-parquet", mine, log)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "notes.txt")
	got, err := os.ReadFile(filepath.Join(mine, "notes.txt"))
	require.NoError(t, err)
	require.Equal(t, "mine", string(got))
	code, _, _ = cli("export", "-force", "-parquet", log, log)
	require.Equal(t, 1, code, "a file is never replaced")
}

// TestTraceLink: a record's transcript link (relative to the log's directory)
// resolves against the log's directory when given with the log, against
// the current directory when given alone, and from anywhere after the runs
// directory moved.
func TestTraceLink(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "runs", "run.jsonl")
	runEval(t, log, 4)
	var link string
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		if r.SampleID == "s04" && r.Epoch == 1 {
			link = r.Transcript
		}
	}
	require.NotEmpty(t, link)
	require.False(t, filepath.IsAbs(link), link)

	moved := filepath.Join(dir, "moved")
	require.NoError(t, os.Rename(filepath.Join(dir, "runs"), moved))
	log = filepath.Join(moved, "run.jsonl")

	code, out, errs := cli("trace", log, link)
	require.Zero(t, code, errs)
	require.Contains(t, out, "== s04 epoch 1")
	require.Contains(t, out, "reason: got -1", "the record found by its link")
	require.Contains(t, out, "model    stand-in")

	t.Chdir(moved)
	code, out, errs = cli("trace", link)
	require.Zero(t, code, errs)
	require.Contains(t, out, "== s04 epoch 1")
	require.Contains(t, out, "model    stand-in")
	code, out, errs = cli("trace", "-json", link)
	require.Zero(t, code, errs)
	var v struct {
		Trace struct {
			SampleID string `json:"sample_id"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	require.Equal(t, "s04", v.Trace.SampleID)

	code, _, errs = cli("trace", "run.traces.jsonl#notanumber")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "not a transcript link")
	code, _, errs = cli("trace", "elsewhere.jsonl#0")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "elsewhere.jsonl")
}

// The version names the module version, the revision (12 digits, marked
// when the tree was modified) and its time when the build recorded them;
// a development build without them says why.
func TestBuildVersion(t *testing.T) {
	t.Parallel()
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "60e07ef29ecbd539fa22c81ee7e913128ac0dbfe"},
		{Key: "vcs.time", Value: "2026-11-23T18:34:05Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		main     string
		settings []debug.BuildSetting
		want     string
	}{
		{"v0.0.0-20261123183405-60e07ef29ecb+dirty", vcs, "proctor v0.0.0-20261123183405-60e07ef29ecb+dirty 60e07ef29ecb+modified 2026-11-23T18:34:05Z go1.26.8"},
		{"(devel)", vcs[:3], "proctor (devel) 60e07ef29ecb 2026-11-23T18:34:05Z go1.26.8"},
		{"v1.2.3", nil, "proctor v1.2.3 go1.26.8"},
		{"(devel)", nil, "proctor (devel) go1.26.8 (no VCS revision recorded: build with 'go build' or 'go install' in a git checkout"},
	} {
		got := buildVersion(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/proctor-evals/proctor", Version: tc.main}, Settings: tc.settings})
		require.True(t, strings.HasPrefix(got, tc.want), "got %q, want %q", got, tc.want)
	}
}

func TestCompareSameAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	runEval(t, a, 3)
	runEval(t, b, 3)
	code, out, errs := cli("compare", a, b)
	require.Zero(t, code, errs)
	require.Contains(t, out, "from the spread of each sample across epochs")
	code, out, errs = cli("compare", "-same-agent", a, b)
	require.Zero(t, code, errs)
	require.Contains(t, out, "from the spread of each sample across both runs, taken as runs of one agent")
	code, out, _ = cli("compare", "-same-agent", "-json", a, b)
	require.Zero(t, code)
	var c map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &c))
	require.Equal(t, true, c["same_agent"])
}
