package cluster

// The rate governor end to end in a distributed run: four worker
// processes, each serving its own gateway to agents in local sandboxes,
// share one key's lanes through the run's JetStream, against the
// token-bucket fake provider in the test process.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

const (
	govAgentEnv    = "PROCTOR_GOV_AGENT"    // run as the agent: call until PROCTOR_GOV_UNTIL
	govProviderEnv = "PROCTOR_GOV_PROVIDER" // the provider's OpenAI base URL: be a worker of govEval
	govUntilEnv    = "PROCTOR_GOV_UNTIL"    // when the agents stop, Unix milliseconds
)

func init() {
	if os.Getenv(govAgentEnv) == "1" {
		os.Exit(govAgent())
	}
	runAgentWorker(govEval(), govProviderEnv, "sk-one-key", 2*time.Minute, nil)
}

// govAgent calls the model in a loop until its time is up; it fails on
// a 429 that reaches it (the governor waits them out).
func govAgent() int {
	until, _ := strconv.ParseInt(os.Getenv(govUntilEnv), 10, 64)
	for time.Now().UnixMilli() < until {
		req, _ := http.NewRequest("POST", os.Getenv("OPENAI_BASE_URL")+"/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			fmt.Println("status", resp.StatusCode)
			return 3
		}
	}
	return 0
}

// govEval runs govAgent in a sandbox per sample, 16 samples.
func govEval() *eval.Eval[int, harness.CommandOutput] {
	env := map[string]string{govAgentEnv: "1", govUntilEnv: os.Getenv(govUntilEnv)}
	return agentEval("cluster-governor", numbered("g", 16), env, 2*time.Minute, func(out harness.CommandOutput) judge.Verdict {
		return judge.Verdict{Pass: out.ExitCode == 0, Reason: out.Stdout}
	})
}

// TestFourWorkersOfARunStayWithinOneKeysLimit: a distributed run of four
// worker processes, 4 agents each calling one model with one key in a
// loop, against a provider limited to 20 requests a second (burst 20,
// 100 ms an answer): once converged (after 5 s), the fleet is served
// within 10% of the limit and at most 5% of its calls are answered 429,
// and no 429 reaches an agent (every episode passes).
func TestFourWorkersOfARunStayWithinOneKeysLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 14 s of real time")
	}
	t.Parallel()
	const warmup, measured = 5 * time.Second, 8 * time.Second
	p := gatewaytest.New()
	t.Cleanup(p.Close)
	p.RateLimit, p.Latency = &gatewaytest.RateLimit{PerSecond: 20, Burst: 20}, 100*time.Millisecond

	log := t.TempDir() + "/run.jsonl"
	c, out := coordinateEval(t, govEval(), eval.Config{Epochs: 1, Seed: testSeed, Retries: -1, Log: log})
	start := time.Now()
	env := []string{govProviderEnv + "=" + p.OpenAIBaseURL(), govUntilEnv + "=" + strconv.FormatInt(start.Add(warmup+measured+time.Second).UnixMilli(), 10)}
	var workers []*proc
	for range 4 {
		workers = append(workers, startEnv(t, shape{}, env, workerArgs(c, 4)...))
	}
	until(t, 30*time.Second, "the first call served", func() bool { return len(p.Served()) > 0 })
	time.Sleep(time.Until(start.Add(warmup)))
	served0, limited0, from := len(p.Served()), p.Limited(), time.Now()
	time.Sleep(measured)
	served, limited := len(p.Served())-served0, p.Limited()-limited0
	perSecond := float64(served) / time.Since(from).Seconds()
	share := float64(limited) / float64(max(served+limited, 1))
	t.Logf("four workers, one key: %.1f/s of 20, %.1f%% answered 429 (%d served, %d limited)", perSecond, 100*share, served, limited)

	o := await(t, out, 90*time.Second)
	require.NoError(t, o.err)
	for _, w := range workers {
		require.Equal(t, 0, w.wait(t, 20*time.Second), w.stderr.String())
	}
	require.Equal(t, 16, o.rep.Passed, "an agent got a 429")
	require.LessOrEqual(t, perSecond, 22.0, "served over the limit")
	require.GreaterOrEqual(t, perSecond, 16.0, "throughput")
	require.LessOrEqual(t, share, 0.05, "share answered 429")
}

// coordinateEval is coordinate for another eval than the test eval.
func coordinateEval[T, O any](t *testing.T, e *eval.Eval[T, O], cfg eval.Config) (*Coordinator, <-chan outcome) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := StartCoordinator(ctx, e, cfg, coordinatorOptions())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out, finished := make(chan outcome, 1), make(chan struct{})
	go func() {
		defer close(finished)
		rep, err := c.Wait(ctx)
		out <- outcome{rep, err}
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return c, out
}
