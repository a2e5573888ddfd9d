package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/cli"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// outcomes answers by its input: "pass", "fail", "error" (a harness error)
// or "unscored" (a judge that cannot decide); odd samples are tagged
// tier=hard, even ones tier=easy. ran counts the harness's calls.
type outcomes struct {
	mu  sync.Mutex
	ran map[sink.Key]int
}

func (o *outcomes) eval(inputs ...string) *eval.Eval[string, string] {
	var d dataset.Slice[string]
	for i, in := range inputs {
		d = append(d, dataset.Sample[string]{ID: "s" + strconv.Itoa(i), Input: in, Tags: map[string]string{"tier": []string{"easy", "hard"}[i%2]}})
	}
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		o.mu.Lock()
		if o.ran == nil {
			o.ran = map[sink.Key]int{}
		}
		o.ran[sink.Key{SampleID: ep.Sample.ID, Epoch: ep.Epoch}]++
		o.mu.Unlock()
		if ep.Sample.Input == "error" {
			return "", errors.New("sandbox died")
		}
		return ep.Sample.Input, nil
	})
	j := judge.Func[string, string](func(_ context.Context, _ *harness.Episode[string], out string) (judge.Verdict, error) {
		if out == "unscored" {
			return judge.Verdict{}, judge.Unscored("no grade")
		}
		return judge.Verdict{Pass: out == "pass"}, nil
	})
	return &eval.Eval[string, string]{Name: "outcomes", Dataset: d, Harness: h, Judge: j}
}

// reset returns the episodes run since the last reset, by sample ID.
func (o *outcomes) reset() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []string
	for k := range o.ran {
		ids = append(ids, k.SampleID)
	}
	o.ran = nil
	slices.Sort(ids)
	return ids
}

func records(t *testing.T, path string) []sink.Record {
	t.Helper()
	var out []sink.Record
	for r, err := range jsonl.Records(path) {
		require.NoError(t, err)
		out = append(out, r)
	}
	return out
}

func TestMainArgs(t *testing.T) {
	e := (&outcomes{}).eval("pass", "fail", "pass", "pass", "fail", "pass", "pass", "pass", "fail", "pass")
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := cli.MainArgs(context.Background(), e, eval.Config{}, []string{"run", "-log", filepath.Join(dir, "a.jsonl"), "-epochs", "2", "-seed", "18446744073709551615", "-json"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	var rep report.Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Equal(t, 20, rep.Episodes)

	out.Reset()
	require.Equal(t, 2, cli.MainArgs(context.Background(), e, eval.Config{}, []string{"coordinate"}, &out, &errOut))
	require.Contains(t, errOut.String(), "cluster.Main")
	require.Equal(t, 2, cli.MainArgs(context.Background(), e, eval.Config{}, []string{"-shard", "3/3"}, &out, &errOut))

	// A Kubernetes Indexed Job names the shard in the environment.
	t.Setenv("JOB_COMPLETION_INDEX", "1")
	t.Setenv("JOB_COMPLETIONS", "2")
	out.Reset()
	log := filepath.Join(dir, "shard.jsonl")
	require.Equal(t, 0, cli.MainArgs(context.Background(), e, eval.Config{}, []string{"-log", log}, &out, &errOut), errOut.String())
	recs := records(t, log)
	require.NotEmpty(t, recs)
	require.Less(t, len(recs), 10)
	for _, r := range recs {
		require.True(t, eval.InShard(r.SampleID, eval.Shard{Index: 1, Count: 2}))
		require.NotEmpty(t, r.Worker, "shard records say where they ran")
	}

	// -shard overrides the environment.
	log = filepath.Join(dir, "flag.jsonl")
	require.Equal(t, 0, cli.MainArgs(context.Background(), e, eval.Config{}, []string{"-log", log, "-shard", "0/2"}, &out, &errOut), errOut.String())
	for _, r := range records(t, log) {
		require.True(t, eval.InShard(r.SampleID, eval.Shard{Index: 0, Count: 2}))
	}

	// An environment that names no shard is bad usage, not every sample
	// on every pod.
	t.Setenv("JOB_COMPLETION_INDEX", "2")
	errOut.Reset()
	require.Equal(t, 2, cli.MainArgs(context.Background(), e, eval.Config{}, []string{"-log", filepath.Join(dir, "bad.jsonl")}, &out, &errOut))
	require.Contains(t, errOut.String(), "JOB_COMPLETION_INDEX=2 JOB_COMPLETIONS=2")
}

// TestBindFlagsReadsNoEnvironment: binding flags is only binding flags;
// the Indexed Job's shard is JobShard's, called explicitly.
func TestBindFlagsReadsNoEnvironment(t *testing.T) {
	t.Setenv("JOB_COMPLETION_INDEX", "1")
	t.Setenv("JOB_COMPLETIONS", "3")
	var cfg eval.Config
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	cli.BindFlags(fs, &cfg)
	require.NoError(t, fs.Parse(nil))
	require.Zero(t, cfg.Shard)

	s, err := cli.JobShard()
	require.NoError(t, err)
	require.Equal(t, eval.Shard{Index: 1, Count: 3}, s)

	t.Setenv("JOB_COMPLETIONS", "")
	s, err = cli.JobShard()
	require.NoError(t, err)
	require.Zero(t, s, "one variable alone names no shard")
}

// TestMainFlagsSelectReuseAndSmoke drives the flags of reuse, selection
// and smoke runs.
func TestMainFlagsSelectReuseAndSmoke(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := &outcomes{}
	e := o.eval("pass", "fail", "error", "pass", "fail", "pass")
	from := filepath.Join(dir, "from.jsonl")
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := cli.MainArgs(context.Background(), e, eval.Config{Retries: -1}, args, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, _, stderr := run("-log", from)
	require.Equal(t, 1, code, "1 of 6 errored: over -max-no-verdict's 5%%")
	require.Contains(t, stderr, "between 50.0% [18.8%, 81.2%] and 66.7% [30.0%, 90.3%]")
	o.reset()
	run = func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := cli.MainArgs(context.Background(), e, eval.Config{Retries: -1}, append(args, "-max-no-verdict", "-1"), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, stderr := run("-log", filepath.Join(dir, "rerun.jsonl"), "-from", from, "-only", "failed,errored", "-only-tag", "tier=hard")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, cmp.Diff([]string{"s1"}, o.reset()), "s1 is the hard failure; s4 is easy")
	require.Contains(t, out, "compared with the run in "+from)

	code, out, stderr = run("-log", filepath.Join(dir, "reused.jsonl"), "-reuse-from", from, "-reuse-from", filepath.Join(dir, "rerun.jsonl"))
	require.Equal(t, 0, code, stderr)
	require.Empty(t, cmp.Diff([]string{"s2"}, o.reset()), "the error runs again; the rest is reused")
	require.Contains(t, out, "5 episodes (earlier results reused")

	code, _, stderr = run("-smoke", "1", "-smoke-tag", "tier", "-smoke-seed", "4")
	require.Equal(t, 0, code, stderr)
	require.Len(t, o.reset(), 2, "one sample per tier")

	code, _, stderr = run("-from", filepath.Join(dir, "reused.jsonl"), "-only", "unscored")
	require.Equal(t, 0, code, "nothing to run is not a failure")
	require.Contains(t, stderr, "nothing to run")

	code, _, stderr = run("-only", "broken")
	require.Equal(t, 2, code)
	require.True(t, strings.Contains(stderr, "want failed, unscored, errored or passed"), stderr)
	code, _, _ = run("-only-tag", "novalue")
	require.Equal(t, 2, code)
}

// FuzzReuseFlags: the flags of reuse and selection accept a value or say
// why not; what they accept is a Config that Run accepts.
func FuzzReuseFlags(f *testing.F) {
	f.Add("failed,errored", "tier=hard", "3")
	f.Add("bogus", "novalue", "-1")
	f.Add("passed, unscored", "a==b", "x")
	e := (&outcomes{}).eval("pass")
	f.Fuzz(func(t *testing.T, only, tag, smoke string) {
		cfg := eval.Config{Quiet: true}
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cli.BindFlags(fs, &cfg)
		from := filepath.Join(t.TempDir(), "absent.jsonl")
		if err := fs.Parse([]string{"-from", from, "-only", only, "-only-tag", tag, "-smoke", smoke}); err != nil {
			return
		}
		_, err := e.Run(context.Background(), cfg)
		var ce *eval.ConfigError
		if errors.As(err, &ce) && cfg.Subset.PerValue >= 0 {
			t.Fatalf("flags accepted %q %q %q into an invalid Config: %v", only, tag, smoke, err)
		}
	})
}

// TestMainFlagVariants: -variants a,b runs only those of the eval's
// variants; a bad name is bad usage.
func TestMainFlagVariants(t *testing.T) {
	t.Parallel()
	var d dataset.Slice[string]
	for i := range 3 {
		d = append(d, dataset.Sample[string]{ID: "s" + strconv.Itoa(i), Input: "x"})
	}
	e := &eval.Eval[string, string]{Name: "matrix", Dataset: d, Judge: judge.Func[string, string](func(context.Context, *harness.Episode[string], string) (judge.Verdict, error) {
		return judge.Verdict{Pass: true}, nil
	})}
	for _, name := range []string{"a", "b", "c"} {
		e.Variants = append(e.Variants, eval.Variant[string, string]{Name: name, Harness: harness.Func[string, string](func(context.Context, *harness.Episode[string]) (string, error) {
			return name, nil
		})})
	}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	var out, errOut bytes.Buffer
	code := cli.MainArgs(context.Background(), e, eval.Config{}, []string{"run", "-log", log, "-variants", "a, c", "-quiet"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	ran := map[string]int{}
	for _, r := range records(t, log) {
		ran[r.Variant]++
	}
	require.Equal(t, map[string]int{"a": 3, "c": 3}, ran)

	errOut.Reset()
	require.Equal(t, 2, cli.MainArgs(context.Background(), e, eval.Config{}, []string{"run", "-variants", "a b"}, &out, &errOut))
	require.Contains(t, errOut.String(), `variant name "a b"`)
}
