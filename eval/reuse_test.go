package eval_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/distrib"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// calls counts what an eval's harness and judge were asked to do, by
// episode, so that a test says exactly which episodes ran.
type calls struct {
	mu             sync.Mutex
	harness, judge map[sink.Key]int
}

func (c *calls) add(m *map[sink.Key]int, id string, epoch int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *m == nil {
		*m = map[sink.Key]int{}
	}
	(*m)[sink.Key{SampleID: id, Epoch: epoch}]++
}

func (c *calls) reset() (h, j map[sink.Key]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, j = c.harness, c.judge
	c.harness, c.judge = nil, nil
	return h, j
}

// keys lists the episodes of the named samples over epochs [from, to).
func keys(from, to int, ids ...string) map[sink.Key]int {
	if len(ids) == 0 {
		return nil
	}
	m := map[sink.Key]int{}
	for _, id := range ids {
		for ep := from; ep < to; ep++ {
			m[sink.Key{SampleID: id, Epoch: ep}] = 1
		}
	}
	return m
}

// reuseEval is a stochastic agent (its answer depends on the episode's
// seed, so epochs differ) with a transcript and a cost per episode.
func reuseEval(c *calls, inputs ...string) *eval.Eval[string, string] {
	var d dataset.Slice[string]
	for i, in := range inputs {
		d = append(d, dataset.Sample[string]{ID: "s" + strconv.Itoa(i), Input: in, Tags: map[string]string{"kind": in}})
	}
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		c.add(&c.harness, ep.Sample.ID, ep.Epoch)
		ep.AddEvent(harness.Event{Kind: "model", Name: "agent", Usage: harness.Usage{InputTokens: 10, CostUSD: 0.25}})
		return ep.Sample.Input + "/" + strconv.FormatUint(ep.Seed%3, 10), nil
	})
	j := judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
		c.add(&c.judge, ep.Sample.ID, ep.Epoch)
		return judge.Verdict{Pass: !strings.HasSuffix(out, "/0"), Reason: "seed-driven"}, nil
	})
	return &eval.Eval[string, string]{Name: "reuse", Dataset: d, Harness: h, Judge: j,
		Versions: eval.Versions{Harness: "h1", Judge: "j1", Sandbox: "sb1"}}
}

// TestReuseRunsOrRejudgesExactlyWhatEachKeyPartChanges changes each part
// of the key of an earlier run's results in turn, and checks which
// episodes the harness and the judge then see: a changed judge version
// judges every recorded output again without the agent; any other change
// runs what it touches, and nothing else.
func TestReuseRunsOrRejudgesExactlyWhatEachKeyPartChanges(t *testing.T) {
	t.Parallel()
	all := []string{"s0", "s1", "s2", "s3"}
	cases := []struct {
		name   string
		change func(e *eval.Eval[string, string], cfg *eval.Config)
		// the episodes the harness and the judge must see
		harness, judge map[sink.Key]int
		reused         int
		rejudged       int
		warning        string
	}{
		{name: "nothing", reused: 8},
		{name: "eval name", change: func(e *eval.Eval[string, string], _ *eval.Config) { e.Name = "reuse2" },
			harness: keys(0, 2, all...), judge: keys(0, 2, all...), warning: `a run of eval "reuse", not "reuse2"`},
		{name: "one sample's input", change: func(e *eval.Eval[string, string], _ *eval.Config) {
			d := slicesClone(e.Dataset.(dataset.Slice[string]))
			d[1].Input = "changed"
			e.Dataset = d
		}, harness: keys(0, 2, "s1"), judge: keys(0, 2, "s1"), reused: 6},
		{name: "one sample's ID", change: func(e *eval.Eval[string, string], _ *eval.Config) {
			d := slicesClone(e.Dataset.(dataset.Slice[string]))
			d[2].ID = "s2-renamed"
			e.Dataset = d
		}, harness: keys(0, 2, "s2-renamed"), judge: keys(0, 2, "s2-renamed"), reused: 6},
		{name: "more epochs", change: func(_ *eval.Eval[string, string], cfg *eval.Config) { cfg.Epochs = 3 },
			harness: keys(2, 3, all...), judge: keys(2, 3, all...), reused: 8},
		{name: "fewer epochs", change: func(_ *eval.Eval[string, string], cfg *eval.Config) { cfg.Epochs = 1 }, reused: 4},
		{name: "seed", change: func(_ *eval.Eval[string, string], cfg *eval.Config) { cfg.Seed = 8 },
			harness: keys(0, 2, all...), judge: keys(0, 2, all...)},
		{name: "harness version", change: func(e *eval.Eval[string, string], _ *eval.Config) { e.Versions.Harness = "h2" },
			harness: keys(0, 2, all...), judge: keys(0, 2, all...), warning: `harness version "h1" there, "h2" now`},
		{name: "sandbox version", change: func(e *eval.Eval[string, string], _ *eval.Config) { e.Versions.Sandbox = "sb2" },
			harness: keys(0, 2, all...), judge: keys(0, 2, all...), warning: `sandbox version "sb1" there, "sb2" now`},
		{name: "judge version", change: func(e *eval.Eval[string, string], _ *eval.Config) { e.Versions.Judge = "j2" },
			judge: keys(0, 2, all...), rejudged: 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			c := &calls{}
			e := reuseEval(c, "a", "b", "c", "d")
			base := filepath.Join(dir, "base.jsonl")
			first, err := e.Run(context.Background(), eval.Config{Epochs: 2, Seed: 7, Log: base})
			require.NoError(t, err)
			c.reset()

			cfg := eval.Config{Epochs: 2, Seed: 7, Log: filepath.Join(dir, "new.jsonl"), ReuseFrom: []string{base}}
			if tc.change != nil {
				tc.change(e, &cfg)
			}
			rep, err := e.Run(context.Background(), cfg)
			require.NoError(t, err)
			h, j := c.reset()
			require.Empty(t, cmp.Diff(tc.harness, h), "harness calls (-want +got)")
			require.Empty(t, cmp.Diff(tc.judge, j), "judge calls (-want +got)")
			require.Equal(t, tc.reused, rep.Reused)
			require.Equal(t, tc.rejudged, rep.Rejudged)
			if tc.warning != "" {
				require.Contains(t, strings.Join(rep.Warnings, "\n"), tc.warning)
			}

			recs := logRecords(t, cfg.Log)
			requireExactlyOnce(t, recs, 4, cfg.Epochs)
			reused, rejudged := 0, 0
			for _, r := range recs {
				require.Equal(t, rep.RunID, r.RunID)
				if r.ReusedFrom != "" {
					reused++
					require.Equal(t, first.RunID, r.ReusedFrom)
				}
				if r.ParentRunID != "" {
					rejudged++
					require.Equal(t, first.RunID, r.ParentRunID)
					require.Empty(t, r.ReusedFrom)
				}
			}
			require.Equal(t, tc.reused, reused)
			require.Equal(t, tc.rejudged, rejudged)
		})
	}
}

func slicesClone[T any](d dataset.Slice[T]) dataset.Slice[T] {
	return append(dataset.Slice[T](nil), d...)
}

// TestFullyReusedRunKeepsEpochsAndPassAtK: a reused run is the earlier
// run, episode for episode: each (sample, epoch) keeps its own outcome,
// and the statistics over epochs are unchanged.
func TestFullyReusedRunKeepsEpochsAndPassAtK(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := &calls{}
	e := reuseEval(c, "a", "b", "c", "d", "e", "f", "g", "h")
	base := filepath.Join(dir, "base.jsonl")
	first, err := e.Run(context.Background(), eval.Config{Epochs: 4, Seed: 3, Log: base})
	require.NoError(t, err)
	require.Greater(t, first.Failed, 0, "the agent is stochastic: some epochs fail")
	require.Greater(t, first.Passed, 0)
	c.reset()

	// The new run's log lives in another directory: its transcript links must
	// resolve from there.
	log := filepath.Join(dir, "elsewhere", "new.jsonl")
	rep, err := e.Run(context.Background(), eval.Config{Epochs: 4, Seed: 3, Log: log, ReuseFrom: []string{base}})
	require.NoError(t, err)
	h, j := c.reset()
	require.Empty(t, h)
	require.Empty(t, j)
	require.Equal(t, 32, rep.Reused)
	require.Equal(t, first.PassAtK, rep.PassAtK)
	require.Equal(t, first.PassHatK, rep.PassHatK)
	require.Equal(t, first.Interval, rep.Interval)
	require.Equal(t, []int{first.Passed, first.Failed}, []int{rep.Passed, rep.Failed})
	require.Equal(t, first.Usage, rep.Usage, "records keep what their results cost")
	require.Equal(t, first.Usage, rep.ReusedUsage, "and say it was spent before")
	require.Contains(t, rep.String(), "32 episodes (earlier results reused")
	require.Contains(t, rep.String(), "this run spent $0.00\n")

	old := map[sink.Key]sink.Record{}
	for _, r := range logRecords(t, base) {
		old[r.Key()] = r
	}
	for _, r := range logRecords(t, log) {
		o := old[r.Key()]
		require.Equal(t, o.Status, r.Status, "%v keeps its own outcome", r.Key())
		require.Equal(t, o.Seed, r.Seed)
		require.Equal(t, o.DurationMS, r.DurationMS)
		tr, err := eval.ReadTranscript(r.Transcript, filepath.Dir(log))
		require.NoError(t, err, "the copied transcript resolves from the new log")
		otr, err := eval.ReadTranscript(o.Transcript, dir)
		require.NoError(t, err)
		require.Equal(t, otr, tr)
		require.NotEqual(t, o.Transcript, r.Transcript)
	}
	// The report read back from the log is the run's.
	fromLog := reportOf(t, log)
	require.Equal(t, rep.Reused, fromLog.Reused)
	require.Equal(t, rep.ReusedUsage, fromLog.ReusedUsage)

	// Running again with the same log resumes it: the reused records are
	// the run's, nothing is reused twice.
	rep, err = e.Run(context.Background(), eval.Config{Epochs: 4, Seed: 3, Log: log, ReuseFrom: []string{base}})
	require.NoError(t, err)
	h, j = c.reset()
	require.Empty(t, h)
	require.Empty(t, j)
	require.Equal(t, []int{32, 32}, []int{rep.Resumed, rep.Reused})
	requireExactlyOnce(t, logRecords(t, log), 8, 4)

	// Reusing a reused run names the run that produced the results.
	again := filepath.Join(dir, "again.jsonl")
	_, err = e.Run(context.Background(), eval.Config{Epochs: 4, Seed: 3, Log: again, ReuseFrom: []string{log}})
	require.NoError(t, err)
	for _, r := range logRecords(t, again) {
		require.Equal(t, first.RunID, r.ReusedFrom)
	}
}

// TestReuseTakesOnlyFinalResults: an error runs again, as on resume; a
// judge error with a recorded output has only its judge run again.
func TestReuseTakesOnlyFinalResults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := &calls{}
	e := reuseEval(c, "a", "crash", "grader-down", "d")
	inner, innerJudge := e.Harness, e.Judge
	broken := true
	e.Harness = harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		if broken && ep.Sample.Input == "crash" {
			return "", errors.New("sandbox died")
		}
		return inner.Run(ctx, ep)
	})
	e.Judge = judge.Func[string, string](func(ctx context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
		if broken && ep.Sample.Input == "grader-down" {
			return judge.Verdict{}, errors.New("grader: 503")
		}
		return innerJudge.Judge(ctx, ep, out)
	})
	base := filepath.Join(dir, "base.jsonl")
	first, err := e.Run(context.Background(), eval.Config{Epochs: 2, Retries: -1, Log: base})
	require.NoError(t, err)
	require.Equal(t, 4, first.Errored)
	c.reset()

	broken = false
	rep, err := e.Run(context.Background(), eval.Config{Epochs: 2, Log: filepath.Join(dir, "new.jsonl"), ReuseFrom: []string{base}})
	require.NoError(t, err)
	h, j := c.reset()
	require.Empty(t, cmp.Diff(keys(0, 2, "s1"), h), "the errored episodes run again")
	want := keys(0, 2, "s1", "s2")
	require.Empty(t, cmp.Diff(want, j), "the judge errors are judged again, on their outputs")
	require.Equal(t, []int{4, 2, 0}, []int{rep.Reused, rep.Rejudged, rep.Errored})
}

// TestReuseWithSandboxesRunsWhatAJudgeChangeTouches: with sandboxes, a
// judge may read the world the harness left, which no log keeps: a judge
// change runs the episodes whole, and says why.
func TestReuseWithSandboxesRunsWhatAJudgeChangeTouches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := &calls{}
	e := reuseEval(c, "a", "b")
	fake := &sandboxtest.Fake{}
	base := filepath.Join(dir, "base.jsonl")
	_, err := e.Run(context.Background(), eval.Config{Log: base, Sandbox: fake.Provider()})
	require.NoError(t, err)
	c.reset()

	e.Versions.Judge = "j2"
	rep, err := e.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "new.jsonl"), Sandbox: fake.Provider(), ReuseFrom: []string{base}})
	require.NoError(t, err)
	h, _ := c.reset()
	require.Len(t, h, 2)
	require.Zero(t, rep.Rejudged)
	require.Contains(t, strings.Join(rep.Warnings, "\n"), "a judge may need the world the harness left")

	// The judge unchanged, results are reused with sandboxes too.
	e.Versions.Judge = "j1"
	rep, err = e.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "third.jsonl"), Sandbox: fake.Provider(), ReuseFrom: []string{base}})
	require.NoError(t, err)
	h, j := c.reset()
	require.Empty(t, h)
	require.Empty(t, j)
	require.Equal(t, 2, rep.Reused)
}

// TestReuseAcrossShardsAndMergedLogs: the shards of a run, named one by
// one or merged into one log, serve a run on one machine; and a shard
// takes from a whole run only its own samples.
func TestReuseAcrossShardsAndMergedLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := &calls{}
	inputs := make([]string, 20)
	for i := range inputs {
		inputs[i] = "q" + strconv.Itoa(i)
	}
	e := reuseEval(c, inputs...)
	var shards []string
	for i := range 2 {
		log := filepath.Join(dir, "shard"+strconv.Itoa(i)+".jsonl")
		_, err := e.Run(context.Background(), eval.Config{Epochs: 2, Log: log, Shard: eval.Shard{Index: i, Count: 2}})
		require.NoError(t, err)
		shards = append(shards, log)
	}
	c.reset()

	rep, err := e.Run(context.Background(), eval.Config{Epochs: 2, Log: filepath.Join(dir, "whole.jsonl"), ReuseFrom: shards})
	require.NoError(t, err)
	h, j := c.reset()
	require.Empty(t, h)
	require.Empty(t, j)
	require.Equal(t, 40, rep.Reused)

	merged := filepath.Join(dir, "merged.jsonl")
	_, err = jsonl.Merge(merged, shards, nil)
	require.NoError(t, err)
	// As `proctor merge` does: the merged log's manifest is the shards',
	// without a shard.
	m, err := manifest.Read(shards[0])
	require.NoError(t, err)
	m.Shard = ""
	require.NoError(t, manifest.Write(merged, m))
	rep, err = e.Run(context.Background(), eval.Config{Epochs: 2, Log: filepath.Join(dir, "from-merged.jsonl"), ReuseFrom: []string{merged}})
	require.NoError(t, err)
	require.Equal(t, 40, rep.Reused, "warnings: %v", rep.Warnings)
	h, _ = c.reset()
	require.Empty(t, h)

	// A shard of a new run (3 shards now) reuses its part of the whole run.
	rep, err = e.Run(context.Background(), eval.Config{Epochs: 2, Log: filepath.Join(dir, "new-shard.jsonl"),
		Shard: eval.Shard{Index: 1, Count: 3}, ReuseFrom: []string{merged}})
	require.NoError(t, err)
	h, _ = c.reset()
	require.Empty(t, h)
	mine := 0
	for i := range inputs {
		if eval.InShard("s"+strconv.Itoa(i), eval.Shard{Index: 1, Count: 3}) {
			mine++
		}
	}
	require.Equal(t, 2*mine, rep.Reused)
	require.Equal(t, 2*mine, rep.Episodes)
}

// TestReuseReadsALogInUse: the logs are the store, read without a lock:
// a run still writing its log serves what it has committed.
func TestReuseReadsALogInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := &calls{}
	e := reuseEval(c, "a", "b", "c", "slow")
	inner := e.Harness
	release := make(chan struct{})
	e.Harness = harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		if ep.Sample.Input == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return inner.Run(ctx, ep)
	})
	base := filepath.Join(dir, "base.jsonl")
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(context.Background(), eval.Config{Log: base, Concurrency: 4})
		done <- err
	}()
	// The group commit writes within 200 ms; wait for the three records.
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(base)
		return strings.Count(string(b), "\n") == 3
	}, 10*time.Second, 10*time.Millisecond)

	c.reset()
	fast := *e
	fast.Harness = inner
	rep, err := fast.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "new.jsonl"), ReuseFrom: []string{base}, Concurrency: 4})
	require.NoError(t, err)
	h, _ := c.reset()
	require.Empty(t, cmp.Diff(keys(0, 1, "s3"), h), "only the episode the log has not committed runs")
	require.Equal(t, 3, rep.Reused)
	close(release)
	require.NoError(t, <-done)
	require.Len(t, logRecords(t, base), 4)
}

// TestReuseRefusesWhatItCannotCheck: the run's own log is an error; a log
// without a manifest (its versions unknown) reuses nothing, and says so.
func TestReuseRefusesWhatItCannotCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := &calls{}
	e := reuseEval(c, "a", "b")
	log := filepath.Join(dir, "run.jsonl")
	_, err := e.Run(context.Background(), eval.Config{Log: log})
	require.NoError(t, err)

	_, err = e.Run(context.Background(), eval.Config{Log: log, ReuseFrom: []string{log}})
	var ce *eval.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Contains(t, err.Error(), "own log")

	require.NoError(t, os.Remove(manifest.Path(log)))
	c.reset()
	rep, err := e.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "new.jsonl"), ReuseFrom: []string{log}})
	require.NoError(t, err)
	h, _ := c.reset()
	require.Len(t, h, 2)
	require.Contains(t, strings.Join(rep.Warnings, "\n"), "has no manifest")

	_, err = e.Run(context.Background(), eval.Config{ReuseFrom: []string{filepath.Join(dir, "missing.jsonl")}})
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = e.Run(context.Background(), eval.Config{ReuseFrom: []string{""}})
	require.ErrorAs(t, err, &ce)
}

// TestRejudgedTranscriptsLinkToTheOriginal: an episode judged again
// records the new judge's work and a link that resolves to the agent's
// transcript in the earlier run.
func TestRejudgedTranscriptsLinkToTheOriginal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := &calls{}
	e := reuseEval(c, "a")
	base := filepath.Join(dir, "base.jsonl")
	first, err := e.Run(context.Background(), eval.Config{Log: base})
	require.NoError(t, err)
	e.Versions.Judge = "j2"
	log := filepath.Join(dir, "sub", "new.jsonl")
	rep, err := e.Run(context.Background(), eval.Config{Log: log, ReuseFrom: []string{base}})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Rejudged)
	require.Zero(t, rep.Usage.CostUSD, "the agent's cost is not spent again")
	r := logRecords(t, log)[0]
	tr, err := eval.ReadTranscript(r.Transcript, filepath.Dir(log))
	require.NoError(t, err)
	var link map[string]string
	require.NoError(t, json.Unmarshal(tr.Events[0].Input, &link))
	require.Equal(t, first.RunID, link["run_id"])
	orig, err := eval.ReadTranscript(link["trace"], "/nonexistent")
	require.NoError(t, err, "the link is absolute")
	require.Equal(t, "agent", orig.Events[0].Name)
}

func reportOf(t *testing.T, log string) *report.Report {
	t.Helper()
	rep, err := report.FromRecords(jsonl.Records(log), nil)
	require.NoError(t, err)
	return rep
}

// TestCoordinatorKeepsNoEarlierLogOpen: a coordinator (Open) hands the
// episodes whose judge alone changed to its workers, which run them whole:
// it plans no rejudge, and keeps none of the earlier logs open. It once
// kept them open until the process ended.
func TestCoordinatorKeepsNoEarlierLogOpen(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc/self/fd to list open files")
	}
	dir := t.TempDir()
	e := reuseEval(&calls{}, "a", "b")
	base := filepath.Join(dir, "base.jsonl")
	_, err := e.Run(context.Background(), eval.Config{Log: base, Quiet: true})
	require.NoError(t, err)
	e.Versions.Judge = "j2"
	rec, err := distrib.Open(e, context.Background(), eval.Config{Log: filepath.Join(dir, "coord.jsonl"), ReuseFrom: []string{base}, Quiet: true})
	require.NoError(t, err)
	require.Len(t, rec.Pending(), 2, "the workers run the episodes whose judge changed")
	_, err = rec.Close(context.Background())
	require.NoError(t, err)
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil {
			require.NotEqual(t, base, target, "the earlier log is still open")
		}
	}
}
