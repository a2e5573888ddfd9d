package cluster

// What the cluster's tests of agents behind a model gateway share: the
// test binary, started again as a worker, runs an eval whose agent is the
// test binary once more, in a local sandbox per episode.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/local"
)

// runAgentWorker, in a child started as a worker (PROCTOR_CLUSTER_CHILD)
// with providerEnv naming a fake provider's OpenAI base URL, runs e as a
// worker: its gateway to that provider with key, each episode's sandbox
// local; models, when set, wraps the gateway. It reports false, doing
// nothing, in any other process.
func runAgentWorker(e *eval.Eval[int, harness.CommandOutput], providerEnv, key string, timeout time.Duration, models func(*gateway.Gateway) eval.Models) bool {
	if os.Getenv("PROCTOR_CLUSTER_CHILD") != "1" || os.Getenv(providerEnv) == "" {
		return false
	}
	os.Args = append([]string{"proctor-cluster-test"}, strings.Split(os.Getenv("PROCTOR_CLUSTER_ARGS"), "\x1f")...)
	gw, err := gateway.New(gateway.Options{OpenAI: gateway.Upstream{BaseURL: os.Getenv(providerEnv), Key: key}})
	if err != nil {
		panic(err)
	}
	var m eval.Models = gw
	if models != nil {
		m = models(gw)
	}
	dir, err := os.MkdirTemp("", "proctor-agents-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	Main(e, eval.Config{Retries: -1, Timeout: timeout, Sandbox: local.New(&local.Options{Dir: dir}), Models: m})
	return true
}

// agentEval runs this test binary, with env, as the agent of each sample
// in a sandbox of its own; judged by judge from the agent's output.
func agentEval(name string, samples dataset.Slice[int], env map[string]string, timeout time.Duration, verdict func(harness.CommandOutput) judge.Verdict) *eval.Eval[int, harness.CommandOutput] {
	exe, _ := os.Executable()
	return &eval.Eval[int, harness.CommandOutput]{
		Name:    name,
		Dataset: samples,
		Sandbox: func(dataset.Sample[int]) sandbox.Spec { return sandbox.Spec{} },
		Harness: harness.Command[int]{Cmd: func(*harness.Episode[int]) sandbox.Cmd {
			return sandbox.Cmd{Args: []string{exe}, Env: env, Timeout: timeout}
		}},
		Judge: judge.Func[int, harness.CommandOutput](func(_ context.Context, _ *harness.Episode[int], out harness.CommandOutput) (judge.Verdict, error) {
			return verdict(out), nil
		}),
	}
}

// numbered is n samples named prefix and a two-digit number.
func numbered(prefix string, n int) dataset.Slice[int] {
	samples := make(dataset.Slice[int], n)
	for i := range samples {
		samples[i] = dataset.Sample[int]{ID: fmt.Sprintf("%s%02d", prefix, i), Input: i}
	}
	return samples
}
