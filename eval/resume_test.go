package eval_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
)

func TestResumeRunsOnlyMissingAndErroredEpisodes(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "log.jsonl")
	var calls atomic.Int32
	broken := true
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		calls.Add(1)
		if broken && ep.Sample.ID == "s1" {
			return "", errors.New("sandbox gone")
		}
		return ep.Sample.Input, nil
	})
	e := &eval.Eval[string, string]{Name: "resume", Dataset: samples("ok", "ok", "no"), Harness: h, Judge: wantOK}
	rep, err := e.Run(context.Background(), eval.Config{Epochs: 2, Retries: -1, Log: log})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Errored)
	first := rep.RunID

	broken = false
	calls.Store(0)
	rep, err = e.Run(context.Background(), eval.Config{Epochs: 2, Retries: -1, Log: log})
	require.NoError(t, err)
	require.Equal(t, int32(2), calls.Load(), "only the two errored episodes run again")
	require.Equal(t, first, rep.RunID, "resume adopts the log's run")
	require.Equal(t, 6, rep.Episodes, "the report covers the whole run")
	require.Equal(t, 4, rep.Passed)
	require.Equal(t, 0, rep.Errored)
	require.Contains(t, rep.String(), "4 episodes from earlier runs of this log (not run again)", "the text report says it resumed")
	requireExactlyOnce(t, logRecords(t, log), 3, 2)

	calls.Store(0)
	_, err = e.Run(context.Background(), eval.Config{Epochs: 2, Log: log})
	require.NoError(t, err)
	require.Zero(t, calls.Load(), "a finished run has nothing left to do")

	_, err = e.Run(context.Background(), eval.Config{Epochs: 2, Log: log, RunID: "another"})
	var ce *eval.ConfigError
	require.ErrorAs(t, err, &ce, "a log holds one run")
}

func TestLogDirectoryIsCreated(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "runs", "nested", "log.jsonl")
	e := &eval.Eval[string, string]{Name: "dir", Dataset: samples("ok"), Harness: echo, Judge: wantOK}
	_, err := e.Run(context.Background(), eval.Config{Log: log})
	require.NoError(t, err)
	require.Len(t, logRecords(t, log), 1)
}

func TestSameSeedSameRecords(t *testing.T) {
	t.Parallel()
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		r := rand.New(rand.NewPCG(ep.Seed, 0))
		return strconv.Itoa(r.IntN(2)), nil
	})
	j := judge.Func[string, string](func(_ context.Context, _ *harness.Episode[string], out string) (judge.Verdict, error) {
		return judge.Verdict{Pass: out == "1"}, nil
	})
	inputs := make([]string, 200)
	run := func(seed uint64, concurrency int) map[sink.Key]sink.Record {
		log := filepath.Join(t.TempDir(), "log.jsonl")
		e := &eval.Eval[string, string]{Name: "seed", Dataset: samples(inputs...), Harness: h, Judge: j}
		_, err := e.Run(context.Background(), eval.Config{Epochs: 3, Seed: seed, Concurrency: concurrency, Log: log, RunID: "r"})
		require.NoError(t, err)
		out := map[sink.Key]sink.Record{}
		for _, r := range logRecords(t, log) {
			out[r.Key()] = r
		}
		return out
	}
	a, b := run(7, 1), run(7, 13)
	ignore := cmpopts.IgnoreFields(sink.Record{}, "StartedAt", "DurationMS")
	if d := cmp.Diff(a, b, ignore); d != "" {
		t.Fatalf("same seed, other concurrency (-a +b):\n%s", d)
	}
	require.NotEmpty(t, cmp.Diff(a, run(8, 4), ignore), "another seed gives other outcomes")
}

func TestBadDatasets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"id":"a","input":"x"}`+"\n\n"+`{"id":"b","input":`+"\n"), 0o644))
	for name, tc := range map[string]struct {
		d    dataset.Dataset[string]
		want string
	}{
		"malformed row names file and line": {dataset.JSONL[string]{Path: bad}, bad + ":3:"},
		"duplicate IDs":                     {dataset.Slice[string]{{ID: "x"}, {ID: "x"}}, `duplicate sample ID "x"`},
		"empty":                             {dataset.Slice[string]{}, "the dataset is empty"},
		"missing file":                      {dataset.JSONL[string]{Path: filepath.Join(dir, "nope.jsonl")}, "no such file"},
		"panics": {dataset.Func[string](func(context.Context) iter.Seq2[dataset.Sample[string], error] {
			return func(yield func(dataset.Sample[string], error) bool) {
				yield(dataset.Sample[string]{ID: "a"}, nil)
				panic("a bug in the loader")
			}
		}), "eval: reading dataset: it panicked: a bug in the loader"},
	} {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			h := harness.Func[string, string](func(context.Context, *harness.Episode[string]) (string, error) {
				calls.Add(1)
				return "", nil
			})
			e := &eval.Eval[string, string]{Name: "bad", Dataset: tc.d, Harness: h, Judge: wantOK}
			_, err := e.Run(context.Background(), eval.Config{})
			require.ErrorContains(t, err, tc.want)
			require.Zero(t, calls.Load(), "nothing runs on a bad dataset")
		})
	}
}

// The crash test runs this test binary as a child that evaluates into a log
// and SIGKILLs it at random moments; each restart resumes.
const crashChildEnv = "PROCTOR_CRASH_CHILD_LOG"

func TestMain(m *testing.M) {
	if log := os.Getenv(crashChildEnv); log != "" {
		crashChild(log)
		return
	}
	if arg := os.Getenv(interruptChildEnv); arg != "" {
		log, mode, _ := strings.Cut(arg, ",")
		interruptChild(log, mode)
		return
	}
	os.Exit(m.Run())
}

const crashSamples, crashEpochs = 6000, 2

func crashChild(log string) {
	inputs := make([]string, crashSamples)
	for i := range inputs {
		inputs[i] = "ok"
	}
	h := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		time.Sleep(time.Duration(ep.Seed%2000) * time.Microsecond)
		ep.AddEvent(harness.Event{Kind: "note", Name: "step"})
		if ep.Seed%7 == 0 && ep.Attempt == 0 {
			return "", errors.New("flaky")
		}
		return ep.Sample.Input, nil
	})
	e := &eval.Eval[string, string]{Name: "crash", Dataset: samples(inputs...), Harness: h, Judge: wantOK}
	_, err := e.Run(context.Background(), eval.Config{Epochs: crashEpochs, Concurrency: 8, Retries: -1, Log: log, Seed: 1, MaxErrorRate: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func TestKill9AtRandomMomentsThenResume(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	log := filepath.Join(t.TempDir(), "log.jsonl")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	child := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+log)
		cmd.Stderr = os.Stderr
		return cmd
	}
	// A kill counts when it lands mid-run: the run added final records, but
	// is not done. Only records that are not errors count (a resumed run
	// drops errored ones, so the line count may shrink), and each kill waits
	// for the child to have written something first: on a loaded machine a
	// fixed sleep can end before the child has started.
	finals := func() (ok, all int) {
		b, _ := os.ReadFile(log)
		b = b[:bytes.LastIndexByte(b, '\n')+1] // complete lines only
		all = bytes.Count(b, []byte("\n"))
		return all - bytes.Count(b, []byte(`"status":"error"`)), all
	}
	midRun, prevOK := 0, 0
	for range 8 {
		cmd := child()
		require.NoError(t, cmd.Start())
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if ok, all := finals(); ok > prevOK || all == crashSamples*crashEpochs {
				break
			}
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if ok, all := finals(); ok > prevOK && all < crashSamples*crashEpochs {
			midRun++
			prevOK = ok
		}
	}
	t.Logf("%d kills landed mid-run", midRun)
	require.GreaterOrEqual(t, midRun, 2, "the kills must interrupt running evaluations")
	// Every line so far parses, except possibly a torn tail.
	require.NoError(t, child().Run(), "the last run resumes and finishes")
	recs := logRecords(t, log) // fails on any torn or corrupt line
	requireExactlyOnce(t, recs, crashSamples, crashEpochs)
	errored := 0
	for _, r := range recs {
		if r.Status == sink.Error {
			errored++
		}
		require.NotEmpty(t, r.Transcript)
	}
	// With no retries, errors that the last run produced are all that remain.
	require.Less(t, errored, crashSamples*crashEpochs/4)
	tr, err := eval.ReadTranscript(recs[len(recs)-1].Transcript, filepath.Dir(log))
	require.NoError(t, err)
	require.Equal(t, recs[len(recs)-1].SampleID, tr.SampleID)
	require.Equal(t, "step", tr.Events[0].Name)
}
