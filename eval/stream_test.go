package eval_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sink"
)

// readCounter is a dataset other than a Slice, which the engine streams:
// it counts its readings and the samples yielded by the latest one, and
// alter, when set, changes what the n-th reading yields.
type readCounter struct {
	d      dataset.Slice[string]
	reads  atomic.Int64
	served atomic.Int64 // samples yielded by the latest reading
	alter  func(reading, i int, s *dataset.Sample[string]) (stop bool)
}

func (c *readCounter) Samples(ctx context.Context) iter.Seq2[dataset.Sample[string], error] {
	reading := int(c.reads.Add(1))
	c.served.Store(0)
	return func(yield func(dataset.Sample[string], error) bool) {
		for i, s := range c.d {
			if c.alter != nil && c.alter(reading, i, &s) {
				return
			}
			c.served.Add(1)
			if !yield(s, nil) {
				return
			}
		}
	}
}

// episodeRow is what a record says of its episode, without the run's
// times and identity.
type episodeRow struct {
	ID, Tag, Input, Output string
	Epoch, Attempt         int
	Status                 sink.Status
	Seed                   uint64
}

func rows(recs []sink.Record) []episodeRow {
	out := make([]episodeRow, len(recs))
	for i, r := range recs {
		out[i] = episodeRow{r.SampleID, r.Tags["kind"], string(r.Input), string(r.Output), r.Epoch, r.Attempt, r.Status, r.Seed}
	}
	slices.SortFunc(out, func(a, b episodeRow) int { return cmp.Or(cmp.Compare(a.ID, b.ID), a.Epoch-b.Epoch) })
	return out
}

func taggedSamples(n int) dataset.Slice[string] {
	d := make(dataset.Slice[string], n)
	for i := range d {
		d[i] = dataset.Sample[string]{ID: "s" + strconv.Itoa(i), Input: "in" + strconv.Itoa(i)}
		if i%3 != 0 { // some samples have no tags
			d[i].Tags = map[string]string{"kind": []string{"", "a", "b"}[i%3]}
		}
	}
	return d
}

// A streamed dataset runs exactly as the same samples in memory do: the
// same records (retries, timeouts and tags included), the same report and
// the same identity in the manifest. A full run reads it twice: once to
// check and index its IDs, once to run it.
func TestStreamedDatasetRunsAsInMemory(t *testing.T) {
	t.Parallel()
	d := taggedSamples(400)
	h := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		n, _ := strconv.Atoi(ep.Sample.ID[1:])
		switch {
		case n%7 == 0 && ep.Attempt == 0:
			return "", errors.New("flaky") // retried
		case n == 123 && ep.Epoch == 1:
			<-ctx.Done() // times out
			return "", ctx.Err()
		case n%5 == 0:
			return "no", nil
		}
		return "ok", nil
	})
	run := func(ds dataset.Dataset[string], log string) (*report.Report, []sink.Record) {
		e := &eval.Eval[string, string]{Name: "stream", Dataset: ds, Harness: h, Judge: wantOK}
		rep, err := e.Run(context.Background(), eval.Config{Log: log, Epochs: 3, Concurrency: 16, Retries: 1,
			Backoff: time.Millisecond, Timeout: 2 * time.Second, Seed: 7, Report: report.Options{Resamples: -1}})
		require.NoError(t, err)
		return rep, logRecords(t, log)
	}
	dir := t.TempDir()
	wantRep, wantRecs := run(d, filepath.Join(dir, "memory.jsonl"))
	c := &readCounter{d: d}
	rep, recs := run(c, filepath.Join(dir, "streamed.jsonl"))

	require.Equal(t, rows(wantRecs), rows(recs))
	require.Equal(t, int64(2), c.reads.Load(), "read once to index, once to run: every sample was hashed by a worker")
	require.Equal(t, wantRep.Episodes, rep.Episodes)
	require.Equal(t, wantRep.Passed, rep.Passed)
	require.Equal(t, wantRep.Errored, rep.Errored)
	require.Equal(t, wantRep.PassRate, rep.PassRate)
	require.Equal(t, wantRep.Interval, rep.Interval)
	require.Equal(t, wantRep.PassAtK, rep.PassAtK)
	require.Equal(t, wantRep.ByTag, rep.ByTag)
	require.Equal(t, wantRep.SampleResults(), rep.SampleResults())
	require.Equal(t, manifestIdentity(t, filepath.Join(dir, "memory.jsonl")), manifestIdentity(t, filepath.Join(dir, "streamed.jsonl")))
}

// The run reads a streamed dataset as the workers claim its samples, not
// ahead: the reading has gone no further than the samples of the episodes
// started so far and of one claimed episode per worker, and a few more
// read ahead.
func TestStreamedDatasetIsReadLazily(t *testing.T) {
	t.Parallel()
	const n, workers, epochs = 2000, 8, 2
	c := &readCounter{d: manySamples(n)}
	var started, worst atomic.Int64
	h := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		// served first: the reading cannot have gone further since, so k
		// bounds the claims behind it.
		served := c.served.Load()
		k := started.Add(1)
		ahead := served - ((k+workers)/epochs + 1 + 64) // 64: the read-ahead
		for w := worst.Load(); ahead > w && !worst.CompareAndSwap(w, ahead); w = worst.Load() {
		}
		return "ok", nil
	})
	e := &eval.Eval[string, string]{Name: "lazy", Dataset: c, Harness: h, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{Concurrency: workers, Epochs: epochs})
	require.NoError(t, err)
	require.Equal(t, n*epochs, rep.Episodes)
	require.LessOrEqual(t, worst.Load(), int64(0), "the run read samples before any worker claimed them")
	require.Equal(t, int64(n), c.served.Load(), "the run's reading went to the end")
}

// A dataset that does not read the same the second time stops the run
// with an error that says so; what ran is recorded, and a run with the
// dataset fixed resumes and completes it, each episode once. A dataset
// that panics or ends early when read again ends the run the same way,
// not the process.
func TestStreamedDatasetThatChangesStopsTheRun(t *testing.T) {
	t.Parallel()
	const n = 300
	for name, tc := range map[string]struct {
		alter func(i int, s *dataset.Sample[string]) bool
		want  string
	}{
		"another ID": {func(i int, s *dataset.Sample[string]) bool {
			if i == 200 {
				s.ID = "changed"
			}
			return false
		}, `sample 201 is "changed", "s200" the first time`},
		"ends early": {func(i int, _ *dataset.Sample[string]) bool { return i == 200 }, "it ended after 200 samples, 300 the first time"},
		"panics": {func(i int, _ *dataset.Sample[string]) bool {
			if i == 200 {
				panic("the file moved")
			}
			return false
		}, "it panicked: the file moved"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			log := filepath.Join(t.TempDir(), "run.jsonl")
			c := &readCounter{d: manySamples(n)}
			c.alter = func(reading, i int, s *dataset.Sample[string]) bool {
				return reading == 2 && tc.alter(i, s)
			}
			e := &eval.Eval[string, string]{Name: "changing", Dataset: c, Harness: echo, Judge: wantOK}
			rep, err := e.Run(context.Background(), eval.Config{Log: log, Concurrency: 4})
			require.ErrorContains(t, err, "eval: reading the dataset again: "+tc.want)
			require.ErrorContains(t, err, "dataset.Collect")
			require.NotNil(t, rep)
			require.Less(t, rep.Episodes, n)
			require.GreaterOrEqual(t, rep.Episodes, 150, "the samples before the change ran")

			c.alter = nil
			rep, err = e.Run(context.Background(), eval.Config{Log: log, Concurrency: 4})
			require.NoError(t, err)
			require.Equal(t, n, rep.Episodes)
			requireExactlyOnce(t, logRecords(t, log), n, 1)
			require.Equal(t, identityOf(t, c.d), manifestIdentity(t, log))
		})
	}
}

// Streaming applies to datasets that are not slices: a Slice is indexed
// where it is, and a run that narrows the dataset (a smoke subset, a
// selection) or reuses results reads it into memory, so both behave as
// before. Here a subset of a streamed dataset reads it once.
func TestNarrowedRunReadsTheDatasetOnce(t *testing.T) {
	t.Parallel()
	c := &readCounter{d: taggedSamples(90)}
	e := &eval.Eval[string, string]{Name: "narrow", Dataset: c, Harness: echo, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{Subset: eval.Subset{Tag: "kind", PerValue: 5, Seed: 1}})
	require.NoError(t, err)
	require.Equal(t, 15, rep.Episodes)
	require.Equal(t, int64(1), c.reads.Load())
	require.NotEmpty(t, rep.ByTag, fmt.Sprint(rep.ByTag))
}

// A dataset that grows between readings (a file still being appended to)
// runs the samples it had when the run started: the later ones are not
// this run's, and the identity in the manifest is that of the first.
func TestStreamedDatasetThatGrowsRunsWhatItHadAtTheStart(t *testing.T) {
	t.Parallel()
	d := manySamples(400)
	var reads atomic.Int64
	growing := dataset.Func[string](func(ctx context.Context) iter.Seq2[dataset.Sample[string], error] {
		k := 300 + 50*int(reads.Add(1)-1) // 300 samples, then 350, then 400
		return d[:min(k, len(d))].Samples(ctx)
	})
	log := filepath.Join(t.TempDir(), "run.jsonl")
	// Canceled, so that the run reads the dataset a third time, to hash the
	// samples no worker ran.
	ctx, cancel := context.WithCancel(context.Background())
	e := &eval.Eval[string, string]{Name: "growing", Dataset: growing, Harness: cancelAt(100, cancel), Judge: wantOK}
	rep, err := e.Run(ctx, eval.Config{Log: log, Concurrency: 4})
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, rep.Episodes, 300)
	require.Equal(t, int64(3), reads.Load())
	require.Equal(t, identityOf(t, d[:300]), manifestIdentity(t, log))
}

// A streamed dataset that cannot be read again at the end of a run, when
// the samples no worker ran are hashed for the manifest (here: a resume
// with nothing left to run), costs the manifest's update, not the run:
// the run succeeds with a warning, and the manifest keeps the identity it
// had.
func TestStreamedDatasetUnreadableAtTheEndWarns(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	d := manySamples(50)
	e := &eval.Eval[string, string]{Name: "end", Dataset: d, Harness: echo, Judge: wantOK}
	_, err := e.Run(context.Background(), eval.Config{Log: log})
	require.NoError(t, err)
	before := manifestIdentity(t, log)

	c := &readCounter{d: d, alter: func(reading, i int, _ *dataset.Sample[string]) bool {
		if reading == 3 && i == 10 {
			panic("the file is gone")
		}
		return false
	}}
	e.Dataset = c
	rep, err := e.Run(context.Background(), eval.Config{Log: log})
	require.NoError(t, err)
	require.Equal(t, 50, rep.Resumed)
	require.Equal(t, int64(3), c.reads.Load(), "to index, to run (nothing), to hash what no worker ran")
	require.Contains(t, strings.Join(rep.Warnings, "\n"), "the manifest's dataset identity was not updated: eval: reading the dataset again: it panicked: the file is gone")
	require.Equal(t, before, manifestIdentity(t, log))
}
