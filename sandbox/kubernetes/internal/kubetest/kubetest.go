// Package kubetest runs a real Kubernetes control plane for tests, with
// real Docker containers behind its pods.
//
// The cluster is etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler v1.34.4, built from the Go module proxy by build.sh (in this
// directory) into $PROCTOR_KUBE_BIN (default
// $HOME/.cache/proctor/kube-v1.34.4), plus a small test kubelet running in
// the test process. The kubelet registers one Node (labelled
// [NodeLabel]=true, see [Cluster.NodeSelector]), keeps it alive with a Lease
// and status heartbeats, and runs every pod bound to it as Docker containers
// from LOCAL images of the same name (nothing is pulled: a missing image
// leaves the container Waiting with reason ErrImagePull). It writes real pod
// status (Pending, Running and Ready, Succeeded or Failed with the exit
// code), finalizes deleted pods after stopping their containers within the
// pod's grace period (as a kubelet does: delete with grace 0 if a test
// should not wait), and serves pods/exec, proxied by the apiserver, with
// docker exec: separate stdout and stderr, stdin to its end, the exit code
// as the exit code. (The apiserver verifies the kubelet's certificate; the
// kubelet, on loopback, does not authenticate the apiserver.)
//
// What the kubelet maps from a pod: each container's image, command, args
// (with $(VAR) expanded from its env, as a kubelet does), env (plain
// values; the pod's name, namespace, UID, node, labels and annotations by
// fieldRef; Secret keys by secretKeyRef),
// workingDir, resource limits (cpu, memory; every pod also gets
// [PodPidsLimit] like a kubelet's --pod-max-pids), the pod's and the
// container's securityContext (runAsUser, runAsGroup, supplementalGroups;
// fsGroup as a supplementary group, volumes are not given to it;
// runAsNonRoot, refused with CreateContainerConfigError for an image that
// runs as root, as a kubelet does; capabilities, readOnlyRootFilesystem,
// allowPrivilegeEscalation), emptyDir volumes (a Docker volume, or tmpfs
// bounded by sizeLimit for medium Memory) and persistentVolumeClaim volumes
// (a Docker volume per claim, kept across its pods until the cluster stops;
// the claim must be bound for the scheduler: there is no provisioner, a
// test creates the PersistentVolume). The containers of a pod share
// their network and IPC namespaces. Pods get no network (Docker's "none")
// unless annotated [NetworkAnnotation] with a Docker network name such as
// "bridge". Not simulated: init containers, probes, other volume types
// (the service account token is not mounted), restarts (a pod whose
// container exits ends Succeeded or Failed whatever its restartPolicy),
// NetworkPolicy.
//
// Use it from a test binary's TestMain:
//
//	func TestMain(m *testing.M) { kubetest.Main(m) }
//
//	func TestX(t *testing.T) {
//		c := kubetest.Start(t)            // shared by the binary's tests
//		ns := c.Namespace(t)              // fresh, deleted at cleanup
//		cs := kubernetes.NewForConfigOrDie(c.RESTConfig())
//		pod := &corev1.Pod{Spec: corev1.PodSpec{
//			NodeSelector: c.NodeSelector(),
//			Containers:   []corev1.Container{{Name: "main", Image: kubetest.BusyboxImage(t), ...}},
//		}}
//		...
//	}
//
// Start returns once the apiserver is ready and the node schedulable (about
// 4 s on 2 busy cores); Namespace returns once pods can be created in it.
// build.sh takes about 5 min cold on 2 idle cores (25 min on 2 cores shared
// with other builds), 90 s with a warm Go build cache, nothing when the
// binaries are there.
//
// Start skips the test with a message naming what is missing (the binaries:
// run build.sh; Docker) unless PROCTOR_REQUIRE_KUBE=1, which makes it a
// failure; BusyboxImage does the same for /bin/busybox (busybox-static)
// unless PROCTOR_REQUIRE_TOOLS=1. Main stops the cluster and removes its
// containers after the tests; the control plane's processes also die with
// the test binary if it is killed (Pdeathsig), and containers left by a
// killed binary are removed by the next Start. When a test fails, the tail
// of every component's log is printed.
package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/proctor-evals/proctor/sandbox/docker"
)

// Version is the Kubernetes version of the control plane.
const Version = "v1.34.4"

// NodeLabel labels the test kubelet's node (value "true").
const NodeLabel = "proctor.dev/kubetest"

// NetworkAnnotation on a pod names the Docker network its containers join
// (e.g. "bridge"); without it they have no network.
const NetworkAnnotation = "kubetest.proctor.dev/network"

// OOMGroupAnnotation on a pod ("true") makes the kubelet kill the whole
// container when the out-of-memory killer ends one of its processes, as
// a kubelet on cgroup v2 does (memory.oom.group, the default since
// Kubernetes 1.28 unless singleProcessOOMKill): the container then reads
// terminated with reason OOMKilled. Without it, as on cgroup v1, the
// kernel kills the one process and the container runs on.
const OOMGroupAnnotation = "kubetest.proctor.dev/oom-group"

// PodPidsLimit bounds the processes of every pod's container, like a
// kubelet's --pod-max-pids (Kubernetes has no per-pod field for it).
const PodPidsLimit = 1024

// binDir is where build.sh puts the binaries.
func binDir() string {
	if d := os.Getenv("PROCTOR_KUBE_BIN"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "proctor", "kube-"+Version)
	}
	return filepath.Join(home, ".cache", "proctor", "kube-"+Version)
}

var (
	mainRunning atomic.Bool
	startOnce   sync.Once
	shared      *Cluster
	startErr    error // why no cluster: a failure
	skipReason  string
)

// Main runs the tests of m and then stops the cluster if one was started,
// and exits. Call it from TestMain; [Start] fails without it, since nothing
// else would remove the cluster's containers.
func Main(m *testing.M) {
	mainRunning.Store(true)
	code := m.Run()
	if shared != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "kubetest: stopping the cluster:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// Start returns the test binary's cluster, starting it on first use. It
// skips tb when the binaries or Docker are missing (fails with
// PROCTOR_REQUIRE_KUBE=1), and fails when the cluster does not start.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	if !mainRunning.Load() {
		tb.Fatal("kubetest: call kubetest.Main(m) from TestMain: it stops the cluster and removes its containers after the tests")
	}
	startOnce.Do(func() {
		skipReason = missing()
		if skipReason != "" {
			return
		}
		t0 := time.Now()
		shared, startErr = start()
		if startErr == nil {
			fmt.Fprintf(os.Stderr, "kubetest: cluster %s up in %v (logs in %s)\n", Version, time.Since(t0).Round(time.Millisecond), shared.dir)
		}
	})
	if skipReason != "" {
		if os.Getenv("PROCTOR_REQUIRE_KUBE") == "1" {
			tb.Fatalf("PROCTOR_REQUIRE_KUBE=1 but %s", skipReason)
		}
		tb.Skip(skipReason)
	}
	if startErr != nil {
		tb.Fatalf("kubetest: %v", startErr)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Log(shared.logTails(40))
		}
	})
	return shared
}

// missing says what the cluster needs and does not have, or "".
func missing() string {
	dir := binDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := exec.LookPath(filepath.Join(dir, b)); err != nil {
			return fmt.Sprintf("kubetest: no %s in %s (build them with sandbox/kubernetes/internal/kubetest/build.sh, ~5 min): %v", b, dir, err)
		}
	}
	cli, err := docker.NewClient()
	if err != nil {
		return "kubetest: no Docker client: " + err.Error()
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return "kubetest: no Docker engine reachable: " + err.Error()
	}
	return ""
}

// RESTConfig returns a new config for the cluster's admin (a member of
// system:masters), trusting the apiserver's certificate.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.rest) }

// Kubeconfig returns the path of a kubeconfig file for the same admin, its
// current context pointing at the cluster (for tests of KUBECONFIG loading).
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// NodeName is the name of the test kubelet's node.
func (c *Cluster) NodeName() string { return c.kubelet.node }

// NodeSelector selects the test kubelet's node.
func (c *Cluster) NodeSelector() map[string]string { return map[string]string{NodeLabel: "true"} }

// Docker returns the client of the engine running the pods' containers
// (the cluster's; do not close it).
func (c *Cluster) Docker() *client.Client { return c.kubelet.docker }

// ContainerID returns the Docker container ID of a container of a pod
// running on the node (for tests that inject faults, e.g. kill it).
func (c *Cluster) ContainerID(namespace, pod, container string) (string, error) {
	return c.kubelet.containerID(namespace, pod, container)
}

// Namespace creates a fresh namespace for tb, waits until its default
// ServiceAccount exists (pods cannot be created before), and deletes it
// when tb ends.
func (c *Cluster) Namespace(tb testing.TB) string {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(c.rest)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubetest-"}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("kubetest: create namespace: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("kubetest: delete namespace %s: %v", ns.Name, err)
		}
	})
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		tb.Fatalf("kubetest: namespace %s: no default ServiceAccount: %v", ns.Name, err)
	}
	return ns.Name
}
