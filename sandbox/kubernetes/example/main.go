// Sandboxed-arith is the Kubernetes sandbox driver's example: an eval
// binary whose every episode acts in a pod of its own. Each sample's
// environment (the task as a file, a Setup step) is provisioned once in a
// seed pod; each episode forks a pod from it, computes the answer there
// with sh and writes it to a file the judge reads.
//
// The same binary is the coordinator and the workers
// (examples/distributed/k8s/sandboxed-arith.yaml runs it on a cluster;
// docs/kubernetes.md goes from kubectl apply to the report), or one
// machine with a kubeconfig:
//
//	go run ./example run -log runs/one.jsonl     # from sandbox/kubernetes, with $KUBECONFIG
//
// $PROCTOR_SANDBOX_IMAGE is the sandboxes' image (default busybox:1.36),
// $PROCTOR_SANDBOX_RUN their proctor.run label (the manifest gives each
// worker its pod's name), $PROCTOR_SANDBOX_NAMESPACE their namespace
// (default the worker's own), and $PROCTOR_NETWORK_POLICY_ENFORCED=1 says
// that the cluster enforces NetworkPolicies (docs/kubernetes.md says how to
// check).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/proctor-evals/proctor/cluster"
	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/kubernetes"
)

// Task is one sum or difference.
type Task struct {
	A, B   int
	Op     string
	Answer int
}

func newEval(image string) *eval.Eval[Task, int] {
	var d dataset.Slice[Task]
	for i := range 12 {
		t := Task{A: 5*i + 3, B: i%7 + 1, Op: "+"}
		t.Answer = t.A + t.B
		if i%2 == 1 {
			t.Op, t.Answer = "-", t.A-t.B
		}
		d = append(d, dataset.Sample[Task]{ID: fmt.Sprintf("task-%d", i), Input: t})
	}
	return &eval.Eval[Task, int]{
		Name:    "sandboxed-arith",
		Dataset: d,
		Sandbox: func(s dataset.Sample[Task]) sandbox.Spec {
			return sandbox.Spec{
				Image: image,
				Files: map[string][]byte{"task": fmt.Appendf(nil, "%d %s %d\n", s.Input.A, s.Input.Op, s.Input.B)},
				Setup: []sandbox.Cmd{{Args: []string{"sh", "-c", "mkdir -p work && cp task work/task"}}},
			}
		},
		// A stand-in agent that acts in its sandbox.
		Harness: harness.Func[Task, int](func(ctx context.Context, ep *harness.Episode[Task]) (int, error) {
			res, err := ep.Sandbox.Exec(ctx, sandbox.Cmd{Dir: "work", Args: []string{"sh", "-c", `set -f; set -- $(cat task); echo $(($1 $2 $3)) > answer`}})
			if err != nil {
				return 0, err
			}
			if res.ExitCode != 0 {
				return 0, fmt.Errorf("the agent's command exited %d: %s", res.ExitCode, res.Stderr)
			}
			b, err := ep.Sandbox.ReadFile(ctx, "work/answer")
			if err != nil {
				return 0, err
			}
			return strconv.Atoi(strings.TrimSpace(string(b)))
		}),
		Judge: judge.Func[Task, int](func(_ context.Context, ep *harness.Episode[Task], got int) (judge.Verdict, error) {
			if got == ep.Sample.Input.Answer {
				return judge.Pass("right"), nil
			}
			return judge.Fail(fmt.Sprintf("got %d, want %d", got, ep.Sample.Input.Answer)), nil
		}),
		Versions: eval.Versions{Harness: "sh-1", Judge: "exact-1", Sandbox: "busybox-1"},
	}
}

// realMain runs the command in args; the sandbox provider is made only
// for the commands that run episodes (a coordinator needs none).
func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	image := os.Getenv("PROCTOR_SANDBOX_IMAGE")
	if image == "" {
		image = "busybox:1.36"
	}
	cfg := eval.Config{Epochs: 2, Seed: 2026, Concurrency: 4}
	if len(args) > 0 && (args[0] == "run" || args[0] == "work") {
		p, err := kubernetes.New(kubernetes.Options{
			RunID:                 os.Getenv("PROCTOR_SANDBOX_RUN"),
			Namespace:             os.Getenv("PROCTOR_SANDBOX_NAMESPACE"),
			NetworkPolicy:         true,
			NetworkPolicyEnforced: os.Getenv("PROCTOR_NETWORK_POLICY_ENFORCED") == "1",
		})
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		cfg.Sandbox = p
		d := p.Driver().(*kubernetes.Driver)
		defer func() {
			// The run's NetworkPolicy, and any pod a crash left.
			if err := d.Cleanup(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintln(stderr, err)
			}
		}()
	}
	return cluster.MainArgs(ctx, newEval(image), cfg, args, stdout, stderr)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
