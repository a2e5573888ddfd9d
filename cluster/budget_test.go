package cluster

// The run's budget on the model gateway's wire across workers: two worker
// processes, each serving its own gateway to agents in local sandboxes,
// against one fake provider (gatewaytest) in the test process.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/usage"
)

// The test binary is also the agent (fleetAgentEnv) and, with
// fleetProviderEnv set, a worker of the fleet eval: both are decided here,
// before TestMain, which runs the other tests' workers.
const (
	fleetAgentEnv    = "PROCTOR_FLEET_AGENT"    // run as the agent
	fleetProviderEnv = "PROCTOR_FLEET_PROVIDER" // the fake provider's OpenAI base URL
	fleetRefusedEnv  = "PROCTOR_FLEET_REFUSED"  // a file the worker's gateway appends a line to per refused call
	fleetWorkerEnv   = "PROCTOR_FLEET_WORKER"   // the worker's PID, sent by its agents as the request's "user"
)

func init() {
	if os.Getenv(fleetAgentEnv) == "1" {
		os.Exit(fleetAgent())
	}
	runAgentWorker(fleetEval(), fleetProviderEnv, "", time.Minute, func(gw *gateway.Gateway) eval.Models {
		return refusalLog{gw, os.Getenv(fleetRefusedEnv)}
	})
}

// fleetAgent calls the model through the gateway, streamed, up to 8
// times, and stops at the first call refused.
func fleetAgent() int {
	body := `{"model":"gpt-4o-mini","stream":true,"user":"` + os.Getenv(fleetWorkerEnv) + `","messages":[{"role":"user","content":"go on"}]}`
	for range 8 {
		req, err := http.NewRequest("POST", os.Getenv("OPENAI_BASE_URL")+"/chat/completions", strings.NewReader(body))
		if err != nil {
			return 1
		}
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
			fmt.Println("refused:", resp.StatusCode)
			return 3
		}
	}
	return 0
}

// fleetEval runs fleetAgent in a sandbox per sample, 40 samples.
func fleetEval() *eval.Eval[int, harness.CommandOutput] {
	env := map[string]string{fleetAgentEnv: "1", fleetWorkerEnv: strconv.Itoa(os.Getpid())}
	return agentEval("cluster-fleet", numbered("a", 40), env, time.Minute, func(out harness.CommandOutput) judge.Verdict {
		return judge.Verdict{Pass: out.ExitCode == 0}
	})
}

// refusalLog is a gateway that appends "refused <pid>" to a file for
// each call it answers 429 (the budget refusal of an OpenAI call).
type refusalLog struct {
	*gateway.Gateway
	file string
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (g refusalLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	g.Gateway.ServeHTTP(sw, r)
	if sw.status == http.StatusTooManyRequests {
		f, err := os.OpenFile(g.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err == nil {
			fmt.Fprintf(f, "refused %d\n", os.Getpid())
			f.Close()
		}
	}
}

// TestRunBudgetHoldsAcrossWorkersOnTheWire: two workers, two agents each,
// every call 100 tokens and about 90 ms (three chunks 30 ms apart), a
// run budget of 2,050 tokens. The 21st recorded call reaches it: from
// then on a call is refused on every worker, and the run ends
// budget-stopped. The bound: besides those 21, only the calls in flight
// when it was reached (at most 3, one per other agent) and those that
// started on the other worker before the spend reached it (at most one
// per agent there: 2, since a call outlasts that by far) are served.
// Without the shared spend, neither worker refuses a call and the run
// overshoots until records come in.
func TestRunBudgetHoldsAcrossWorkersOnTheWire(t *testing.T) {
	t.Parallel()
	const callTokens, budget = 100, 2050
	p := gatewaytest.New()
	t.Cleanup(p.Close)
	p.ChunkDelay = 30 * time.Millisecond
	// No call is answered until both workers call: each holds its share
	// of the spend from the start.
	var mu sync.Mutex
	callers := map[string]int{}
	both := make(chan struct{})
	p.Usage = func(r gatewaytest.Request) usage.Usage {
		var b struct{ User string }
		json.Unmarshal(r.Body, &b)
		mu.Lock()
		callers[b.User]++
		if len(callers) == 2 && callers[b.User] == 1 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
		case <-time.After(time.Minute):
		}
		return usage.Usage{InputTokens: 60, OutputTokens: callTokens - 60}
	}

	log := filepath.Join(t.TempDir(), "run.jsonl")
	refused := filepath.Join(t.TempDir(), "refused")
	ctx, cancel := context.WithCancel(context.Background())
	c, err := StartCoordinator(ctx, fleetEval(), eval.Config{Epochs: 1, Seed: testSeed, Retries: -1, Log: log, MaxTokens: budget}, coordinatorOptions())
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
	env := []string{fleetProviderEnv + "=" + p.OpenAIBaseURL(), fleetRefusedEnv + "=" + refused}
	workers := []*proc{startEnv(t, shape{}, env, workerArgs(c, 2)...), startEnv(t, shape{}, env, workerArgs(c, 2)...)}

	o := await(t, out, 90*time.Second)
	require.NoError(t, o.err)
	require.True(t, o.rep.BudgetExhausted, "the run is not budget-stopped")
	pids := map[string]bool{}
	for _, w := range workers {
		require.Equal(t, 1, w.wait(t, 20*time.Second), "a worker after the budget stop:\n%s", w.stderr)
		require.Contains(t, w.stderr.String(), "budget")
		pids[strconv.Itoa(w.cmd.Process.Pid)] = true
	}

	served := len(p.Served())
	require.GreaterOrEqual(t, served, 21, "the run stopped before its budget")
	require.LessOrEqual(t, served, 21+3+2, "calls served past the budget's bound")
	b, err := os.ReadFile(refused)
	require.NoError(t, err, "no call was refused")
	refusedBy := map[string]bool{}
	for l := range strings.Lines(string(b)) {
		refusedBy[strings.TrimSpace(strings.TrimPrefix(l, "refused "))] = true
	}
	require.Empty(t, cmp.Diff(pids, refusedBy), "the workers that refused a call (-workers +refused)")
	mu.Lock()
	require.Len(t, callers, 2)
	mu.Unlock()

	// What was recorded is an agent that ran its 8 calls, or one stopped
	// at the run's budget.
	var tokens int64
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		tokens += r.InputTokens + r.OutputTokens
		if r.Status != sink.Pass {
			require.Equal(t, sink.KindLimit, r.ErrorKind, "%s: %s", r.SampleID, r.Error)
			require.Contains(t, r.Error, "the run's budget")
			require.Contains(t, r.Error, "Config.MaxTokens 2050")
		}
	}
	require.LessOrEqual(t, tokens, int64(served*callTokens))
}
