package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/history/catalog"
	"github.com/proctor-evals/proctor/judge"
)

// nightly runs the eval "nightly" over 300 samples, one epoch, as the
// given harness version, writing runs/NAME.jsonl; the agent is wrong on
// the samples whose index is below wrong, and records a transcript.
func nightly(t *testing.T, dir, name string, wrong int, harnessVersion string) string {
	t.Helper()
	log := filepath.Join(dir, name+".jsonl")
	nightlyRun(t, nightlyEval(wrong, 300, harnessVersion), eval.Config{Log: log, RunID: name, Quiet: true})
	return log
}

// nightlyEval is nightly's eval; its judge gives no verdict (unscored) on
// the samples whose index is at or above unscoredFrom.
func nightlyEval(wrong, unscoredFrom int, harnessVersion string) *eval.Eval[int, int] {
	var d dataset.Slice[int]
	for i := range 300 {
		d = append(d, dataset.Sample[int]{ID: fmt.Sprintf("s%03d", i), Input: i, Tags: map[string]string{"level": []string{"easy", "hard"}[i%2]}})
	}
	h := harness.Func[int, int](func(_ context.Context, ep *harness.Episode[int]) (int, error) {
		ep.AddEvent(harness.Event{Kind: "model", Name: "stand-in", Usage: harness.Usage{InputTokens: 7, OutputTokens: 1, CostUSD: 0.001}})
		if ep.Sample.Input < wrong {
			return -1, nil
		}
		return ep.Sample.Input, nil
	})
	j := judge.Func[int, int](func(_ context.Context, ep *harness.Episode[int], out int) (judge.Verdict, error) {
		switch {
		case ep.Sample.Input >= unscoredFrom:
			return judge.Verdict{}, judge.Unscored("the grader's reply did not parse")
		case out == ep.Sample.Input:
			return judge.Pass("right"), nil
		}
		return judge.Fail("wrong"), nil
	})
	return &eval.Eval[int, int]{Name: "nightly", Dataset: d, Harness: h, Judge: j, Versions: eval.Versions{Harness: harnessVersion, Judge: "j1"}}
}

func nightlyRun(t *testing.T, e *eval.Eval[int, int], cfg eval.Config) {
	t.Helper()
	_, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
}

func TestHistoryPrintsTrendsAndFailsOnDrift(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nightly(t, dir, "mon", 30, "h1")
	nightly(t, dir, "tue", 33, "h1")

	code, out, errOut := cli("history", "-tag", "level", "-fail-on-drift", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "nightly: 2 runs")
	require.Contains(t, out, "90.0%")
	require.Contains(t, out, "easy 90.0%  hard 90.0%")
	require.Contains(t, out, "no drift nightly: run tue against baseline mon over 300 shared samples: -1.0 pts")
	require.FileExists(t, filepath.Join(dir, catalog.Dir, catalog.RunsFile))

	// Wednesday the provider changed something: 60 more samples fail with
	// the same harness and judge.
	nightly(t, dir, "wed", 93, "h1")
	code, out, errOut = cli("history", "-fail-on-drift", dir)
	require.Equal(t, exitDrift, code, out+errOut)
	require.Contains(t, out, "DRIFT nightly: run wed against baseline tue")
	require.Contains(t, out, "drift outside the agent")

	// A new harness version: the change is the agent's, and is marked.
	nightly(t, dir, "thu", 0, "h2")
	code, out, _ = cli("history", dir)
	require.Equal(t, 0, code, "without -fail-on-drift a drift is printed, not an exit status")
	require.Contains(t, out, "DRIFT nightly: run thu against baseline wed")
	t.Log(out)
	require.Contains(t, out, `the agent changed: harness "h1" → "h2"`)
	thu := out[strings.Index(out, " thu "):]
	require.Contains(t, thu[:strings.IndexByte(thu, '\n')], "harness")

	// A pinned baseline: Thursday against Monday.
	_, out, _ = cli("history", "-baseline", "mon", dir)
	require.Contains(t, out, "run thu against baseline mon")

	// The last two runs, each against its previous one.
	_, out, _ = cli("history", "-last", "2", dir)
	require.Contains(t, out, "run wed against baseline tue")
	require.Contains(t, out, "run thu against baseline wed")
}

func TestHistoryUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, _, errOut := cli("history")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "want a runs DIR")
	code, _, errOut = cli("history", "-alpha", "2", dir)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "-alpha")
	code, _, errOut = cli("history", "-eval", "none", dir)
	require.Equal(t, exitError, code)
	require.Contains(t, errOut, `no runs of eval "none"`)
	code, _, errOut = cli("history", filepath.Join(dir, "missing"))
	require.Equal(t, exitError, code)
	require.Contains(t, errOut, "missing")
	_, err := os.Stat(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing created")
}

// TestHistoryReadsAReadOnlyDirectory: history failed on a runs directory
// it may not write (it only reads: the catalog is a cache), and listed an
// empty .jsonl as a run named "" of year 1. Now it prints the runs and
// warns that the catalog was not saved; an empty file is no run.
func TestHistoryReadsAReadOnlyDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nightly(t, dir, "mon", 30, "h1")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty.jsonl"), nil, 0o644))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755)) // t.TempDir's are the owner's alone
	require.NoError(t, os.Chmod(dir, 0o555))
	t.Cleanup(func() { os.Chmod(dir, 0o755) })

	code, out, errOut := asAnotherUser(t, func() (int, string, string) { return cli("history", dir) })
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "nightly: 1 runs")
	require.NotContains(t, out, "0001-01-01")
	require.NotContains(t, out, ": 1 runs\n\n") // no second eval
	require.Contains(t, errOut, "the catalog was not saved")
	require.NoDirExists(t, filepath.Join(dir, catalog.Dir))
}

// asAnotherUser runs f with the file system permissions of an ordinary
// user (fsuid 65534, on this goroutine's thread alone), so that a test run
// as root sees a read-only directory as others do.
func asAnotherUser(t *testing.T, f func() (int, string, string)) (int, string, string) {
	if os.Geteuid() != 0 {
		return f()
	}
	var code int
	var out, errOut string
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // not unlocked: the thread ends with this goroutine
		syscall.Setfsuid(65534)
		code, out, errOut = f()
	}()
	<-done
	return code, out, errOut
}

// TestHistoryTellsTheWorstCaseAndABrokenJudge: history's table, its drift
// check and its cause left out errored and unscored episodes: a run whose
// grader broke on a third of the samples showed a better pass rate than
// its baseline and "drift outside the agent". Now the table shows the
// worst case, the check is on it (a drop), and the cause names the judge.
func TestHistoryTellsTheWorstCaseAndABrokenJudge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nightly(t, dir, "mon", 30, "h1")
	nightlyRun(t, nightlyEval(30, 200, "h1"), eval.Config{Log: filepath.Join(dir, "tue.jsonl"), RunID: "tue", Quiet: true})

	code, out, errOut := cli("history", "-fail-on-drift", dir)
	require.Equal(t, exitDrift, code, out+errOut)
	require.Contains(t, out, "85.0% (worst case 56.7%–90.0%)", "tue: 170 of 200 scored, 100 unscored")
	require.Contains(t, out, "DRIFT nightly: run tue against baseline mon over 300 shared samples in the worst case")
	require.Contains(t, out, "a stage broke: judge gave no verdict on 100 more episodes than the baseline (the grader's reply did not parse)")
	require.NotContains(t, out, "drift outside the agent")
}

// TestHistoryFailsOnTheDriftAsked: -fail-on-drift exited 4 on an
// improvement and on the agent's own new version. Now it fails on a drop
// (alone or =drop), on drift outside the agent (=outside) or on any
// change (=any).
func TestHistoryFailsOnTheDriftAsked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nightly(t, dir, "mon", 90, "h1")
	nightly(t, dir, "tue", 30, "h2") // a new agent, better
	for _, c := range []struct {
		flag string
		want int
	}{{"-fail-on-drift", 0}, {"-fail-on-drift=drop", 0}, {"-fail-on-drift=outside", 0}, {"-fail-on-drift=any", exitDrift}} {
		code, out, errOut := cli("history", c.flag, dir)
		require.Equal(t, c.want, code, "%s: %s", c.flag, out+errOut)
		require.Contains(t, out, "DRIFT nightly: run tue")
	}
	nightly(t, dir, "wed", 0, "h2") // better again, the agent unchanged: outside
	code, _, _ := cli("history", "-fail-on-drift=outside", dir)
	require.Equal(t, exitDrift, code)
	code, _, _ = cli("history", "-fail-on-drift", dir)
	require.Equal(t, 0, code, "an improvement is no drop")
	code, _, errOut := cli("history", "-fail-on-drift=sideways", dir)
	require.Equal(t, exitUsage, code, errOut)
}

// TestHistoryJoinsTheShardsOfARun: each shard log was compared with the
// other shard of its own run ("no drift … over 0 shared samples"), and
// two runs' shards had one derived run ID, so -baseline could not tell
// them apart. Now a run's shard logs are one run, and runs sharing an ID
// are told apart by their start.
func TestHistoryJoinsTheShardsOfARun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, wrong := range []int{30, 120} { // the second run is 30 points worse
		for shard := range 2 {
			log := filepath.Join(dir, fmt.Sprintf("run%d-shard%d.jsonl", i, shard))
			nightlyRun(t, nightlyEval(wrong, 300, "h1"), eval.Config{Log: log, Quiet: true, Shard: eval.Shard{Index: shard, Count: 2}})
		}
	}
	code, out, errOut := cli("history", "-fail-on-drift", dir)
	require.Equal(t, exitDrift, code, out+errOut)
	require.Contains(t, out, "nightly: 2 runs")
	require.Contains(t, out, "(2 shards)")
	require.Regexp(t, `DRIFT nightly: run \S+@\S+ against baseline \S+@\S+ over 300 shared samples: -30\.0 pts`, out)

	first := ""
	for _, f := range strings.Fields(out) {
		if strings.Contains(f, "@") {
			first = f // the first run's ID, as the table lists it
			break
		}
	}
	require.NotEmpty(t, first, out)
	_, out, _ = cli("history", "-baseline", first, dir)
	require.Contains(t, out, "against baseline "+first)
}
