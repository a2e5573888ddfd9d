package eval_test

// The procedure around a sequential gate's confidence sequence: the claim
// frontier on record, one place to set the gate, no second look on resume,
// a pinned baseline (docs/stopping-early.md, "Every reader decides the same").

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
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
	const concurrency = 32
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
		if hung.Add(1) == concurrency {
			// Every worker holds a failing episode: the log will not grow.
			go func() {
				defer cancel()
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
					res, err := readDecision(log)
					if err == nil && (res.Waiting != "" || res.Decision != report.Undecided) {
						running <- res
						return
					}
				}
				running <- nil
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
