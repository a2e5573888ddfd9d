package kubetest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/proctor-evals/proctor/sandbox/kubernetes/internal/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// env is a cluster, a fresh namespace and a client for one test.
type env struct {
	c  *kubetest.Cluster
	ns string
	cs kubernetes.Interface
}

func setup(t *testing.T) env {
	c := kubetest.Start(t)
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	require.NoError(t, err)
	return env{c: c, ns: c.Namespace(t), cs: cs}
}

// pod creates a pod of one container "main" on the test node.
func (e env) pod(t *testing.T, image string, mutate func(*corev1.Pod), command ...string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"},
		Spec: corev1.PodSpec{
			NodeSelector:  e.c.NodeSelector(),
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: image, Command: command}},
		},
	}
	if mutate != nil {
		mutate(pod)
	}
	pod, err := e.cs.CoreV1().Pods(e.ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	return pod
}

// wait polls the pod until ok says so, failing after a minute with the
// pod's last status.
func (e env) wait(t *testing.T, name string, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		return ok(p), nil
	})
	if err != nil {
		var status any
		if last != nil {
			status = last.Status
		}
		t.Fatalf("pod %s/%s: waiting for %s: %v; last status: %+v", e.ns, name, what, err, status)
	}
	return last
}

func running(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

var keepAlive = []string{"sh", "-c", "while :; do sleep 1; done"}

// exec runs cmd in the pod's container through the apiserver's pods/exec,
// with client-go's executor over the protocol named.
func (e env) exec(t *testing.T, protocol, pod string, stdin io.Reader, cmd ...string) (stdout, stderr string, err error) {
	t.Helper()
	return e.execIn(t, protocol, pod, "main", stdin, cmd...)
}

func (e env) execIn(t *testing.T, protocol, pod, container string, stdin io.Reader, cmd ...string) (stdout, stderr string, err error) {
	t.Helper()
	cfg := e.c.RESTConfig()
	req := e.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	require.NoError(t, err)
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	require.NoError(t, err)
	var ex remotecommand.Executor
	switch protocol {
	case "websocket":
		ex = ws
	case "spdy":
		ex = spdy
	default: // as kubectl does
		ex, err = remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var o, es bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &o, Stderr: &es})
	return o.String(), es.String(), err
}

func exitCode(err error) int {
	var ee utilexec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus()
	}
	return -1
}

func TestPodRunsAsDockerContainer(t *testing.T) {
	e := setup(t)
	pod := e.pod(t, kubetest.BusyboxImage(t), func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse("64Mi"),
			corev1.ResourceCPU:    resource.MustParse("500m"),
		}
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "GREETING", Value: "hi"}}
	}, keepAlive...)
	pod = e.wait(t, pod.Name, "Running and Ready", running)
	require.Len(t, pod.Status.ContainerStatuses, 1)
	st := pod.Status.ContainerStatuses[0]
	require.NotNil(t, st.State.Running, "%+v", st)
	require.True(t, st.Ready)

	id, err := e.c.ContainerID(e.ns, pod.Name, "main")
	require.NoError(t, err)
	require.Equal(t, "docker://"+id, st.ContainerID)
	ins, err := e.c.Docker().ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.True(t, ins.Container.State.Running)
	require.Equal(t, int64(64<<20), ins.Container.HostConfig.Memory)
	require.Equal(t, int64(500_000_000), ins.Container.HostConfig.NanoCPUs)
	require.Equal(t, "none", string(ins.Container.HostConfig.NetworkMode))

	// The limits are the container's cgroup's, as seen from inside.
	// (cgroup v2 or v1).
	out, errOut, err := e.exec(t, "", pod.Name, nil, "sh", "-c", `
		cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes
		cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max
		echo $GREETING`)
	require.NoError(t, err, errOut)
	require.Equal(t, "67108864\n1024\nhi\n", out)
}

func TestExec(t *testing.T) {
	e := setup(t)
	pod := e.pod(t, kubetest.BusyboxImage(t), nil, keepAlive...)
	e.wait(t, pod.Name, "Running", running)
	for _, protocol := range []string{"websocket", "spdy", "fallback"} {
		t.Run(protocol, func(t *testing.T) {
			out, errOut, err := e.exec(t, protocol, pod.Name, nil, "sh", "-c", "echo out; echo err >&2; exit 3")
			require.Equal(t, 3, exitCode(err), "err %v", err)
			require.Equal(t, "out\n", out)
			require.Equal(t, "err\n", errOut)

			// cat ends only when its stdin does.
			in := strings.Repeat("line\n", 10000)
			out, errOut, err = e.exec(t, protocol, pod.Name, strings.NewReader(in), "cat")
			require.NoError(t, err)
			require.Equal(t, in, out)
			require.Empty(t, errOut)
		})
	}
	_, _, err := e.exec(t, "", pod.Name, nil, "no-such-command")
	require.Error(t, err)
}

func TestContainerExit(t *testing.T) {
	e := setup(t)
	image := kubetest.BusyboxImage(t)
	failed := e.pod(t, image, nil, "sh", "-c", "exit 7")
	succeeded := e.pod(t, image, nil, "true")
	p := e.wait(t, failed.Name, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	term := p.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term)
	require.Equal(t, int32(7), term.ExitCode)
	require.Equal(t, "Error", term.Reason)
	p = e.wait(t, succeeded.Name, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	require.Equal(t, int32(0), p.Status.ContainerStatuses[0].State.Terminated.ExitCode)

	// A command that cannot start fails the pod, with the runtime's reason.
	p = e.pod(t, image, nil, "/no/such/command")
	p = e.wait(t, p.Name, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	term = p.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term)
	require.NotZero(t, term.ExitCode)
	require.Contains(t, term.Message, "/no/such/command")
}

func TestMissingImage(t *testing.T) {
	e := setup(t)
	pod := e.pod(t, "proctor-kubetest-no-such-image:v1", nil)
	p := e.wait(t, pod.Name, "ErrImagePull", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil
	})
	w := p.Status.ContainerStatuses[0].State.Waiting
	require.Equal(t, "ErrImagePull", w.Reason)
	require.Contains(t, w.Message, `"proctor-kubetest-no-such-image:v1"`)
	require.Equal(t, corev1.PodPending, p.Status.Phase)
}

// The kubelet looks for a missing image again, as a kubelet retries a pull.
func TestImageArrivesLater(t *testing.T) {
	e := setup(t)
	image := kubetest.BusyboxImage(t)
	late := "proctor-kubetest-late:" + e.ns
	pod := e.pod(t, late, nil, keepAlive...)
	e.wait(t, pod.Name, "ErrImagePull", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil
	})
	ctx := context.Background()
	_, err := e.c.Docker().ImageTag(ctx, client.ImageTagOptions{Source: image, Target: late})
	require.NoError(t, err)
	t.Cleanup(func() { e.c.Docker().ImageRemove(context.Background(), late, client.ImageRemoveOptions{}) })
	e.wait(t, pod.Name, "Running", running)
}

func TestUnschedulable(t *testing.T) {
	e := setup(t)
	pod := e.pod(t, kubetest.BusyboxImage(t), func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"proctor.dev/no-such-label": "x"}
	}, keepAlive...)
	p := e.wait(t, pod.Name, "PodScheduled=False", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return true
			}
		}
		return false
	})
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			require.Equal(t, corev1.PodReasonUnschedulable, c.Reason)
			require.Contains(t, c.Message, "didn't match Pod's node affinity/selector")
		}
	}
	require.Empty(t, p.Spec.NodeName)
}

func TestDeleteRemovesContainer(t *testing.T) {
	e := setup(t)
	pod := e.pod(t, kubetest.BusyboxImage(t), nil, keepAlive...)
	e.wait(t, pod.Name, "Running", running)
	id, err := e.c.ContainerID(e.ns, pod.Name, "main")
	require.NoError(t, err)

	ctx := context.Background()
	zero := int64(0)
	require.NoError(t, e.cs.CoreV1().Pods(e.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "the pod was not finalized")
	// Deleted with grace 0, the pod is gone from the API at once, and the
	// kubelet removes its container when it hears of it.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.c.Docker().ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		return cerrdefs.IsNotFound(err), nil
	})
	require.NoError(t, err, "container %s still there", id)
}

// A pod deleted with the default grace period is finalized once its
// container has stopped: here at once, since the command handles SIGTERM.
func TestGracefulDelete(t *testing.T) {
	e := setup(t)
	pod := e.pod(t, kubetest.BusyboxImage(t), nil, "sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done")
	e.wait(t, pod.Name, "Running", running)
	ctx := context.Background()
	require.NoError(t, e.cs.CoreV1().Pods(e.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}))
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "the pod was not finalized well within its 30 s grace period")
}

func TestKubeconfig(t *testing.T) {
	c := kubetest.Start(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	node, err := cs.CoreV1().Nodes().Get(context.Background(), c.NodeName(), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "true", node.Labels[kubetest.NodeLabel])
	require.Empty(t, node.Spec.Taints, "the node-lifecycle controller must see the node Ready")
	lease, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), c.NodeName(), metav1.GetOptions{})
	require.NoError(t, err, "the node's heartbeat Lease")
	require.Equal(t, c.NodeName(), *lease.Spec.HolderIdentity)
	v, err := cs.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, kubetest.Version, v.GitVersion)
}

// What the kubelet maps from a pod spec, seen from inside the containers.
func TestPodSpec(t *testing.T) {
	e := setup(t)
	uid, gid := int64(1234), int64(5678)
	no := false
	pod := e.pod(t, kubetest.BusyboxImage(t), func(p *corev1.Pod) {
		p.Annotations = map[string]string{kubetest.NetworkAnnotation: "bridge"}
		p.Spec.Volumes = []corev1.Volume{
			{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(1<<20, resource.BinarySI)}}},
		}
		main := &p.Spec.Containers[0]
		main.WorkingDir = "/tmp"
		main.Env = []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		main.SecurityContext = &corev1.SecurityContext{RunAsUser: &uid, RunAsGroup: &gid, AllowPrivilegeEscalation: &no}
		main.VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}, {Name: "mem", MountPath: "/mem"}}
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: "side", Image: main.Image, Command: []string{"sh", "-c", "echo from-side > /shared/f; while :; do sleep 1; done"},
			VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}},
		})
	}, keepAlive...)
	p := e.wait(t, pod.Name, "Running", running)
	require.Len(t, p.Status.ContainerStatuses, 2)
	require.NotEmpty(t, p.Status.PodIP, "a pod on the bridge network has an IP")

	out, errOut, err := e.exec(t, "", pod.Name, nil, "sh", "-c", `pwd; echo $POD; id -u; id -g; cat /shared/f; ls /sys/class/net | grep -c eth0`)
	require.NoError(t, err, errOut)
	require.Equal(t, "/tmp\n"+pod.Name+"\n1234\n5678\nfrom-side\n1\n", out)
	// The memory-backed emptyDir is bounded by its sizeLimit.
	out, _, err = e.execIn(t, "", pod.Name, "side", nil, "sh", "-c", "id -u; test -e /mem || echo no-mem")
	require.NoError(t, err)
	require.Equal(t, "0\nno-mem\n", out)
	_, errOut, err = e.exec(t, "", pod.Name, nil, "sh", "-c", "head -c 2097152 /dev/zero > /mem/f")
	require.Equal(t, 1, exitCode(err), "2 MiB into a 1 MiB tmpfs: %v %s", err, errOut)
}

// The pod's security context applies to its containers unless theirs says
// otherwise, and runAsNonRoot is refused for an image that runs as root.
func TestSecurityContext(t *testing.T) {
	e := setup(t)
	image := kubetest.BusyboxImage(t)
	uid, gid := int64(1234), int64(5678)
	pod := e.pod(t, image, func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, SupplementalGroups: []int64{42}}
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsGroup: &gid}
	}, keepAlive...)
	e.wait(t, pod.Name, "Running", running)
	out, errOut, err := e.exec(t, "", pod.Name, nil, "sh", "-c", "id -u; id -g; id -G")
	require.NoError(t, err, errOut)
	require.Equal(t, "1234\n5678\n5678 42\n", out)

	yes := true
	pod = e.pod(t, image, func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &yes}
	}, keepAlive...)
	p := e.wait(t, pod.Name, "a refusal", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil
	})
	w := p.Status.ContainerStatuses[0].State.Waiting
	require.Equal(t, "CreateContainerConfigError", w.Reason)
	require.Contains(t, w.Message, "container has runAsNonRoot and image will run as root")
}
