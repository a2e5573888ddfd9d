package cluster

// Resume by replay across workers: a worker SIGKILLed mid-episode, its
// episode run again on another worker, whose gateway answers the agent
// from the calls the dead worker stored in the run's calls stream.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/usage"
)

const (
	replayAgentEnv    = "PROCTOR_REPLAY_AGENT"    // run as the deterministic agent
	replayProviderEnv = "PROCTOR_REPLAY_PROVIDER" // the provider's OpenAI base URL: be a worker of replayEval
	replayWorkerEnv   = "PROCTOR_REPLAY_WORKER"   // the worker's PID, sent by its agent in a header (not the body: replay matches bodies)
	replayTurns       = 10
)

func init() {
	if os.Getenv(replayAgentEnv) == "1" {
		os.Exit(replayAgent())
	}
	runAgentWorker(replayEval(), replayProviderEnv, "sk-replay", time.Minute, nil)
}

// replayAgent is a deterministic multi-turn agent: replayTurns streamed
// calls, each request the conversation so far (its answers' text
// included), in a file of its workspace each answer's text.
func replayAgent() int {
	type msg = map[string]string
	messages := []msg{{"role": "user", "content": "count"}}
	for turn := range replayTurns {
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "stream": true, "messages": messages})
		req, _ := http.NewRequest("POST", os.Getenv("OPENAI_BASE_URL")+"/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Test-Worker", os.Getenv(replayWorkerEnv))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			fmt.Println("turn", turn, resp.StatusCode, err)
			return 1
		}
		var text strings.Builder
		for l := range strings.Lines(string(b)) {
			var ch struct {
				Choices []struct{ Delta struct{ Content string } }
			}
			if d, ok := strings.CutPrefix(strings.TrimSpace(l), "data: "); ok && json.Unmarshal([]byte(d), &ch) == nil {
				for _, c := range ch.Choices {
					text.WriteString(c.Delta.Content)
				}
			}
		}
		messages = append(messages, msg{"role": "assistant", "content": text.String()}, msg{"role": "user", "content": "turn " + strconv.Itoa(turn+1)})
		f, err := os.OpenFile("answers.txt", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return 1
		}
		fmt.Fprintf(f, "%d %s\n", turn, text.String())
		f.Close()
	}
	b, _ := os.ReadFile("answers.txt")
	fmt.Print(string(b))
	return 0
}

// replayEval runs replayAgent in a sandbox, one sample.
func replayEval() *eval.Eval[int, harness.CommandOutput] {
	env := map[string]string{replayAgentEnv: "1", replayWorkerEnv: strconv.Itoa(os.Getpid())}
	return agentEval("cluster-replay", dataset.Slice[int]{{ID: "long", Input: 0}}, env, time.Minute, func(out harness.CommandOutput) judge.Verdict {
		return judge.Verdict{Pass: out.ExitCode == 0 && strings.Count(out.Stdout, "\n") == replayTurns, Reason: out.Stdout}
	})
}

// TestKilledWorkersEpisodeResumesByReplay: two worker processes, one
// 10-call episode; the provider SIGKILLs the worker whose agent's call k
// arrives (k calls answered and acknowledged), k drawn from a fixed seed,
// killKills times. Each time the episode runs again on the other worker,
// whose gateway loads the k calls from the run's calls stream and replays
// them: the provider's calls total one more than an uninterrupted run's
// (the one in flight), the agent's answers (its workspace's file) are the
// uninterrupted run's, and the record counts k calls replayed and the
// tokens of those bought live, each call's tokens once.
func TestKilledWorkersEpisodeResumesByReplay(t *testing.T) {
	t.Parallel()
	const kills, seed = 4, 32
	base := runReplayCluster(t, syscall.SIGKILL, -1)
	require.Zero(t, base.killed, "nothing to kill")
	require.Equal(t, int64(replayTurns), base.calls)
	require.Zero(t, base.rec.CallsReplayed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	for _, killAt := range rnd.Perm(replayTurns)[:kills] {
		t.Run(fmt.Sprintf("kill at call %d", killAt+1), func(t *testing.T) {
			run := runReplayCluster(t, syscall.SIGKILL, int64(killAt))
			require.NotZero(t, run.killed, "no worker was killed")
			require.Equal(t, int64(replayTurns+1), run.calls, "the provider's calls: an uninterrupted run's and the one in flight")
			require.Equal(t, replayTurns, run.served, "answered: those before the kill and the rest live after")
			require.Equal(t, killAt, run.rec.CallsReplayed, "the calls answered before the kill are replayed")
			require.Equal(t, base.rec.Reason, run.rec.Reason, "the agent's answers are the uninterrupted run's")
			require.Equal(t, base.rec.InputTokens+base.rec.OutputTokens, run.rec.InputTokens+run.rec.OutputTokens+int64(run.rec.CallsReplayed*replayCallTokens), "each call's tokens once: live billed, replayed free")
		})
	}
}

// TestPreemptedWorkersEpisodeResumesByReplay: the same with SIGTERM (a
// spot instance's notice, a pod's eviction) at call 6's arrival: the
// worker stops gracefully, handing its episode back, and the call in
// flight may be answered and stored before it stops; the other worker
// replays what was stored and buys at most that one call again.
func TestPreemptedWorkersEpisodeResumesByReplay(t *testing.T) {
	t.Parallel()
	const killAt = 5
	run := runReplayCluster(t, syscall.SIGTERM, killAt)
	require.NotZero(t, run.killed, "no worker was preempted")
	require.LessOrEqual(t, run.calls, int64(replayTurns+1), "the provider's calls: an uninterrupted run's and the one in flight")
	require.Contains(t, []int{killAt, killAt + 1}, run.rec.CallsReplayed, "the calls answered before the preemption are replayed, and the one in flight if it was stored")
}

const replayCallTokens = 100 // each provider answer's tokens

// replayRun is what runReplayCluster saw: the episode's record, the
// provider's calls and answers, the PID signalled (0 if none).
type replayRun struct {
	rec    sink.Record
	calls  int64
	served int
	killed int
}

// runReplayCluster runs replayEval on a coordinator and two worker
// processes, the provider sending sig to the worker whose agent's call
// killAt+1 arrives (never if killAt < 0), and checks what holds for every
// run: the episode passes on the worker not signalled, which exits 0,
// replay never diverges, the record bills only live calls, and the report
// counts the replayed calls.
func runReplayCluster(t *testing.T, sig syscall.Signal, killAt int64) replayRun {
	p := gatewaytest.New()
	t.Cleanup(p.Close)
	p.Usage = func(gatewaytest.Request) usage.Usage {
		return usage.Usage{InputTokens: 80, OutputTokens: replayCallTokens - 80}
	}
	var calls atomic.Int64
	var killed atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1)-1 == killAt {
			pid, _ := strconv.Atoi(r.Header.Get("X-Test-Worker"))
			if pid > 0 && killed.CompareAndSwap(0, int64(pid)) {
				syscall.Kill(pid, sig)
				if sig == syscall.SIGKILL {
					return
				}
			}
		}
		p.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	log := filepath.Join(t.TempDir(), "run.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	c, err := StartCoordinator(ctx, replayEval(), eval.Config{Epochs: 1, Seed: testSeed, Retries: -1, Log: log}, coordinatorOptions())
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
	env := []string{replayProviderEnv + "=" + front.URL + "/v1"}
	workers := []*proc{startEnv(t, shape{}, env, workerArgs(c, 1)...), startEnv(t, shape{}, env, workerArgs(c, 1)...)}

	o := await(t, out, 90*time.Second)
	require.NoError(t, o.err)
	var survivors []*proc
	for _, w := range workers {
		if w.cmd.Process.Pid != int(killed.Load()) {
			survivors = append(survivors, w)
		}
	}
	for _, w := range survivors {
		require.Equal(t, 0, w.wait(t, 20*time.Second), "a worker not signalled:\n%s", w.stderr)
	}

	var recs []sink.Record
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		recs = append(recs, r)
	}
	require.Len(t, recs, 1)
	r := recs[0]
	require.Equal(t, sink.Pass, r.Status, "%s %s", r.Error, r.Reason)
	if killed.Load() != 0 {
		require.Len(t, survivors, 1)
		require.Equal(t, strconv.Itoa(survivors[0].cmd.Process.Pid), r.Worker[strings.LastIndexByte(r.Worker, ':')+1:], "run again on the survivor")
	}
	require.Zero(t, r.ReplayDivergedAt)
	require.Equal(t, int64((replayTurns-r.CallsReplayed)*replayCallTokens), r.InputTokens+r.OutputTokens, "the record bills the live calls; the replayed are free")
	if r.CallsReplayed > 0 {
		require.NotNil(t, o.rep.Replay, "the report counts the replayed calls")
		require.Equal(t, r.CallsReplayed, o.rep.Replay.Replayed)
	}
	return replayRun{rec: r, calls: calls.Load(), served: len(p.Served()), killed: int(killed.Load())}
}
