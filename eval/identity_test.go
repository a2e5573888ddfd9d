package eval_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/harness"
)

// identityOf is the dataset identity computed the plain way, over every
// sample, for the runs below to match.
func identityOf(t *testing.T, d dataset.Slice[string]) manifest.DatasetIdentity {
	t.Helper()
	return manifest.Identity(len(d), func(i int) string { return d[i].ID }, func(i int) []byte {
		b, err := json.Marshal(d[i].Input)
		require.NoError(t, err)
		return b
	})
}

// cancelAt returns a harness that answers "ok" and cancels the run at its
// k-th call. Later calls wait until that cancel has returned: until then
// the run's context may not be done (cancel can be preempted while it
// walks the context's children), and the other workers, their episodes
// done at once, would go on claiming — a whole run's worth under load.
func cancelAt(k int64, cancel context.CancelFunc) harness.Func[string, string] {
	var n atomic.Int64
	cancelled := make(chan struct{})
	return func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		switch v := n.Add(1); {
		case v == k:
			cancel()
			close(cancelled)
		case v > k:
			<-cancelled
		}
		return "ok", nil
	}
}

func manifestIdentity(t *testing.T, log string) manifest.DatasetIdentity {
	t.Helper()
	m, err := manifest.Read(log)
	require.NoError(t, err)
	return m.Dataset
}

func manySamples(n int) dataset.Slice[string] {
	d := make(dataset.Slice[string], n)
	for i := range d {
		d[i] = dataset.Sample[string]{ID: "s" + strconv.Itoa(i), Input: "input <" + strconv.Itoa(i) + ">"}
	}
	return d
}

// The identity a run adds up as it goes (workers hash the inputs they
// encode for records; the run hashes the rest) is the identity of the
// whole dataset: after a full run, after a canceled run and its resume,
// with an abandoned worker that never returns, and with the dataset in
// another order.
func TestRunAddsUpTheDatasetIdentity(t *testing.T) {
	t.Parallel()
	for name, form := range map[string]func(dataset.Slice[string]) dataset.Dataset[string]{
		"in memory": func(d dataset.Slice[string]) dataset.Dataset[string] { return d },
		"streamed":  func(d dataset.Slice[string]) dataset.Dataset[string] { return &readCounter{d: d} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testRunAddsUpTheDatasetIdentity(t, form)
		})
	}
}

func testRunAddsUpTheDatasetIdentity(t *testing.T, form func(dataset.Slice[string]) dataset.Dataset[string]) {
	d := manySamples(300)
	want := identityOf(t, d)

	t.Run("full run", func(t *testing.T) {
		t.Parallel()
		log := filepath.Join(t.TempDir(), "run.jsonl")
		e := &eval.Eval[string, string]{Name: "id", Dataset: form(d), Harness: echo, Judge: wantOK}
		_, err := e.Run(context.Background(), eval.Config{Log: log, Epochs: 3, Concurrency: 16})
		require.NoError(t, err)
		require.Equal(t, want, manifestIdentity(t, log))
	})

	t.Run("canceled then resumed", func(t *testing.T) {
		t.Parallel()
		log := filepath.Join(t.TempDir(), "run.jsonl")
		ctx, cancel := context.WithCancel(context.Background())
		e := &eval.Eval[string, string]{Name: "id", Dataset: form(d), Harness: cancelAt(200, cancel), Judge: wantOK}
		rep, err := e.Run(ctx, eval.Config{Log: log, Epochs: 2, Concurrency: 4})
		require.Error(t, err)
		require.Less(t, rep.Episodes, 600, "the first run stopped early (%d episodes, %d cancelled)", rep.Episodes, rep.Cancelled)
		require.Equal(t, want, manifestIdentity(t, log), "a canceled run's manifest")

		e.Harness = echo
		rep, err = e.Run(context.Background(), eval.Config{Log: log, Epochs: 2, Concurrency: 4})
		require.NoError(t, err)
		require.Equal(t, 600, rep.Episodes)
		require.Equal(t, want, manifestIdentity(t, log), "the resumed run's manifest")
	})

	t.Run("an abandoned worker that never returns", func(t *testing.T) {
		t.Parallel()
		log := filepath.Join(t.TempDir(), "run.jsonl")
		release := make(chan struct{})
		defer close(release)
		stuck := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
			if ep.Sample.ID == "s150" {
				<-release // ignores its context: abandoned at the timeout
			}
			return "ok", nil
		})
		e := &eval.Eval[string, string]{Name: "id", Dataset: form(d), Harness: stuck, Judge: wantOK}
		// One worker: the one that gets stuck has hashed 150 samples before.
		_, err := e.Run(context.Background(), eval.Config{Log: log, Concurrency: 1, Timeout: 50 * time.Millisecond})
		require.NoError(t, err)
		require.Equal(t, want, manifestIdentity(t, log))
	})

	t.Run("another order", func(t *testing.T) {
		t.Parallel()
		log := filepath.Join(t.TempDir(), "run.jsonl")
		half := slicesClone(d[:150])
		e := &eval.Eval[string, string]{Name: "id", Dataset: form(half), Harness: echo, Judge: wantOK}
		_, err := e.Run(context.Background(), eval.Config{Log: log})
		require.NoError(t, err)

		shuffled := slicesClone(d)
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		e.Dataset = form(shuffled)
		rep, err := e.Run(context.Background(), eval.Config{Log: log, Concurrency: 8})
		require.NoError(t, err)
		require.Equal(t, 150, rep.Resumed)
		require.Equal(t, want, manifestIdentity(t, log), "the same samples in another order are the same dataset")
		require.True(t, strings.Contains(strings.Join(rep.Warnings, "\n"), "dataset changed"), "150 samples were added: %q", rep.Warnings)
	})
}

// A log written by an older proctor, whose manifest hashed the dataset
// another way, resumes without a false "dataset changed" warning; a change
// in its sample count is still told.
func TestResumeALogWithAnOlderDatasetHash(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	d := manySamples(20)
	e := &eval.Eval[string, string]{Name: "id", Dataset: d, Harness: echo, Judge: wantOK}
	_, err := e.Run(context.Background(), eval.Config{Log: log})
	require.NoError(t, err)
	older := func() {
		m, err := manifest.Read(log)
		require.NoError(t, err)
		m.Dataset.Hash = strings.Repeat("0f", 32) // bare hex: the ordered SHA-256 of before
		require.NoError(t, manifest.Write(log, m))
	}

	older()
	rep, err := e.Run(context.Background(), eval.Config{Log: log})
	require.NoError(t, err)
	require.NotContains(t, strings.Join(rep.Warnings, "\n"), "dataset changed")
	require.Equal(t, identityOf(t, d), manifestIdentity(t, log), "the manifest now holds this proctor's identity")

	older()
	e.Dataset = manySamples(25)
	rep, err = e.Run(context.Background(), eval.Config{Log: log})
	require.NoError(t, err)
	require.Contains(t, strings.Join(rep.Warnings, "\n"), "dataset changed since the log was written (20 samples then, 25 now)")
}
