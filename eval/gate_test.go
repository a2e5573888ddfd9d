package eval_test

// The procedure around a sequential gate's confidence sequence: the claim
// frontier on record, one place to set the gate, no second look on resume,
// a pinned baseline (docs/stopping-early.md, "Every reader decides the same").

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/distrib"
)

// TestSequentialReportOfACutLogNeverDecidesAheadOfTheRun is the cut log: a
// 50% agent against a 70% bar whose failures hang until the run is
// stopped. The run's prefix ends at its first failing sample, so it is
// undecided; the log holds only the passes of the samples after it. A
// report of the log, while the run goes on and after it was stopped,
// must not pass the gate over those passes (it did, after 33 samples,
// when it built the claim order from the samples it saw); resumed with
// the failures finishing, the run and the report agree.
func TestSequentialReportOfACutLogNeverDecidesAheadOfTheRun(t *testing.T) {
	t.Parallel()
	const concurrency = 64
	log := filepath.Join(t.TempDir(), "run.jsonl")
	cfg := eval.Config{Log: log, Seed: 11, Concurrency: concurrency, Quiet: true, Sequential: &report.Sequential{Bar: 0.7}}
	e := bernoulli(400, 0.5, 0, 0, nil)
	inner := e.Harness
	ctx, cancel := context.WithCancel(context.Background())
	var hung atomic.Int64
	running := make(chan *report.SequentialResult, 1)
	cut := *e
	cut.Harness = harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		out, err := inner.Run(ctx, ep)
		if out == "ok" {
			return out, err
		}
		if hung.Add(1) == 1 {
			// Report the log while the run goes on: once it stops growing
			// (every claim the run may make is in flight or recorded), or
			// as soon as the report decides.
			go func() {
				defer cancel()
				var res *report.SequentialResult
				size, still := int64(-1), 0
				for deadline := time.Now().Add(10 * time.Second); still < 100 && time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
					var err error
					if res, err = readDecision(log); err == nil && res.Decision != report.Undecided {
						break
					}
					st, err := os.Stat(log)
					if err == nil && st.Size() == size && size > 0 {
						still++
					} else if err == nil {
						size, still = st.Size(), 0
					}
				}
				running <- res
			}()
		}
		<-ctx.Done()
		return "", ctx.Err()
	})
	rep, err := cut.Run(ctx, cfg)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, report.Undecided, rep.Sequential.Decision, "the run's prefix ends at its first hung sample")
	require.Positive(t, rep.Passed, "the log holds the passes claimed after the hung samples")

	during := <-running
	require.NotNil(t, during, "a report of the running log says where its prefix ends")
	require.Equal(t, report.Undecided, during.Decision, "reported while running: %+v", during)
	require.Contains(t, during.Waiting, "has no record")
	after := decisionOfLog(t, log)
	require.Equal(t, report.Undecided, after.Decision, "reported after the cut: %+v", after)
	require.Equal(t, rep.Sequential.Samples, after.Samples)
	require.Contains(t, after.Waiting, "has no record")

	resumed, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, resumed.Sequential, decisionOfLog(t, log), "resumed, the run and the report of its log agree")
}

// TestSequentialGateIsSetInOnePlace: Config.Report.Sequential passed a gate
// to the report without the manifest, the claim order, the seed or the
// epochs; it is refused for Config.Sequential.
func TestSequentialGateIsSetInOnePlace(t *testing.T) {
	t.Parallel()
	e := bernoulli(50, 0.9, 0, 0, nil)
	_, err := e.Run(context.Background(), eval.Config{Quiet: true, Log: filepath.Join(t.TempDir(), "run.jsonl"),
		Report: report.Options{Sequential: &report.Sequential{Bar: 0.7}}})
	var ce *eval.ConfigError
	require.ErrorAs(t, err, &ce)
	require.ErrorContains(t, err, "Config.Sequential")
}

// TestSequentialDecidedGateIsFinal: a log decided "fail" with 1 epoch was
// resumed with 3, ran more episodes and decided again: a second look at α.
// Whatever the gate rests on (epochs, the dataset, the selection, the seed,
// the gate itself) a resume that changes it is refused, even one allowed
// to change versions, and nothing more runs.
func TestSequentialDecidedGateIsFinal(t *testing.T) {
	t.Parallel()
	e := bernoulli(400, 0.4, 0, 0, nil)
	log := filepath.Join(t.TempDir(), "run.jsonl")
	cfg := eval.Config{Log: log, Seed: 3, Concurrency: 4, Quiet: true, Sequential: &report.Sequential{Bar: 0.7}}
	first, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, report.DecidedFail, first.Sequential.Decision)

	more := bernoulli(401, 0.4, 0, 0, nil)
	for name, tc := range map[string]struct {
		e   *eval.Eval[string, string]
		cfg func(c *eval.Config)
	}{
		"epochs":        {e, func(c *eval.Config) { c.Epochs = 3 }},
		"dataset":       {more, func(*eval.Config) {}},
		"selection":     {e, func(c *eval.Config) { c.Subset = eval.Subset{PerValue: 300, Seed: 1} }},
		"seed":          {e, func(c *eval.Config) { c.Seed = 4 }},
		"alpha":         {e, func(c *eval.Config) { c.Sequential = &report.Sequential{Bar: 0.7, Alpha: 0.1} }},
		"allow-changed": {e, func(c *eval.Config) { c.Epochs, c.AllowChanged = 3, true }},
	} {
		c := cfg
		tc.cfg(&c)
		_, err := tc.e.Run(context.Background(), c)
		var me *manifest.MismatchError
		require.ErrorAs(t, err, &me, name)
		require.True(t, me.Gate, "%s: %v", name, err)
	}
	again, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, first.Episodes, again.Episodes, "nothing more ran")
	require.Equal(t, first.Sequential, again.Sequential)
	require.Equal(t, first.Sequential, decisionOfLog(t, log))
}

// TestSequentialBaselineIsPinned: the gate against a baseline stored only
// the baseline's path, so replacing the file flipped the decision of a
// report and one from another directory was undecided; a baseline of
// another eval was used without a word. The base figures are in the
// manifest, and another eval's baseline is refused.
func TestSequentialBaselineIsPinned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := filepath.Join(dir, "base.jsonl")
	_, err := bernoulli(600, 0.8, 0, 0, nil).Run(context.Background(), eval.Config{Log: base, Seed: 5, Quiet: true})
	require.NoError(t, err)
	log := filepath.Join(dir, "head.jsonl")
	rep, err := bernoulli(600, 0.8, 0, 0, nil).Run(context.Background(), eval.Config{Log: log, Seed: 5, Quiet: true, Concurrency: 4,
		Sequential: &report.Sequential{Baseline: base, Margin: 0.05}})
	require.NoError(t, err)
	require.Equal(t, report.DecidedPass, rep.Sequential.Decision)

	// The baseline replaced by a much better run, then gone: the log's
	// decision stands, from any directory.
	require.NoError(t, os.Remove(base))
	_, err = bernoulli(600, 1, 0, 0, nil).Run(context.Background(), eval.Config{Log: base, Seed: 5, Quiet: true})
	require.NoError(t, err)
	require.Equal(t, rep.Sequential, decisionOfLog(t, log))
	moved := filepath.Join(t.TempDir(), "head.jsonl")
	require.NoError(t, os.Rename(log, moved))
	require.NoError(t, os.Rename(manifest.Path(log), manifest.Path(moved)))
	require.NoError(t, os.RemoveAll(dir))
	require.Equal(t, rep.Sequential, decisionOfLog(t, moved))

	other := filepath.Join(t.TempDir(), "other.jsonl")
	o := bernoulli(600, 0.8, 0, 0, nil)
	o.Name = "another"
	_, err = o.Run(context.Background(), eval.Config{Log: other, Seed: 5, Quiet: true})
	require.NoError(t, err)
	_, err = bernoulli(600, 0.8, 0, 0, nil).Run(context.Background(), eval.Config{Seed: 5, Quiet: true,
		Sequential: &report.Sequential{Baseline: other, Margin: 0.05}})
	var ce *eval.ConfigError
	require.ErrorAs(t, err, &ce)
	require.ErrorContains(t, err, `eval "another"`)
}

// slowFailures is an agent that passes with probability rate on each draw
// (a draw per attempt: a retry draws again); a failure times out with
// probability slow (it outlives the timeout), else fails.
func slowFailures(n int, rate, slow float64, timeout time.Duration) *eval.Eval[string, string] {
	var d dataset.Slice[string]
	for i := range n {
		d = append(d, dataset.Sample[string]{ID: fmt.Sprintf("task-%04d", i), Input: "x"})
	}
	return &eval.Eval[string, string]{
		Name: "slow-failures", Dataset: d,
		Harness: harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
			r := rand.New(rand.NewPCG(ep.Seed, uint64(ep.Attempt)))
			if r.Float64() < rate {
				return "ok", nil
			}
			if r.Float64() < slow {
				select {
				case <-time.After(2 * timeout):
				case <-ctx.Done():
				}
				return "", ctx.Err()
			}
			return "no", nil
		}),
		Judge: wantOK,
	}
}

// gatedRun runs e under a 70% gate with timeouts retried twice, in a
// synctest bubble (the timeouts take no wall time).
func gatedRun(t *testing.T, e *eval.Eval[string, string], seed uint64) *report.Report {
	var rep *report.Report
	synctest.Test(t, func(t *testing.T) {
		var err error
		rep, err = e.Run(context.Background(), eval.Config{Seed: seed, Concurrency: 16, Quiet: true, Timeout: 10 * time.Millisecond,
			Retries: 2, Backoff: time.Millisecond, MaxErrorRate: -1, Sequential: &report.Sequential{Bar: 0.7}})
		require.NoError(t, err)
	})
	return rep
}

// TestSequentialRetriedTimeoutsMakeNoDecision: a 60% agent whose failures
// time out three times in four. Timeouts retried draw the slow failures
// again until they pass: the final records pass 83% of the time and the
// gate passed. Under a gate an attempt that ended in error is final (its
// range [0, 1]), so the gate decides on the draws as they fell: not a pass.
func TestSequentialRetriedTimeoutsMakeNoDecision(t *testing.T) {
	t.Parallel()
	rep := gatedRun(t, slowFailures(400, 0.6, 0.75, 10*time.Millisecond), 1)
	require.Positive(t, rep.Errored, "timeouts are recorded as they fell")
	require.NotEqual(t, report.DecidedPass, rep.Sequential.Decision, "%+v", rep.Sequential)
}

// TestSequentialRetriedDrawsBySimulation is the retried draw by simulation:
// 2,000 gated runs of the engine, 200 samples each, of a 60% agent whose
// failures time out three times in four, with two retries allowed. A
// false decision (a pass) happens in at most α of them. Before the rule,
// retries lifted the final pass rate to 83% and most runs passed.
func TestSequentialRetriedDrawsBySimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 runs of the engine; -short skips them")
	}
	t.Parallel()
	const runs = 2000
	e := slowFailures(200, 0.6, 0.75, 10*time.Millisecond)
	wrong := 0
	for k := range runs {
		if gatedRun(t, e, uint64(k)).Sequential.Decision == report.DecidedPass {
			wrong++
		}
	}
	t.Logf("%d false decisions (pass) in %d runs", wrong, runs)
	require.LessOrEqual(t, wrong, int(report.DefaultAlpha*runs))
}

// TestSequentialResumeDoesNotDrawErrorsAgain: a resume ran a log's errored
// episodes again, a second draw of each; under a gate their records are
// final, and a resume of an undecided log runs nothing it holds.
func TestSequentialResumeDoesNotDrawErrorsAgain(t *testing.T) {
	t.Parallel()
	e := bernoulli(200, 0.6, 0, 0, func() (string, error) { return "", errors.New("grader unreachable") })
	log := filepath.Join(t.TempDir(), "run.jsonl")
	cfg := eval.Config{Log: log, Seed: 1, Concurrency: 4, Quiet: true, Retries: -1, MaxErrorRate: -1, Sequential: &report.Sequential{Bar: 0.7}}
	first, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, report.Undecided, first.Sequential.Decision)
	require.Positive(t, first.Errored)

	var ran atomic.Int64
	again := *e
	again.Harness = harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		ran.Add(1)
		return e.Harness.Run(ctx, ep)
	})
	second, err := again.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Zero(t, ran.Load(), "no episode of the log ran again")
	require.Equal(t, first.Errored, second.Errored)
	require.Equal(t, first.Sequential, second.Sequential)
}

// TestSequentialClaimsStopNearTheDecision: with instant episodes the run
// claimed its whole dataset (2,000 of 2,000) before the recorder's decision
// caught up, and at 100 µs per episode 400–1,100 more than it needed. The
// claims beyond the finished prefix are bounded: the episodes run beyond
// the decision are at most the concurrency plus 5%, at any latency.
func TestSequentialClaimsStopNearTheDecision(t *testing.T) {
	t.Parallel()
	for _, latency := range []time.Duration{0, 100 * time.Microsecond} {
		for _, concurrency := range []int{8, 64} {
			t.Run(fmt.Sprintf("%v/%d", latency, concurrency), func(t *testing.T) {
				t.Parallel()
				e := bernoulli(2000, 0.82, latency, latency, nil)
				rep, err := e.Run(context.Background(), eval.Config{Seed: 5, Concurrency: concurrency, Quiet: true,
					Sequential: &report.Sequential{Bar: 0.7}})
				require.NoError(t, err)
				require.Equal(t, report.DecidedPass, rep.Sequential.Decision)
				beyond := rep.Episodes - rep.Sequential.Episodes
				t.Logf("decided after %d episodes, %d run beyond", rep.Sequential.Episodes, beyond)
				require.LessOrEqual(t, beyond, concurrency+(concurrency+19)/20)
			})
		}
	}
}

// TestSequentialLogOfAnOlderProctorResumes: a gated log whose manifest
// does not hold the claim order (written before it was on record) resumes,
// and the resume puts the order there, so that its report decides again.
func TestSequentialLogOfAnOlderProctorResumes(t *testing.T) {
	t.Parallel()
	e := bernoulli(300, 0.9, 0, 0, nil)
	log := filepath.Join(t.TempDir(), "run.jsonl")
	cfg := eval.Config{Log: log, Seed: 2, Quiet: true, Sequential: &report.Sequential{Bar: 0.7}}
	first, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	m, err := manifest.Read(log)
	require.NoError(t, err)
	m.Sequential = json.RawMessage(`{"bar":0.7,"alpha":0.05}`)
	require.NoError(t, manifest.Write(log, m))
	require.NotEmpty(t, decisionOfLog(t, log).Problem, "without its order the log decides nothing")

	again, err := e.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, first.Sequential, again.Sequential)
	require.Equal(t, first.Sequential, decisionOfLog(t, log))
}

// TestSequentialWorkersManifestIsSmall: the manifest a coordinator gives
// its workers (in one NATS message) leaves out the gate's claim order and
// baseline figures, which grow with the dataset; the log's keeps them.
func TestSequentialWorkersManifestIsSmall(t *testing.T) {
	t.Parallel()
	e := bernoulli(300, 0.9, 0, 0, nil)
	log := filepath.Join(t.TempDir(), "coord.jsonl")
	cfg := eval.Config{Log: log, Seed: 2, Quiet: true, Sequential: &report.Sequential{Bar: 0.7}}
	rec, err := distrib.Open(e, context.Background(), cfg)
	require.NoError(t, err)
	_, err = rec.Close(context.Background())
	require.NoError(t, err)
	require.NotContains(t, string(rec.Manifest().Sequential), `"order"`)
	workers, err := e.Manifest(context.Background(), cfg)
	require.NoError(t, err)
	require.NotContains(t, string(workers.Sequential), `"order"`)
	m, err := manifest.Read(log)
	require.NoError(t, err)
	require.Contains(t, string(m.Sequential), `"order"`)
}
