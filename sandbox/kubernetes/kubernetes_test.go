package kubernetes_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/kubernetes"
	"github.com/proctor-evals/proctor/sandbox/kubernetes/internal/kubetest"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// The environment of a child process (TestCleanupAfterKill9).
const (
	childEnv     = "PROCTOR_K8S_CHILD"
	childRunID   = "PROCTOR_K8S_CHILD_RUN"
	childNS      = "PROCTOR_K8S_CHILD_NAMESPACE"
	childImage   = "PROCTOR_K8S_CHILD_IMAGE"
	childNodeSel = "PROCTOR_K8S_CHILD_NODE_LABEL"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		child()
		return
	}
	kubetest.Main(m)
}

// child provisions an environment and forks two sandboxes from it, from
// $KUBECONFIG, says "ready" and waits to be killed.
func child() {
	k, v, _ := strings.Cut(os.Getenv(childNodeSel), "=")
	p, err := kubernetes.New(kubernetes.Options{RunID: os.Getenv(childRunID), Namespace: os.Getenv(childNS), NodeSelector: map[string]string{k: v}})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	env, err := p.Provision(ctx, sandbox.Spec{Image: os.Getenv(childImage), Files: map[string][]byte{"f": []byte("x")}})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for range 2 {
		if _, err := env.Fork(ctx); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
	}
	fmt.Println("ready")
	select {}
}

// provider returns a provider on the test cluster in a fresh namespace,
// and checks at the end of the test that nothing of its run is left once
// Cleanup ran.
func provider(t *testing.T, mod func(*kubernetes.Options)) (*sandbox.Provider, *kubernetes.Driver, *kubetest.Cluster) {
	t.Helper()
	c := kubetest.Start(t)
	opts := kubernetes.Options{Config: c.RESTConfig(), Namespace: c.Namespace(t), NodeSelector: c.NodeSelector()}
	if mod != nil {
		mod(&opts)
	}
	p, err := kubernetes.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	d := p.Driver().(*kubernetes.Driver)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := d.Cleanup(ctx); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
		requireNothingLeft(t, d.Client(), d.Namespace(), d.RunID())
	})
	return p, d, c
}

// requireNothingLeft fails unless no pod or NetworkPolicy of runID is
// left in ns.
func requireNothingLeft(t *testing.T, cs k8s.Interface, ns, runID string) {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: kubernetes.LabelRun + "=" + runID}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Errorf("pod %s (%s) left", p.Name, p.Labels[kubernetes.LabelRole])
	}
	pols, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pols.Items {
		t.Errorf("NetworkPolicy %s left", p.Name)
	}
}

func TestConformance(t *testing.T) {
	p, d, _ := provider(t, nil)
	if g := p.Guarantees(); g.Network || g.IPNetwork || g.Pids || !g.CPUs || !g.Memory || !g.Disk || !g.OOM {
		t.Errorf("Guarantees %+v: want CPUs, Memory, Disk and OOM (no NetworkPolicy)", g)
	}
	sandboxtest.Run(t, p, &sandboxtest.Options{Spec: sandbox.Spec{Image: kubetest.BusyboxImage(t)}})
	t.Cleanup(func() {
		// Every sandbox and environment closed by the suite deleted its
		// pod: nothing of the run is left before Cleanup.
		pods, err := d.Client().CoreV1().Pods(d.Namespace()).List(context.Background(), metav1.ListOptions{LabelSelector: kubernetes.LabelRun + "=" + d.RunID()})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(pods.Items); n > 0 {
			t.Errorf("%d pods left after every sandbox closed", n)
		}
	})
}

// startError provisions spec and returns its *StartError.
func startError(t *testing.T, p *sandbox.Provider, spec sandbox.Spec) *kubernetes.StartError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := p.Provision(ctx, spec)
	if err == nil {
		env.Close()
		t.Fatal("Provision succeeded")
	}
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("error %v does not wrap ErrUnavailable", err)
	}
	var se *kubernetes.StartError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *StartError", err)
	}
	return se
}

func TestImagePullFailure(t *testing.T) {
	p, _, _ := provider(t, nil)
	se := startError(t, p, sandbox.Spec{Image: "proctor-no-such-image:v1"})
	if se.Reason != "ErrImagePull" && se.Reason != "ImagePullBackOff" {
		t.Errorf("reason %q, want ErrImagePull or ImagePullBackOff", se.Reason)
	}
	if !strings.Contains(se.Error(), "proctor-no-such-image:v1") {
		t.Errorf("the error does not name the image: %v", se)
	}
	t.Log(se)
}

func TestUnschedulable(t *testing.T) {
	p, _, _ := provider(t, func(o *kubernetes.Options) { o.NodeSelector = map[string]string{"proctor.dev/no-such-pool": "true"} })
	se := startError(t, p, sandbox.Spec{Image: kubetest.BusyboxImage(t)})
	if se.Reason != "Unschedulable" {
		t.Errorf("reason %q, want Unschedulable", se.Reason)
	}
	if !strings.Contains(se.Message, "node") {
		t.Errorf("message %q is not the scheduler's", se.Message)
	}
	t.Log(se)

	// With a grace for an autoscaler, the pod waits; past StartTimeout
	// the error says why it is not running.
	p, _, _ = provider(t, func(o *kubernetes.Options) {
		o.NodeSelector = map[string]string{"proctor.dev/no-such-pool": "true"}
		o.SchedulingGrace, o.StartTimeout = time.Hour, 2*time.Second
	})
	se = startError(t, p, sandbox.Spec{Image: kubetest.BusyboxImage(t)})
	if se.Reason != "Timeout" || !strings.Contains(se.Message, "didn't match Pod's node affinity/selector") {
		t.Errorf("got %v, want a timeout with the scheduler's message", se)
	}
	t.Log(se)
}

func TestQuotaRefused(t *testing.T) {
	p, d, _ := provider(t, nil)
	ctx := context.Background()
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	if _, err := d.Client().CoreV1().ResourceQuotas(d.Namespace()).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The quota applies once the controller-manager has counted its usage.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		q, err := d.Client().CoreV1().ResourceQuotas(d.Namespace()).Get(ctx, "no-pods", metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	se := startError(t, p, sandbox.Spec{Image: kubetest.BusyboxImage(t)})
	if se.Reason != string(metav1.StatusReasonForbidden) || !strings.Contains(se.Message, "exceeded quota") {
		t.Errorf("got %v, want the quota's refusal", se)
	}
	t.Log(se)
}

func TestKubeconfig(t *testing.T) {
	c := kubetest.Start(t)
	ns := c.Namespace(t)
	t.Setenv("KUBECONFIG", c.Kubeconfig())
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod, whatever runs the test
	p, err := kubernetes.New(kubernetes.Options{Namespace: ns, NodeSelector: c.NodeSelector()})
	if err != nil {
		t.Fatal(err)
	}
	d := p.Driver().(*kubernetes.Driver)
	t.Cleanup(func() { d.Cleanup(context.Background()) })
	ctx := context.Background()
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{Image: kubetest.BusyboxImage(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"echo", "from KUBECONFIG"}})
	if err != nil || string(res.Stdout) != "from KUBECONFIG\n" {
		t.Fatalf("Exec: %q, %v", res.Stdout, err)
	}

	t.Setenv("KUBECONFIG", t.TempDir()+"/missing")
	t.Setenv("HOME", t.TempDir())
	if _, err := kubernetes.New(kubernetes.Options{}); err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("New without any configuration: %v, want an error naming the kubeconfig", err)
	}
}

func TestNetworkPolicy(t *testing.T) {
	p, d, _ := provider(t, func(o *kubernetes.Options) { o.NetworkPolicy = true })
	if g := p.Guarantees(); g.Network || g.IPNetwork {
		t.Errorf("network isolation claimed without NetworkPolicyEnforced: %+v", g)
	}
	ctx := context.Background()
	env, err := p.Provision(ctx, sandbox.Spec{Image: kubetest.BusyboxImage(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	pols, err := d.Client().NetworkingV1().NetworkPolicies(d.Namespace()).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelRun + "=" + d.RunID()})
	if err != nil {
		t.Fatal(err)
	}
	if len(pols.Items) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1", len(pols.Items))
	}
	pol := pols.Items[0]
	want := map[string]string{kubernetes.LabelRun: d.RunID(), kubernetes.LabelNetwork: "off"}
	if fmt.Sprint(pol.Spec.PodSelector.MatchLabels) != fmt.Sprint(want) || len(pol.Spec.Egress) > 0 || len(pol.Spec.Ingress) > 0 || len(pol.Spec.PolicyTypes) != 2 {
		t.Errorf("policy %+v: want every egress and ingress of the run's network-off pods denied", pol.Spec)
	}
	enforced, err := kubernetes.New(kubernetes.Options{Config: d.Config(), Namespace: d.Namespace(), NetworkPolicy: true, NetworkPolicyEnforced: true})
	if err != nil {
		t.Fatal(err)
	}
	if g := enforced.Guarantees(); !g.Network {
		t.Errorf("network isolation not claimed with an enforced policy: %+v", g)
	}
}

// A pod deleted under a running episode fails that episode (the sandbox
// is unavailable); the run goes on and reports the other samples.
func TestPodDeletedUnderEpisode(t *testing.T) {
	p, d, _ := provider(t, nil)
	image := kubetest.BusyboxImage(t)
	samples := dataset.Slice[string]{{ID: "a", Input: "a"}, {ID: "victim", Input: "victim"}, {ID: "b", Input: "b"}, {ID: "c", Input: "c"}}
	e := &eval.Eval[string, string]{
		Name:    "pod-deleted",
		Dataset: samples,
		Sandbox: func(s dataset.Sample[string]) sandbox.Spec {
			return sandbox.Spec{Image: image, Setup: []sandbox.Cmd{{Args: []string{"sh", "-c", `printf %s "$0" > id.txt`, s.ID}}}}
		},
		Harness: harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
			if ep.Sample.ID == "victim" {
				// The pod's name is its hostname; delete it as an operator
				// or the cluster's eviction would.
				res, err := ep.Sandbox.Exec(ctx, sandbox.Cmd{Args: []string{"hostname"}})
				if err != nil {
					return "", err
				}
				// Deleted while a command runs in it.
				deleted := make(chan error, 1)
				go func() {
					time.Sleep(time.Second)
					zero := int64(0)
					deleted <- d.Client().CoreV1().Pods(d.Namespace()).Delete(ctx, strings.TrimSpace(string(res.Stdout)), metav1.DeleteOptions{GracePeriodSeconds: &zero})
				}()
				res, err = ep.Sandbox.Exec(ctx, sandbox.Cmd{Args: []string{"sleep", "30"}})
				if derr := <-deleted; derr != nil {
					return "", fmt.Errorf("test: delete the pod: %w", derr)
				}
				if err != nil {
					return "", err
				}
				return "", fmt.Errorf("test: the command ended as if its pod were there: exit %d", res.ExitCode)
			}
			b, err := ep.Sandbox.ReadFile(ctx, "id.txt")
			return string(b), err
		}),
		Judge: judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], out string) (judge.Verdict, error) {
			if out == ep.Sample.ID {
				return judge.Pass(""), nil
			}
			return judge.Fail("saw " + out), nil
		}),
	}
	mem := &memSink{}
	rep, err := e.Run(context.Background(), eval.Config{Sandbox: p, Retries: -1, Timeout: 2 * time.Minute, Sinks: []sink.Sink{mem}, MaxErrorRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed != 3 || rep.Errored != 1 {
		t.Errorf("passed %d, errored %d: want 3 and 1", rep.Passed, rep.Errored)
	}
	for _, r := range mem.records() {
		if r.SampleID == "victim" {
			if r.Status != sink.Error || r.ErrorKind != sink.KindSandbox || !strings.Contains(r.Error, "unavailable") {
				t.Errorf("the victim's record: %s %s %q, want a sandbox error", r.Status, r.ErrorKind, r.Error)
			}
			t.Logf("victim: %s", r.Error)
		}
	}
}

type memSink struct {
	mu   sync.Mutex
	recs []sink.Record
}

func (m *memSink) Write(_ context.Context, r sink.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, r)
	return nil
}

func (m *memSink) Close(context.Context) error { return nil }

func (m *memSink) records() []sink.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]sink.Record(nil), m.recs...)
}

// A process killed with SIGKILL leaves its pods; Cleanup finds them by
// the run's label and deletes them.
func TestCleanupAfterKill9(t *testing.T) {
	c := kubetest.Start(t)
	ns := c.Namespace(t)
	runID := fmt.Sprintf("kill9-%d", time.Now().UnixNano())
	var sel string
	for k, v := range c.NodeSelector() {
		sel = k + "=" + v
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childRunID+"="+runID, childNS+"="+ns,
		childImage+"="+kubetest.BusyboxImage(t), childNodeSel+"="+sel, "KUBECONFIG="+c.Kubeconfig(), "KUBERNETES_SERVICE_HOST=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("child: %q", line)
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	cs, err := k8s.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelRun + "=" + runID})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Errorf("%d pods of the killed run, want its 2 forks (the seed pod goes once Setup is done)", len(pods.Items))
	}
	if err := kubernetes.Cleanup(ctx, cs, ns, runID); err != nil {
		t.Fatal(err)
	}
	requireNothingLeft(t, cs, ns, runID)
}

// Sandboxes run as another user when the options say so: Setup, the
// workspace, commands and the file API all work as that user.
func TestNonRoot(t *testing.T) {
	uid := int64(1000)
	p, _, _ := provider(t, func(o *kubernetes.Options) {
		o.SecurityContext = &corev1.SecurityContext{RunAsUser: &uid, RunAsGroup: &uid}
	})
	ctx := context.Background()
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{Image: kubetest.BusyboxImage(t), WorkDir: "/tmp/ws",
		Files: map[string][]byte{"f": []byte("x")}, Setup: []sandbox.Cmd{{Args: []string{"sh", "-c", "id -u > setup-uid"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"sh", "-c", "id -u; cat setup-uid; stat -c %u f"}})
	if err != nil || string(res.Stdout) != "1000\n1000\n1000\n" {
		t.Fatalf("Exec: %q %q, %v: want uid 1000 throughout", res.Stdout, res.Stderr, err)
	}
	if err := sb.WriteFile(ctx, "g", []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(ctx, "g"); err != nil || string(got) != "y" {
		t.Fatalf("ReadFile: %q, %v", got, err)
	}
	res, err = sb.Exec(ctx, sandbox.Cmd{Args: []string{"sleep", "30"}, Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut {
		t.Fatalf("a timeout as a non-root user: %+v, %v", res, err)
	}
}

// Options.CarryPaths carry what Setup did outside the workspace to the
// forks; what it did elsewhere stays behind.
func TestCarryPaths(t *testing.T) {
	p, _, _ := provider(t, func(o *kubernetes.Options) { o.CarryPaths = []string{"/opt/tool", "/opt/never-made"} })
	ctx := context.Background()
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{Image: kubetest.BusyboxImage(t),
		Setup: []sandbox.Cmd{{Args: []string{"sh", "-c", "mkdir -p /opt/tool /opt/other && echo v1 > /opt/tool/version && echo x > /opt/other/x && echo w > in-workspace"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"sh", "-c", "cat /opt/tool/version in-workspace; [ ! -e /opt/other ] && echo other-left-behind"}})
	if err != nil || string(res.Stdout) != "v1\nw\nother-left-behind\n" {
		t.Fatalf("Exec: %q %q, %v", res.Stdout, res.Stderr, err)
	}
	if _, err := kubernetes.New(kubernetes.Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}, CarryPaths: []string{"opt/relative"}}); err == nil {
		t.Error("a relative CarryPaths entry was accepted")
	}
}

// A done ctx kills the command's whole process tree, as a timeout does.
func TestCancelKillsTree(t *testing.T) {
	p, _, _ := provider(t, nil)
	ctx := context.Background()
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{Image: kubetest.BusyboxImage(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = sb.Exec(c, sandbox.Cmd{Args: []string{"sh", "-c", "(sleep 2; echo escaped > escaped.txt) & sleep 30"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Exec: %v, want the ctx's error", err)
	}
	time.Sleep(3 * time.Second)
	if _, err := sb.ReadFile(ctx, "escaped.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a child of the cancelled command ran on: ReadFile: %v", err)
	}
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"ps", "-o", "args"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if strings.TrimSpace(line) == "sleep 30" {
			t.Errorf("the cancelled command still runs:\n%s", res.Stdout)
		}
	}
}

// A kubelet on cgroup v2 kills the whole container when the OOM killer
// ends one of its processes, and reports it terminated as OOMKilled (the
// test kubelet does so for pods annotated kubetest.OOMGroupAnnotation):
// the command is an ErrOOM naming that, kept by OOMKilled, and the
// sandbox is gone (the conformance case OOMIsAnError covers the kill of
// one process, the container running on, as on cgroup v1).
// TestOOMIsRetriedNeverFailed: an agent the OOM killer ends in a pod
// under 32 MiB (killed whole, as cgroup v2's memory.oom.group does), whose
// harness swallows the error and returns the exit code for the judge to
// fail, is an error from sandbox/oom naming the limit, retried once in a
// new pod, and counted as no fail: the engine's rule, on Kubernetes.
func TestOOMIsRetriedNeverFailed(t *testing.T) {
	t.Parallel()
	p, _, _ := provider(t, func(o *kubernetes.Options) {
		o.Annotations = map[string]string{kubetest.OOMGroupAnnotation: "true"}
	})
	spec := sandbox.Spec{Image: kubetest.BusyboxImage(t), Limits: sandbox.Limits{MemoryBytes: 32 << 20}}
	var attempts sync.Map
	h := harness.Func[string, int](func(ctx context.Context, ep *harness.Episode[string]) (int, error) {
		attempts.Store(ep.Attempt, true)
		res, _ := ep.Sandbox.Exec(ctx, sandbox.Cmd{Args: []string{"sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}`}, Timeout: time.Minute})
		return res.ExitCode, nil // swallowed: the exit code is the agent's failure, it says
	})
	j := judge.Func[string, int](func(_ context.Context, _ *harness.Episode[string], code int) (judge.Verdict, error) {
		return judge.Verdict{Pass: code == 0}, nil
	})
	e := &eval.Eval[string, int]{Name: "oom", Dataset: dataset.Slice[string]{{ID: "hog"}}, Harness: h, Judge: j,
		Sandbox: func(dataset.Sample[string]) sandbox.Spec { return spec }}
	log := t.TempDir() + "/run.jsonl"
	rep, err := e.Run(context.Background(), eval.Config{Sandbox: p, Retries: 1, Backoff: time.Millisecond, Quiet: true, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	var recs []sink.Record
	for r, err := range jsonl.Records(log) {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	r := recs[0]
	if r.Status != sink.Error || r.ErrorSource != "sandbox/oom" || r.Attempt != 1 || !strings.Contains(r.Error, "memory limit 32 MiB") {
		t.Fatalf("record: status %s, source %q, attempt %d, error %q; want an error from sandbox/oom on attempt 1 naming the limit", r.Status, r.ErrorSource, r.Attempt, r.Error)
	}
	for _, a := range []int{0, 1} {
		if _, ok := attempts.Load(a); !ok {
			t.Fatalf("attempt %d never ran: want the episode retried once", a)
		}
	}
	if rep.Failed != 0 {
		t.Fatalf("report counts %d fails, want none", rep.Failed)
	}
}

// TestEnvironmentRecordsItsImageDigest: a sandbox's resources name the
// image its environment's pod ran, as the node's runtime resolved it.
func TestEnvironmentRecordsItsImageDigest(t *testing.T) {
	t.Parallel()
	p, _, c := provider(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	image := kubetest.BusyboxImage(t)
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{Image: image, Limits: sandbox.Limits{MemoryBytes: 64 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ins, err := c.Docker().ImageInspect(ctx, image)
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.Resources{MemoryBytes: 64 << 20, Image: image, ImageDigest: ins.ID}
	if got := sb.Resources(); got != want {
		t.Fatalf("Resources() = %v, want %v", got, want)
	}
}

func TestContainerOOMKilledIsAnOOM(t *testing.T) {
	t.Parallel()
	p, _, _ := provider(t, func(o *kubernetes.Options) {
		o.Annotations = map[string]string{kubetest.OOMGroupAnnotation: "true"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{Image: kubetest.BusyboxImage(t), Limits: sandbox.Limits{MemoryBytes: 32 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}`}, Timeout: time.Minute})
	if !errors.Is(err, sandbox.ErrOOM) || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("a command allocating 200 MB under 32 MiB in a container killed whole: exit %d, %v; want ErrOOM", res.ExitCode, err)
	}
	if !strings.Contains(err.Error(), "OOMKilled") || !strings.Contains(err.Error(), "memory limit 32 MiB") {
		t.Errorf("the error %q does not say the container was OOMKilled under its limit", err)
	}
	if !errors.Is(sb.OOMKilled(), sandbox.ErrOOM) {
		t.Errorf("OOMKilled() = %v after the kill", sb.OOMKilled())
	}
	if _, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrUnavailable) || errors.Is(err, sandbox.ErrOOM) {
		t.Errorf("a command in the killed container: %v; want ErrUnavailable (the sandbox is gone), not another OOM", err)
	}
}

// With a gateway address, a NetworkPolicy and the cluster enforcing it
// (the test kubelet does, for egress to one address and TCP port), the
// gateway is the one address a network-off sandbox reaches: the
// conformance suite's GatewayOnly (a second server of the host, at any of
// its addresses, is not reached) and GatewayReached (network-on pods, on
// Docker's bridge, reach it too), and the network cases besides.
func TestGatewayConformance(t *testing.T) {
	host := hostIPv4(t)
	p, _, _ := provider(t, func(o *kubernetes.Options) {
		o.NetworkPolicy, o.NetworkPolicyEnforced, o.GatewayAddress = true, true, host
		o.Annotations = map[string]string{kubetest.NetworkAnnotation: "bridge"} // network-on pods: the policy leaves them alone
	})
	if g := p.Guarantees(); !g.Gateway || !g.Network {
		t.Fatalf("Guarantees %+v: want Gateway and Network", g)
	}
	sandboxtest.Run(t, p, &sandboxtest.Options{Spec: sandbox.Spec{Image: kubetest.BusyboxImage(t)}})
}

// Without a gateway address no gateway is served (ServeGateway is
// unsupported) and none is claimed.
func TestNoGatewayWithoutAnAddress(t *testing.T) {
	p, _, _ := provider(t, func(o *kubernetes.Options) { o.NetworkPolicy, o.NetworkPolicyEnforced = true, true })
	if p.Guarantees().Gateway {
		t.Error("Gateway claimed with no GatewayAddress")
	}
	if _, _, err := p.ServeGateway(http.NotFoundHandler()); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "GatewayAddress") {
		t.Errorf("ServeGateway with no address: %v", err)
	}
}

// hostIPv4 is an IPv4 address of this host's, not loopback: one Docker's
// bridge reaches.
func hostIPv4(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			return ipn.IP.String()
		}
	}
	t.Skip("no IPv4 address but loopback")
	return ""
}
