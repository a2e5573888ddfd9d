package gateway_test

// Graceful preemption: the engine in a process of its own (this test
// binary run again as a child, see TestMain), stopped by SIGTERM as a spot
// instance or an evicted pod is, mid-episode.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/sidecar"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/local"
	"github.com/proctor-evals/proctor/sink"
)

// replayEval is one sample whose agent is the deterministic agent of
// resume_test.go (this binary again, in a local sandbox): turns calls,
// its workspace's digest its standard output.
func replayEval(turns int) *eval.Eval[int, harness.CommandOutput] {
	return &eval.Eval[int, harness.CommandOutput]{
		Name:    "preempt",
		Dataset: dataset.Slice[int]([]dataset.Sample[int]{{ID: "s", Input: turns}}),
		Harness: harness.Command[int]{Cmd: func(ep *harness.Episode[int]) sandbox.Cmd {
			return sandbox.Cmd{Args: []string{os.Args[0]}, Env: map[string]string{agentEnv: "1", "TURNS": strconv.Itoa(ep.Sample.Input)}, Timeout: time.Minute}
		}},
		Judge: judge.Func[int, harness.CommandOutput](func(_ context.Context, _ *harness.Episode[int], out harness.CommandOutput) (judge.Verdict, error) {
			return judge.Verdict{Pass: out.ExitCode == 0, Reason: out.Stderr}, nil
		}),
		Sandbox: func(dataset.Sample[int]) sandbox.Spec { return sandbox.Spec{} },
	}
}

// runEngineChild runs replayEval(TURNS) to log, its gateway to the
// provider at PROVIDER, under eval.InterruptContext as a CLI does; it
// exits 0 once Run returned, whatever it returned.
func runEngineChild(log string) int {
	turns, _ := strconv.Atoi(os.Getenv("TURNS"))
	g, err := gateway.New(gateway.Options{OpenAI: gateway.Upstream{BaseURL: os.Getenv("PROVIDER") + "/v1", Key: providerKey}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	ctx, stop := eval.InterruptContext(context.Background())
	defer stop()
	dir, err := os.MkdirTemp("", "preempt")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	_, err = replayEval(turns).Run(ctx, eval.Config{Sandbox: local.New(&local.Options{Dir: dir}), Models: g, Log: log, Quiet: true})
	fmt.Fprintln(os.Stderr, "child: Run returned:", err)
	return 0
}

// storedSeqs returns the Seq of each line of the call store at path.
func storedSeqs(t *testing.T, path string) []int {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var seqs []int
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var c struct{ Seq int }
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c), "a whole line")
		seqs = append(seqs, c.Seq)
	}
	require.NoError(t, sc.Err())
	require.True(t, len(seqs) == 0 || bytes.HasSuffix(must(os.ReadFile(path)), []byte("\n")), "no torn tail")
	return seqs
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSIGTERMKeepsEveryAcknowledgedCallAndResumesByReplay: the engine's
// process, its episode at call `at` of 10 (the agent has read the
// answers of the calls before it: acknowledged them), gets SIGTERM (a
// spot instance's notice) and stops gracefully; its call store holds
// every acknowledged call, whole lines in order. The run resumed on the
// same log replays them: the provider's calls of both runs total at most
// one more than an uninterrupted run's, the workspace is the same, and
// the record counts the calls replayed. At 3 call positions.
func TestSIGTERMKeepsEveryAcknowledgedCallAndResumesByReplay(t *testing.T) {
	const turns = 10
	k := newKiller(t)
	dir := t.TempDir()
	prov := func() *gateway.Gateway {
		g, err := gateway.New(gateway.Options{OpenAI: gateway.Upstream{BaseURL: k.srv.URL + "/v1", Key: providerKey}})
		require.NoError(t, err)
		return g
	}
	output := func(log string) (sink.Record, string) {
		recs, _ := logOf(t, log)
		rec := recs["s"]
		require.Equal(t, sink.Pass, rec.Status, rec.Error)
		var out harness.CommandOutput
		require.NoError(t, json.Unmarshal(rec.Output, &out))
		return rec, strings.TrimSpace(out.Stdout)
	}
	base := filepath.Join(dir, "base.jsonl")
	_, err := replayEval(turns).Run(context.Background(), eval.Config{Sandbox: local.New(&local.Options{Dir: t.TempDir()}), Models: prov(), Log: base, Quiet: true})
	require.NoError(t, err)
	_, want := output(base)
	require.Equal(t, int64(turns), k.calls.Load())

	for _, at := range []int64{1, 5, 9} {
		log := filepath.Join(dir, fmt.Sprintf("at%d.jsonl", at))
		before := k.calls.Load()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), engineEnv+"="+log, "PROVIDER="+k.srv.URL, "TURNS="+strconv.Itoa(turns))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		k.mu.Lock()
		k.signal = syscall.SIGTERM
		require.NoError(t, cmd.Start())
		k.pid, k.killAt = cmd.Process.Pid, before+at
		k.mu.Unlock()
		err := cmd.Wait()
		k.mu.Lock()
		k.pid, k.killAt, k.signal = 0, -1, 0
		k.mu.Unlock()
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			t.Fatalf("SIGTERM at call %d: the child did not stop gracefully: %v\n%s", at, ee, stderr.String())
		}
		require.NoError(t, err, stderr.String())
		recs, _ := logOf(t, log)
		require.Empty(t, recs, "SIGTERM at call %d: the episode was in flight, not finished\n%s", at, stderr.String())
		t.Logf("SIGTERM at call %d: %s", at, strings.TrimSpace(stderr.String()))
		seqs := storedSeqs(t, sidecar.Calls(log))
		require.GreaterOrEqual(t, len(seqs), int(at), "SIGTERM at call %d: every call the agent acknowledged is stored\n%s", at, stderr.String())
		for i, s := range seqs {
			require.Equal(t, i, s, "in order")
		}

		_, err = replayEval(turns).Run(context.Background(), eval.Config{Sandbox: local.New(&local.Options{Dir: t.TempDir()}), Models: prov(), Log: log, Quiet: true})
		require.NoError(t, err)
		rec, got := output(log)
		require.Equal(t, want, got, "SIGTERM at call %d: the same workspace", at)
		require.LessOrEqual(t, k.calls.Load()-before, int64(turns+1), "SIGTERM at call %d: provider calls", at)
		require.GreaterOrEqual(t, rec.CallsReplayed, int(at), "SIGTERM at call %d: the record counts the calls replayed", at)
		require.Zero(t, rec.ReplayDivergedAt)
	}
}
