package eval_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
	"github.com/proctor-evals/proctor/sink"
)

// variantCalls counts the episodes each variant's harness ran, by variant.
type variantCalls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *variantCalls) count() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// variantHarness answers its own name, and checks that the engine gave it
// an episode of its variant.
func variantHarness(name string, c *variantCalls) harness.Harness[string, string] {
	return harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		if ep.Variant != name {
			return "", fmt.Errorf("variant %s's harness ran an episode of variant %q", name, ep.Variant)
		}
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[name]++
		c.mu.Unlock()
		return name, nil
	})
}

// passIfA passes variant a's episodes and fails the others'.
var passIfA = judge.Func[string, string](func(_ context.Context, _ *harness.Episode[string], out string) (judge.Verdict, error) {
	if out == "a" {
		return judge.Pass(""), nil
	}
	return judge.Fail("not a"), nil
})

func variantsEval(c *variantCalls, d dataset.Dataset[string], names ...string) *eval.Eval[string, string] {
	e := &eval.Eval[string, string]{Name: "variants", Dataset: d, Judge: passIfA}
	for _, n := range names {
		e.Variants = append(e.Variants, eval.Variant[string, string]{Name: n, Harness: variantHarness(n, c), Version: n + "-1"})
	}
	return e
}

// TestVariantsShareOneEnvironmentPerSample: a sample's environment is
// provisioned once for every variant's episodes (a fork each), records
// carry their variant, and variants draw the same episode seeds.
func TestVariantsShareOneEnvironmentPerSample(t *testing.T) {
	t.Parallel()
	const nSamples, epochs = 6, 2
	names := []string{"a", "b", "c"}
	c := &counting{Provider: &sandboxtest.Fake{}}
	var cl variantCalls
	var d dataset.Slice[string]
	for i := range nSamples {
		d = append(d, dataset.Sample[string]{ID: fmt.Sprintf("s%d", i), Input: "x"})
	}
	// Streamed: the sample is held from its first episode to the last
	// variant's.
	e := variantsEval(&cl, &readCounter{d: d}, names...)
	e.Sandbox = func(dataset.Sample[string]) sandbox.Spec { return sandbox.Spec{} }
	mem := &memSink{}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rep, err := e.Run(context.Background(), eval.Config{Sandbox: c.provider(), Epochs: epochs, Concurrency: 4,
		Retries: -1, Timeout: time.Minute, Log: log, Sinks: []sink.Sink{mem}, Quiet: true})
	require.NoError(t, err)
	require.Equal(t, nSamples*epochs*len(names), rep.Episodes)
	require.Equal(t, int32(nSamples), c.provisions.Load(), "Provision once per sample, not once per sample × variant")
	require.Equal(t, int32(nSamples*epochs*len(names)), c.forks.Load(), "Fork once per episode")
	c.requireAllClosed(t)

	seeds := map[string]uint64{}
	keys := map[sink.Key]bool{}
	for _, r := range mem.recs {
		require.Equal(t, r.Variant, string(r.Output[1:len(r.Output)-1]), "the variant's harness ran it")
		require.False(t, keys[r.Key()], "one record per (variant, sample, epoch)")
		keys[r.Key()] = true
		k := fmt.Sprintf("%s/%d", r.SampleID, r.Epoch)
		if s, ok := seeds[k]; ok {
			require.Equal(t, s, r.Seed, "variants share the episode seed of (sample, epoch)")
		}
		seeds[k] = r.Seed
	}
	require.Len(t, keys, nSamples*epochs*len(names))
	require.Equal(t, map[string]int{"a": nSamples * epochs, "b": nSamples * epochs, "c": nSamples * epochs}, cl.count())

	m, err := manifest.Read(log)
	require.NoError(t, err)
	require.Equal(t, []manifest.Variant{{Name: "a", Harness: "a-1"}, {Name: "b", Harness: "b-1"}, {Name: "c", Harness: "c-1"}}, m.Variants)
	require.Equal(t, epochs, m.Epochs, "the manifest's epochs are per variant")
}

// TestVariantsResume: a resume runs only what is missing; a variant added
// runs just its episodes; a variant whose version changed is refused as a
// changed harness is, unless allowed; -variants runs only those named.
func TestVariantsResume(t *testing.T) {
	t.Parallel()
	d := samples("x", "y", "z")
	log := filepath.Join(t.TempDir(), "run.jsonl")
	cfg := eval.Config{Log: log, Epochs: 2, Quiet: true, Variants: []string{"b"}}

	var cl variantCalls
	_, err := variantsEval(&cl, d, "a", "b").Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"b": 6}, cl.count(), "Config.Variants runs only those named")

	cl = variantCalls{}
	cfg.Variants = nil
	rep, err := variantsEval(&cl, d, "a", "b").Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"a": 6}, cl.count(), "the resume runs the variant not run yet")
	require.Equal(t, 12, rep.Episodes)
	require.Equal(t, 6, rep.Resumed)

	cl = variantCalls{}
	rep, err = variantsEval(&cl, d, "a", "b", "c").Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"c": 6}, cl.count(), "a variant added runs just its episodes")
	require.Equal(t, 18, rep.Episodes)

	cl = variantCalls{}
	changed := variantsEval(&cl, d, "a", "b", "c")
	changed.Variants[1].Version = "b-2"
	_, err = changed.Run(context.Background(), cfg)
	var mismatch *manifest.MismatchError
	require.True(t, errors.As(err, &mismatch), "%v", err)
	require.Contains(t, err.Error(), `variant b's harness version: "b-1" in the log, "b-2" now`)
	require.Empty(t, cl.count())

	m, err := manifest.Read(log)
	require.NoError(t, err)
	require.Len(t, m.Variants, 3)
	byKey := map[sink.Key]int{}
	for _, r := range logRecords(t, log) {
		byKey[r.Key()]++
	}
	require.Len(t, byKey, 18)
	for k, n := range byKey {
		require.Equal(t, 1, n, "%v recorded once", k)
	}
}

// TestVariantsReuse: with ReuseFrom, an unchanged variant (same version)
// reuses its results; a variant whose version changed runs.
func TestVariantsReuse(t *testing.T) {
	t.Parallel()
	d := samples("x", "y")
	dir := t.TempDir()
	var cl variantCalls
	_, err := variantsEval(&cl, d, "a", "b").Run(context.Background(), eval.Config{Log: filepath.Join(dir, "one.jsonl"), Quiet: true})
	require.NoError(t, err)

	cl = variantCalls{}
	e := variantsEval(&cl, d, "a", "b")
	e.Variants[1].Version = "b-2"
	rep, err := e.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "two.jsonl"), ReuseFrom: []string{filepath.Join(dir, "one.jsonl")}, Quiet: true})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"b": 2}, cl.count(), "a reused, b (changed) run")
	require.Equal(t, 4, rep.Episodes)
	reused := 0
	for _, r := range logRecords(t, filepath.Join(dir, "two.jsonl")) {
		if r.ReusedFrom != "" {
			require.Equal(t, "a", r.Variant)
			reused++
		}
	}
	require.Equal(t, 2, reused)
}

// TestVariantsAreChecked: names are keys, so they are checked; an eval
// has a Harness or Variants, not both; -variants names known ones.
func TestVariantsAreChecked(t *testing.T) {
	t.Parallel()
	var cl variantCalls
	d := samples("x")
	run := func(e *eval.Eval[string, string], cfg eval.Config) error {
		cfg.Quiet = true
		_, err := e.Run(context.Background(), cfg)
		return err
	}
	for name, tc := range map[string]struct {
		e    *eval.Eval[string, string]
		cfg  eval.Config
		want string
	}{
		"empty name":    {variantsEval(&cl, d, ""), eval.Config{}, "a variant needs a name"},
		"bad character": {variantsEval(&cl, d, "a b"), eval.Config{}, `variant name "a b" has ' '`},
		"duplicate":     {variantsEval(&cl, d, "a", "a"), eval.Config{}, `are both named "a"`},
		"unknown":       {variantsEval(&cl, d, "a", "b"), eval.Config{Variants: []string{"c"}}, `Config.Variants names "c"`},
		"no variants":   {&eval.Eval[string, string]{Name: "n", Dataset: d, Harness: echo, Judge: wantOK}, eval.Config{Variants: []string{"c"}}, "the eval has no variants"},
		"both": {func() *eval.Eval[string, string] {
			e := variantsEval(&cl, d, "a")
			e.Harness = echo
			return e
		}(), eval.Config{}, "both a Harness and Variants"},
		"one to eliminate": {variantsEval(&cl, d, "a"), eval.Config{EliminateVariants: 0.05}, "needs two Eval.Variants"},
	} {
		err := run(tc.e, tc.cfg)
		var ce *eval.ConfigError
		require.True(t, errors.As(err, &ce), "%s: %v", name, err)
		require.Contains(t, err.Error(), tc.want, name)
	}
	require.NoError(t, eval.CheckVariantName("gpt-5/high+tools_v1.2"))
}

// TestEliminationStopsALosingVariant: with Config.EliminateVariants, a
// variant that always fails stops being run once one that always passes
// is better with confidence; the manifest says by whom, after how many
// samples and what it saved; every environment is still provisioned
// once per sample and closed; a resume runs nothing of the eliminated
// variant.
func TestEliminationStopsALosingVariant(t *testing.T) {
	t.Parallel()
	const n = 200
	var d dataset.Slice[string]
	for i := range n {
		d = append(d, dataset.Sample[string]{ID: fmt.Sprintf("s%03d", i), Input: "x"})
	}
	var cl variantCalls
	e := variantsEval(&cl, d, "a", "b", "c") // a passes, b and c fail
	e.Sandbox = func(dataset.Sample[string]) sandbox.Spec { return sandbox.Spec{} }
	c := &counting{Provider: &sandboxtest.Fake{}}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	cfg := eval.Config{Log: log, Sandbox: c.provider(), EliminateVariants: 0.05, Concurrency: 4, Quiet: true, Seed: 3}
	rep, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	ran := cl.count()
	require.Equal(t, n, ran["a"], "the winner runs every sample")
	require.Less(t, ran["b"], n/2, "b stopped early")
	require.Less(t, ran["c"], n/2, "c stopped early")
	require.Equal(t, int32(n), c.provisions.Load(), "one environment per sample still")
	c.requireAllClosed(t)
	require.Less(t, rep.Episodes, 3*n)
	require.Contains(t, strings.Join(rep.Warnings, "\n"), "variant b stopped after 12 samples: a is better (α 0.05 over the run's eliminations)")

	m, err := manifest.Read(log)
	require.NoError(t, err)
	require.Len(t, m.Eliminations, 2)
	for _, el := range m.Eliminations {
		require.Equal(t, "a", el.By)
		require.Equal(t, 0.05, el.Alpha)
		require.Positive(t, el.AfterSamples)
		require.Equal(t, n-ran[el.Variant], el.Saved, "%s: saved what it did not run", el.Variant)
	}

	cl = variantCalls{}
	_, err = e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Empty(t, cl.count()["b"], "a resume does not run an eliminated variant")
	require.Empty(t, cl.count()["c"])
	m2, err := manifest.Read(log)
	require.NoError(t, err)
	require.Equal(t, m.Eliminations, m2.Eliminations)
}

// TestVariantsShardBySample: every variant of a sample goes to the
// sample's shard (its environment is provisioned once), and the shards
// together run the matrix once.
func TestVariantsShardBySample(t *testing.T) {
	t.Parallel()
	var d dataset.Slice[string]
	for i := range 20 {
		d = append(d, dataset.Sample[string]{ID: fmt.Sprintf("s%02d", i), Input: "x"})
	}
	dir := t.TempDir()
	keys := map[sink.Key]int{}
	for i := range 2 {
		var cl variantCalls
		log := filepath.Join(dir, fmt.Sprintf("shard%d.jsonl", i))
		shard := eval.Shard{Index: i, Count: 2}
		_, err := variantsEval(&cl, d, "a", "b", "c").Run(context.Background(), eval.Config{Log: log, Shard: shard, Epochs: 2, Quiet: true})
		require.NoError(t, err)
		perSample := map[string]int{}
		for _, r := range logRecords(t, log) {
			require.True(t, eval.InShard(r.SampleID, shard), "%s in shard %d", r.SampleID, i)
			perSample[r.SampleID]++
			keys[r.Key()]++
		}
		for id, n := range perSample {
			require.Equal(t, 6, n, "%s: every variant × epoch in one shard", id)
		}
	}
	require.Len(t, keys, 20*3*2)
}

// TestVariantsRejudge: rejudging a matrix's log judges every variant's
// outputs again, each record keeping its variant.
func TestVariantsRejudge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var cl variantCalls
	from := filepath.Join(dir, "from.jsonl")
	_, err := variantsEval(&cl, samples("x", "y"), "a", "b").Run(context.Background(), eval.Config{Log: from, Epochs: 2, Quiet: true})
	require.NoError(t, err)
	passIfB := judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
		if out != ep.Variant {
			return judge.Verdict{}, fmt.Errorf("variant %s's record holds %q", ep.Variant, out)
		}
		return judge.Verdict{Pass: out == "b"}, nil
	})
	e := &eval.Eval[string, string]{Name: "variants", Judge: passIfB}
	to := filepath.Join(dir, "to.jsonl")
	rep, err := e.Rejudge(context.Background(), from, eval.Config{Log: to, Quiet: true})
	require.NoError(t, err)
	require.Equal(t, 8, rep.Episodes)
	require.Equal(t, 4, rep.Passed)
	for _, r := range logRecords(t, to) {
		require.Equal(t, r.Variant == "b", r.Status == sink.Pass, "%v", r.Key())
	}
}

// cancelAfter cancels its context once it has been given n records.
type cancelAfter struct {
	n      int
	cancel context.CancelFunc
	mu     sync.Mutex
	seen   int
}

func (c *cancelAfter) Write(context.Context, sink.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen++; c.seen == c.n {
		c.cancel()
	}
	return nil
}

func (c *cancelAfter) Close(context.Context) error { return nil }

// TestEliminationResumedDecidesAsOneRun: a run stopped midway and resumed
// eliminates the same variants, by the same variants, after the same
// samples as one run that was never stopped: the tests are fed the
// log's records in claim order, whoever recorded them.
func TestEliminationResumedDecidesAsOneRun(t *testing.T) {
	t.Parallel()
	var d dataset.Slice[string]
	for i := range 300 {
		d = append(d, dataset.Sample[string]{ID: fmt.Sprintf("s%03d", i), Input: "x"})
	}
	// Outcomes by seed: a passes 70 %, b 45 %, c 65 %.
	rate := map[string]uint64{"a": 70, "b": 45, "c": 65}
	e := &eval.Eval[string, string]{Name: "elim", Dataset: d, Judge: judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
		return judge.Verdict{Pass: out == "pass"}, nil
	})}
	for _, name := range []string{"a", "b", "c"} {
		e.Variants = append(e.Variants, eval.Variant[string, string]{Name: name, Harness: harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
			if (ep.Seed>>7)%100 < rate[name] {
				return "pass", nil
			}
			return "fail", nil
		})})
	}
	dir := t.TempDir()
	cfg := eval.Config{EliminateVariants: 0.05, Epochs: 2, Concurrency: 8, Seed: 11, Quiet: true}
	one := cfg
	one.Log = filepath.Join(dir, "one.jsonl")
	_, err := e.Run(context.Background(), one)
	require.NoError(t, err)
	want, err := manifest.Read(one.Log)
	require.NoError(t, err)
	require.NotEmpty(t, want.Eliminations, "the test needs an elimination")

	resumed := cfg
	resumed.Log = filepath.Join(dir, "resumed.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := cfg
	stop.Log, stop.Sinks = resumed.Log, []sink.Sink{&cancelAfter{n: 40, cancel: cancel}}
	_, err = e.Run(ctx, stop)
	require.Error(t, err, "stopped midway")
	_, err = e.Run(context.Background(), resumed)
	require.NoError(t, err)
	got, err := manifest.Read(resumed.Log)
	require.NoError(t, err)
	strip := func(es []manifest.Elimination) []manifest.Elimination {
		out := make([]manifest.Elimination, len(es))
		for i, e := range es {
			e.Saved = 0 // episodes in flight when the first run stopped may differ
			out[i] = e
		}
		return out
	}
	require.Equal(t, strip(want.Eliminations), strip(got.Eliminations))
	t.Logf("eliminations: %+v", want.Eliminations)
}

// TestVariantsReuseJudgesOutputsAgain: with only the judge's version
// changed, each variant's recorded outputs are judged again and no agent
// runs.
func TestVariantsReuseJudgesOutputsAgain(t *testing.T) {
	t.Parallel()
	d := samples("x", "y")
	dir := t.TempDir()
	var cl variantCalls
	e := variantsEval(&cl, d, "a", "b")
	e.Versions.Judge = "j1"
	_, err := e.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "one.jsonl"), Epochs: 2, Quiet: true})
	require.NoError(t, err)

	cl = variantCalls{}
	e = variantsEval(&cl, d, "a", "b")
	e.Versions.Judge = "j2"
	e.Judge = judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
		if out != ep.Variant {
			return judge.Verdict{}, fmt.Errorf("variant %s judged %q", ep.Variant, out)
		}
		return judge.Verdict{Pass: out == "b"}, nil // the new judge prefers b
	})
	rep, err := e.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "two.jsonl"), Epochs: 2, ReuseFrom: []string{filepath.Join(dir, "one.jsonl")}, Quiet: true})
	require.NoError(t, err)
	require.Empty(t, cl.count(), "no agent ran")
	require.Equal(t, 8, rep.Episodes)
	require.Equal(t, 4, rep.Passed)
	for _, r := range logRecords(t, filepath.Join(dir, "two.jsonl")) {
		require.NotEmpty(t, r.ParentRunID, "%v judged again", r.Key())
		require.Equal(t, r.Variant == "b", r.Status == sink.Pass)
	}
}
