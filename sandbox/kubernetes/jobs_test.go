package kubernetes_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/yaml"

	"github.com/proctor-evals/proctor/sandbox/docker"
	"github.com/proctor-evals/proctor/sandbox/kubernetes/internal/kubetest"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// manifests is where the example's manifests are, from this module.
const manifests = "../../examples/distributed/k8s"

// TestExampleCoordinatorAndWorkerJobs runs examples/distributed/k8s's
// coordinator.yaml and worker.yaml on the test cluster as they are, but for
// what the cluster cannot provide: it gets the run's log out through
// log-reader.yaml as docs/kubernetes.md says, checks it whole, and applies
// the Jobs again for the next run, whose log is a separate one.
func TestExampleCoordinatorAndWorkerJobs(t *testing.T) {
	c := kubetest.Start(t)
	ns := c.Namespace(t)
	image := exampleImage(t, c)
	cs := k8s.NewForConfigOrDie(c.RESTConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	coordinator := decodeManifests(t, "coordinator.yaml")
	worker := decodeManifests(t, "worker.yaml")
	reader := decodeManifests(t, "log-reader.yaml")

	secret := only[*corev1.Secret](t, coordinator)
	_, err := cs.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
	require.NoError(t, err)
	claim := only[*corev1.PersistentVolumeClaim](t, coordinator)
	// The test cluster has no provisioner: a PV, bound ahead to the claim,
	// stands for the storage (the kubelet gives the claim a Docker volume).
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim.Name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain, // the test deletes it
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim.Name},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/nonexistent"}},
		},
	}
	_, err = cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Services(ns).Create(ctx, only[*corev1.Service](t, coordinator), metav1.CreateOptions{})
	require.NoError(t, err)

	// The coordinator's Job applied, and its pod's IP once it has one
	// (the pod after the one given, if any).
	startCoordinator := func() *batchv1.Job {
		coord := only[*batchv1.Job](t, coordinator).DeepCopy()
		onTestCluster(c, &coord.Spec.Template.Spec, image)
		coord.Spec.Template.Annotations = map[string]string{kubetest.NetworkAnnotation: "bridge"}
		coord, err := cs.BatchV1().Jobs(ns).Create(ctx, coord, metav1.CreateOptions{})
		require.NoError(t, err)
		return coord
	}
	podOf := func(coord *batchv1.Job, after string) (pod corev1.Pod) {
		require.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/controller-uid=" + string(coord.UID)})
			if err != nil {
				return false, err
			}
			for _, p := range pods.Items {
				if p.Name != after && p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
					pod = p
					return true, nil
				}
			}
			return false, nil
		}), "a pod of the coordinator's Job runs")
		return pod
	}
	// The workers' Job applied, joining ip (with parallelism, if not 0,
	// and args added). No kube-proxy nor cluster DNS
	// here: they join the coordinator's pod by its IP instead of the
	// Service's name.
	startWorkers := func(ip string, parallelism int32, args ...string) *batchv1.Job {
		work := only[*batchv1.Job](t, worker).DeepCopy()
		if parallelism > 0 {
			work.Spec.Parallelism = &parallelism
		}
		onTestCluster(c, &work.Spec.Template.Spec, image)
		work.Spec.Template.Annotations = map[string]string{kubetest.NetworkAnnotation: "bridge"}
		a := work.Spec.Template.Spec.Containers[0].Args
		require.Contains(t, a, "nats://coordinator:4222")
		for i := range a {
			if a[i] == "nats://coordinator:4222" {
				a[i] = "nats://" + ip + ":4222"
			}
		}
		work.Spec.Template.Spec.Containers[0].Args = append(a, args...)
		work, err := cs.BatchV1().Jobs(ns).Create(ctx, work, metav1.CreateOptions{})
		require.NoError(t, err)
		return work
	}
	startReader := func() string {
		pod := only[*corev1.Pod](t, reader).DeepCopy()
		onTestCluster(c, &pod.Spec, kubetest.BusyboxImage(t))
		pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = claim.Name // as the docs say for coordinator.yaml
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
		waitPodReady(ctx, t, cs, ns, pod.Name)
		return pod.Name
	}
	deleteAll := func(jobs ...*batchv1.Job) {
		background := metav1.DeletePropagationBackground
		for _, j := range jobs {
			require.NoError(t, cs.BatchV1().Jobs(ns).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &background}))
		}
		grace := int64(0)
		require.NoError(t, cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{}))
		require.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, err
		}), "the pods are gone")
	}

	// One run: the Jobs applied, run to completion, the log read out.
	run := func() (uid string, log []byte) {
		coord := startCoordinator()
		work := startWorkers(podOf(coord, "").Status.PodIP, 0)

		for _, j := range []*batchv1.Job{coord, work} {
			j = waitJobDone(ctx, t, cs, j)
			require.Zero(t, j.Status.Failed, "job %s: no pod failed (none started again)", j.Name)
			require.Positive(t, j.Status.Succeeded, "job %s", j.Name)
		}

		// The docs' recipe: the log-reader pod on the claim, then
		// `kubectl cp` of /logs/<the Job's UID>, which is tar in the pod.
		files := copyOut(ctx, t, c.RESTConfig(), cs, ns, startReader(), "/logs/"+string(coord.UID))
		// The next run: the Jobs deleted, to be applied again.
		deleteAll(coord, work)
		require.Contains(t, files, "run.jsonl", "files of %s: %v", coord.UID, keys(files))
		return string(coord.UID), files["run.jsonl"]
	}

	t0 := time.Now()
	uid1, log1 := run()
	checkWhole(t, log1)
	uid2, log2 := run()
	checkWhole(t, log2)
	require.NotEqual(t, uid1, uid2)
	t.Logf("two runs of 180 records each, logs /logs/%s and /logs/%s, in %v", uid1, uid2, time.Since(t0).Round(time.Second))

	// Misused (exit 2), the coordinator is not started again: its
	// podFailurePolicy fails the Job on its exit code, backoffLimit aside.
	bad := only[*batchv1.Job](t, coordinator).DeepCopy()
	onTestCluster(c, &bad.Spec.Template.Spec, image)
	bad.Spec.Template.Spec.Containers[0].Args = append(bad.Spec.Template.Spec.Containers[0].Args, "-no-such-flag")
	bad, err = cs.BatchV1().Jobs(ns).Create(ctx, bad, metav1.CreateOptions{})
	require.NoError(t, err)
	var failed *batchv1.JobCondition
	require.NoError(t, wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, bad.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				failed, bad = &c, j
				return true, nil
			}
		}
		return false, nil
	}), "the misused coordinator's Job fails")
	require.Equal(t, batchv1.JobReasonPodFailurePolicy, failed.Reason, failed.Message)
	require.Equal(t, int32(1), bad.Status.Failed, "one pod, not started again")
	deleteAll(bad)

	// Killed mid-run, the coordinator is started again in a new pod once
	// the old one has ended, and resumes its log: whole, each record once.
	// One worker at concurrency 1 (180 episodes of 40 ms) so the kill
	// lands mid-run.
	readerPod := startReader()
	coord := startCoordinator()
	first := podOf(coord, "")
	work := startWorkers(first.Status.PodIP, 1, "-concurrency", "1")
	log := "/logs/" + string(coord.UID) + "/run.jsonl"
	require.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		out := execIn(ctx, t, c.RESTConfig(), cs, ns, readerPod, "sh", "-c", "cat "+log+" 2>/dev/null | wc -l")
		n, err := strconv.Atoi(strings.TrimSpace(out))
		return err == nil && n >= 20, nil
	}), "the first coordinator commits records")
	id, err := c.ContainerID(ns, first.Name, "coordinator")
	require.NoError(t, err)
	_, err = c.Docker().ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
	require.NoError(t, err)
	// The workers joined the first pod's IP (a Service would follow the
	// coordinator): they are applied again for the second.
	background := metav1.DeletePropagationBackground
	require.NoError(t, cs.BatchV1().Jobs(ns).Delete(ctx, work.Name, metav1.DeleteOptions{PropagationPolicy: &background}))
	second := podOf(coord, first.Name)
	old, err := cs.CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.PodFailed, old.Status.Phase, "the old pod ended before the new one")
	require.True(t, old.Status.ContainerStatuses[0].State.Terminated != nil && old.Status.ContainerStatuses[0].State.Terminated.ExitCode == 137, "killed: %+v", old.Status.ContainerStatuses[0].State)
	require.True(t, !second.CreationTimestamp.Before(&old.Status.ContainerStatuses[0].State.Terminated.FinishedAt), "the new pod was created after the old one ended")
	require.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/controller-uid=" + string(work.UID)})
		return err == nil && len(pods.Items) == 0, err
	}), "the first workers are gone")
	work = startWorkers(second.Status.PodIP, 0)
	coord = waitJobDone(ctx, t, cs, coord)
	require.Equal(t, int32(1), coord.Status.Failed, "the killed pod")
	require.Equal(t, int32(1), coord.Status.Succeeded)
	waitJobDone(ctx, t, cs, work)
	files := copyOut(ctx, t, c.RESTConfig(), cs, ns, readerPod, "/logs/"+string(coord.UID))
	checkWhole(t, files["run.jsonl"])
}

// execIn runs a command in a pod and returns its stdout.
func execIn(ctx context.Context, t *testing.T, cfg *rest.Config, cs k8s.Interface, ns, pod string, command ...string) string {
	t.Helper()
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, req.URL())
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	require.NoError(t, ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}), "%v in %s: %s", command, pod, stderr.String())
	return stdout.String()
}

// onTestCluster sets what the test cluster needs of a pod: its node, and
// local images (nothing is pulled).
func onTestCluster(c *kubetest.Cluster, spec *corev1.PodSpec, image string) {
	spec.NodeSelector = c.NodeSelector()
	for i := range spec.Containers {
		spec.Containers[i].Image = image
	}
}

// checkWhole checks that a run's log has every record of the example: its
// 60 samples in 3 epochs, each once.
func checkWhole(t *testing.T, log []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.jsonl")
	require.NoError(t, os.WriteFile(path, log, 0o644))
	seen := map[sink.Key]bool{}
	samples := map[string]bool{}
	for r, err := range jsonl.Records(path) {
		require.NoError(t, err)
		require.False(t, seen[r.Key()], "key %v twice", r.Key())
		require.Contains(t, []int{0, 1, 2}, r.Key().Epoch)
		seen[r.Key()] = true
		samples[r.Key().SampleID] = true
	}
	require.Len(t, samples, 60)
	require.Len(t, seen, 60*3)
}

// exampleImage builds, FROM scratch, the image of the manifests (their
// Dockerfile's, without the Go toolchain and distroless images it pulls):
// the example's binary, static, run as distroless's nonroot user (65532),
// with /logs its own so that the claim's fresh volume is (a kubelet would
// give it to the pod's fsGroup; the test kubelet does not).
func exampleImage(t *testing.T, c *kubetest.Cluster) string {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "distributed"), "./examples/distributed")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "logs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "logs", ".keep"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(`FROM scratch
COPY distributed /usr/local/bin/distributed
COPY --chown=65532:65532 logs /logs
USER 65532
ENTRYPOINT ["/usr/local/bin/distributed"]
`), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const tag = "proctor-kubetest-distributed-arith:latest"
	require.NoError(t, docker.BuildImage(ctx, c.Docker(), dir, tag))
	return tag
}

// decodeManifests decodes a YAML file of the example's manifests into
// typed objects, refusing unknown fields (as internal/k8scheck does).
func decodeManifests(t *testing.T, file string) []any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(manifests, file))
	require.NoError(t, err)
	var objs []any
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta), "%s document %d", file, i+1)
		if meta.Kind == "" {
			continue // comments only
		}
		gvk := schema.FromAPIVersionAndKind(meta.APIVersion, meta.Kind)
		obj, err := scheme.Scheme.New(gvk)
		require.NoError(t, err, "%s document %d: %s", file, i+1, gvk)
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), obj), "%s document %d", file, i+1)
		objs = append(objs, obj)
	}
	return objs
}

// only returns the one object of type T among objs.
func only[T any](t *testing.T, objs []any) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			found = append(found, v)
		}
	}
	require.Len(t, found, 1, "objects of type %T", *new(T))
	return found[0]
}

// waitJobDone waits for a Job's Complete condition, failing on Failed.
func waitJobDone(ctx context.Context, t *testing.T, cs k8s.Interface, j *batchv1.Job) *batchv1.Job {
	t.Helper()
	var last *batchv1.Job
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		if last, err = cs.BatchV1().Jobs(j.Namespace).Get(ctx, j.Name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		for _, c := range last.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				return true, nil
			case batchv1.JobFailed:
				return false, errors.New("job " + j.Name + " failed: " + c.Reason + ": " + c.Message)
			}
		}
		return false, nil
	})
	require.NoError(t, err, "job %s: status %+v", j.Name, last.Status)
	return last
}

// waitPodReady waits for a pod's Ready condition.
func waitPodReady(ctx context.Context, t *testing.T, cs k8s.Interface, ns, name string) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}), "pod %s ready", name)
}

// copyOut does what `kubectl cp pod:dir local` does: tar in the pod, over
// pods/exec, unpacked here (into memory: the files by their path under
// dir).
func copyOut(ctx context.Context, t *testing.T, cfg *rest.Config, cs k8s.Interface, ns, pod, dir string) map[string][]byte {
	t.Helper()
	stdout := bytes.NewBufferString(execIn(ctx, t, cfg, cs, ns, pod, "tar", "cf", "-", "-C", dir, "."))
	files := map[string][]byte{}
	tr := tar.NewReader(stdout)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[strings.TrimPrefix(h.Name, "./")] = b
	}
	return files
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
