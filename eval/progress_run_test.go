package eval_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/distrib"
	"github.com/proctor-evals/proctor/sink"
)

// progressLog collects what OnProgress is given.
type progressLog struct {
	mu   sync.Mutex
	seen []eval.Progress
}

func (l *progressLog) add(p eval.Progress) {
	l.mu.Lock()
	l.seen = append(l.seen, p)
	l.mu.Unlock()
}

func (l *progressLog) all() []eval.Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// OnProgress sees the episode a stuck harness runs as the longest running
// one, done rise to the total, and a final snapshot once all is written.
func TestOnProgressSeesDoneRiseAndTheLongestRunningEpisode(t *testing.T) {
	t.Parallel()
	var d dataset.Slice[string]
	for i := range 40 {
		d = append(d, dataset.Sample[string]{ID: fmt.Sprintf("task-%02d", i), Input: "ok"})
	}
	d = append(d, dataset.Sample[string]{ID: "stuck", Input: "ok"})
	release := make(chan struct{})
	h := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		ep.AddUsage(harness.Usage{InputTokens: 100, OutputTokens: 10, CostUSD: 0.001})
		if ep.Sample.ID == "stuck" {
			<-release
		}
		return ep.Sample.Input, nil
	})
	e := &eval.Eval[string, string]{Name: "progress", Dataset: d, Harness: h, Judge: wantOK}

	var log progressLog
	var once sync.Once
	sawStuck := make(chan eval.Progress, 1)
	cfg := eval.Config{Concurrency: 4, Epochs: 2, ProgressEvery: 5 * time.Millisecond, Quiet: true,
		Report: report.Options{Resamples: -1},
		OnProgress: func(p eval.Progress) {
			log.add(p)
			// Once everything else is done, the stuck episodes are all
			// that run: release them.
			if p.Done == p.Total-2 && p.Running == 2 && len(p.Longest) == 2 {
				once.Do(func() {
					sawStuck <- p
					close(release)
				})
			}
		}}
	rep, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, 82, rep.Episodes)

	p := <-sawStuck
	for _, l := range p.Longest {
		require.Equal(t, "stuck", l.SampleID)
		require.Equal(t, 0, l.Attempt)
		require.Positive(t, l.Elapsed)
	}
	require.ElementsMatch(t, []int{0, 1}, []int{p.Longest[0].Epoch, p.Longest[1].Epoch})
	require.GreaterOrEqual(t, p.Longest[0].Elapsed, p.Longest[1].Elapsed, "longest first")

	seen := log.all()
	last := seen[len(seen)-1]
	require.True(t, last.Final, "the last call is the final snapshot")
	for _, p := range seen[:len(seen)-1] {
		require.False(t, p.Final)
	}
	require.Equal(t, int64(82), last.Total)
	require.Equal(t, int64(82), last.Done)
	require.Equal(t, int64(82), last.Pass)
	require.Equal(t, int64(8200), last.InputTokens)
	require.InDelta(t, 0.082, last.CostUSD, 1e-9)
	require.Zero(t, last.Running)
	for i := 1; i < len(seen); i++ {
		require.GreaterOrEqual(t, seen[i].Done, seen[i-1].Done, "done never goes back")
	}
}

// A shard's progress counts its own episodes; a resumed run's counts
// what its log held as resumed, and its statuses include them.
func TestProgressCountsTheRunsOwnEpisodes(t *testing.T) {
	t.Parallel()
	e := seeded(30)
	final := func(cfg eval.Config) eval.Progress {
		var last eval.Progress
		cfg.Quiet, cfg.OnProgress = true, func(p eval.Progress) { last = p }
		_, err := e.Run(context.Background(), cfg)
		require.NoError(t, err)
		require.True(t, last.Final)
		return last
	}

	shard := eval.Shard{Index: 1, Count: 3}
	owned := 0
	for i := range 30 {
		if eval.InShard(fmt.Sprintf("task-%03d", i), shard) {
			owned++
		}
	}
	p := final(eval.Config{Epochs: 2, Shard: shard})
	require.Equal(t, int64(2*owned), p.Total, "a shard's total is its episodes")
	require.Equal(t, p.Total, p.Done)
	require.Equal(t, p.Total, p.Pass+p.Fail)

	// Stop a run partway (canceled once 20 episodes are done), then resume it.
	log := filepath.Join(t.TempDir(), "run.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	var first eval.Progress
	slow := *e
	slow.Harness = harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		time.Sleep(3 * time.Millisecond)
		return e.Harness.Run(ctx, ep)
	})
	_, err := slow.Run(ctx, eval.Config{Epochs: 2, Log: log, Concurrency: 2, Quiet: true, ProgressEvery: time.Millisecond,
		OnProgress: func(p eval.Progress) {
			if p.Done >= 20 {
				cancel()
			}
			first = p
		}})
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, first.Final)
	require.Less(t, first.Done, int64(60))
	p = final(eval.Config{Epochs: 2, Log: log})
	require.Equal(t, int64(60), p.Total)
	require.Equal(t, int64(60), p.Done)
	require.Equal(t, first.Done, p.Resumed)
	require.Equal(t, int64(60), p.Pass+p.Fail, "the statuses include the resumed records")
}

// A Recording (a coordinator) gives the same snapshot: done from what was
// committed, running from what its caller says.
func TestRecordingProgress(t *testing.T) {
	t.Parallel()
	e := seeded(10)
	var last eval.Progress
	rec, err := distrib.Open(e, context.Background(), eval.Config{Log: filepath.Join(t.TempDir(), "c.jsonl"), Quiet: true,
		OnProgress: func(p eval.Progress) { last = p }})
	require.NoError(t, err)
	p := eval.ProgressOf(rec)
	require.Equal(t, eval.Progress{Eval: "seeded", Total: 10, Elapsed: p.Elapsed}, p)

	for i := range 4 {
		require.NoError(t, rec.Commit(distrib.Finished{Record: sink.Record{SampleID: fmt.Sprintf("task-%03d", i),
			Status: sink.Fail, DurationMS: 1000, OutputTokens: 7}}))
	}
	longest := []distrib.RunningEpisode{{SampleID: "task-009", Elapsed: time.Minute}, {SampleID: "task-008", Epoch: 0, Attempt: 1, Elapsed: time.Second}}
	rec.SetRunning(func() (int, []distrib.RunningEpisode) { return 3, longest })
	require.Eventually(t, func() bool { return eval.ProgressOf(rec).Done == 4 }, 5*time.Second, time.Millisecond)
	p = eval.ProgressOf(rec)
	require.Equal(t, int64(4), p.Fail)
	require.Equal(t, int64(28), p.OutputTokens)
	require.Equal(t, 3, p.Running)
	require.Equal(t, []eval.RunningEpisode{{SampleID: "task-009", Elapsed: time.Minute}, {SampleID: "task-008", Epoch: 0, Attempt: 1, Elapsed: time.Second}}, p.Longest)

	_, err = rec.Close(context.Background())
	require.NoError(t, err)
	require.True(t, last.Final, "Close gives OnProgress the final snapshot")
	require.Equal(t, int64(4), last.Done)
}

// An attempt abandoned at its timeout is no longer in flight, though its
// harness goroutine still is: the episode was settled.
func TestAnAbandonedAttemptIsNotRunning(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		if ep.Sample.ID == "deaf" {
			<-release // ignores its context
		}
		return ep.Sample.Input, nil
	})
	e := &eval.Eval[string, string]{Name: "abandon", Dataset: samples("ok", "ok", "ok"), Harness: h, Judge: wantOK}
	e.Dataset = append(e.Dataset.(dataset.Slice[string]), dataset.Sample[string]{ID: "deaf", Input: "ok"})
	var log progressLog
	rep, err := e.Run(context.Background(), eval.Config{Timeout: 50 * time.Millisecond, Retries: -1, Quiet: true,
		ProgressEvery: 5 * time.Millisecond, OnProgress: log.add, Report: report.Options{Resamples: -1}})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Errored)
	seen := log.all()
	last := seen[len(seen)-1]
	require.True(t, last.Final)
	require.Equal(t, int64(4), last.Done)
	require.Equal(t, int64(1), last.Error)
	require.Zero(t, last.Running, "the abandoned harness still blocks, but its episode is settled")
	require.Empty(t, last.Longest)
}
