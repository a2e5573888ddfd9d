package kubernetes_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/cluster"
	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/kubernetes"
	"github.com/proctor-evals/proctor/sandbox/kubernetes/internal/kubetest"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// An eval run through package cluster (an embedded NATS server, a
// coordinator and two workers) whose workers' sandboxes are this driver's
// pods: every sample's environment provisioned on one worker, every
// episode in its own pod, one record per key, nothing left behind.
func TestClusterRun(t *testing.T) {
	c := kubetest.Start(t)
	ns := c.Namespace(t)
	image := kubetest.BusyboxImage(t)
	const samples, epochs = 6, 2
	var data dataset.Slice[int]
	for i := range samples {
		data = append(data, dataset.Sample[int]{ID: fmt.Sprintf("s%d", i), Input: i})
	}
	e := &eval.Eval[int, string]{
		Name:    "k8s-cluster",
		Dataset: data,
		Sandbox: func(s dataset.Sample[int]) sandbox.Spec {
			return sandbox.Spec{Image: image, Files: map[string][]byte{"n": []byte(strconv.Itoa(s.Input))},
				Setup: []sandbox.Cmd{{Args: []string{"sh", "-c", `echo $(( $(cat n) * 7 )) > answer`}}}}
		},
		Harness: harness.Func[int, string](func(ctx context.Context, ep *harness.Episode[int]) (string, error) {
			// Each episode writes into its own fork: another episode of
			// the sample must not see it.
			res, err := ep.Sandbox.Exec(ctx, sandbox.Cmd{Args: []string{"sh", "-c", `[ ! -e mine ] && echo "$0" > mine && cat answer`, strconv.Itoa(ep.Epoch)}})
			if err != nil {
				return "", err
			}
			if res.ExitCode != 0 {
				return "", fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			return string(res.Stdout), nil
		}),
		Judge: judge.Func[int, string](func(_ context.Context, ep *harness.Episode[int], out string) (judge.Verdict, error) {
			if out == strconv.Itoa(ep.Sample.Input*7)+"\n" {
				return judge.Pass(""), nil
			}
			return judge.Fail(fmt.Sprintf("answered %q", out)), nil
		}),
	}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	cfg := eval.Config{Epochs: epochs, Seed: 7, Retries: -1, Log: log, Timeout: 2 * time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	coord, err := cluster.StartCoordinator(ctx, e, cfg, &cluster.CoordinatorOptions{Listen: "127.0.0.1:0", Token: "k8s-test", Linger: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	args := coord.JoinArgs()
	i := slices.Index(args, "-join")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("no -join in %q", args)
	}
	join := args[i+1]
	workers := make(chan error, 2)
	var drivers []*kubernetes.Driver
	for n := range 2 {
		p, err := kubernetes.New(kubernetes.Options{Config: c.RESTConfig(), Namespace: ns, NodeSelector: c.NodeSelector()})
		if err != nil {
			t.Fatal(err)
		}
		drivers = append(drivers, p.Driver().(*kubernetes.Driver))
		wcfg := eval.Config{Epochs: epochs, Seed: 7, Retries: -1, Timeout: 2 * time.Minute, Concurrency: 4, Sandbox: p, Worker: fmt.Sprintf("worker-%d", n)}
		go func() { workers <- cluster.Work(ctx, e, wcfg, &cluster.WorkerOptions{Join: join, Token: "k8s-test"}) }()
	}
	rep, err := coord.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-workers; err != nil {
			t.Errorf("worker: %v", err)
		}
	}
	if rep.Passed != samples*epochs {
		t.Errorf("%d passed of %d: %v", rep.Passed, samples*epochs, rep.Failures)
	}
	seen := map[sink.Key]int{}
	ranOn := map[string]bool{}
	for r, err := range jsonl.Records(log) {
		if err != nil {
			t.Fatal(err)
		}
		seen[r.Key()]++
		ranOn[r.Worker] = true
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%v recorded %d times", k, n)
		}
	}
	if len(seen) != samples*epochs {
		t.Errorf("%d keys logged, want %d", len(seen), samples*epochs)
	}
	t.Logf("records from workers %v", ranOn)
	for _, d := range drivers {
		// Every environment and sandbox was closed: nothing to clean up.
		requireNothingLeft(t, d.Client(), ns, d.RunID())
	}
}
