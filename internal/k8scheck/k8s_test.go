package k8scheck

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/proctor-evals/proctor/cluster"
	"github.com/proctor-evals/proctor/eval"
)

const dir = "../../examples/distributed/k8s"

// objects are the manifests' documents, decoded by kind.
type objects struct {
	jobs        []*batchv1.Job
	deployments []*appsv1.Deployment
	pods        []*corev1.Pod
	services    []*corev1.Service
	claims      []*corev1.PersistentVolumeClaim
	secrets     []*corev1.Secret
	accounts    []*corev1.ServiceAccount
	roles       []*rbacv1.Role
	bindings    []*rbacv1.RoleBinding
}

// load decodes every YAML document of every manifest strictly into the
// API type of its kind: an unknown field, a misspelt one or a wrong type
// fails, naming the file and the document.
func load(t *testing.T) *objects {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	o := &objects{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		for i, doc := range splitDocuments(b) {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			require.NoError(t, yaml.Unmarshal(doc, &meta), "%s document %d", file, i+1)
			strict := func(v any) {
				require.NoError(t, yaml.UnmarshalStrict(doc, v), "%s document %d (%s)", file, i+1, meta.Kind)
			}
			switch meta.APIVersion + " " + meta.Kind {
			case "batch/v1 Job":
				var v batchv1.Job
				strict(&v)
				o.jobs = append(o.jobs, &v)
			case "apps/v1 Deployment":
				var v appsv1.Deployment
				strict(&v)
				o.deployments = append(o.deployments, &v)
			case "v1 Pod":
				var v corev1.Pod
				strict(&v)
				o.pods = append(o.pods, &v)
			case "v1 Service":
				var v corev1.Service
				strict(&v)
				o.services = append(o.services, &v)
			case "v1 PersistentVolumeClaim":
				var v corev1.PersistentVolumeClaim
				strict(&v)
				o.claims = append(o.claims, &v)
			case "v1 Secret":
				var v corev1.Secret
				strict(&v)
				o.secrets = append(o.secrets, &v)
			case "v1 ServiceAccount":
				var v corev1.ServiceAccount
				strict(&v)
				o.accounts = append(o.accounts, &v)
			case "rbac.authorization.k8s.io/v1 Role":
				var v rbacv1.Role
				strict(&v)
				o.roles = append(o.roles, &v)
			case "rbac.authorization.k8s.io/v1 RoleBinding":
				var v rbacv1.RoleBinding
				strict(&v)
				o.bindings = append(o.bindings, &v)
			default:
				t.Fatalf("%s document %d: %s %s is not a kind this check knows", file, i+1, meta.APIVersion, meta.Kind)
			}
		}
	}
	return o
}

// splitDocuments splits a YAML stream at its "---" lines, dropping
// documents of comments only.
func splitDocuments(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		content := false
		for _, l := range strings.Split(d, "\n") {
			if s := strings.TrimSpace(l); s != "" && !strings.HasPrefix(s, "#") {
				content = true
			}
		}
		if content {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func find[T any](t *testing.T, items []*T, name func(*T) string, want string) *T {
	t.Helper()
	for _, it := range items {
		if name(it) == want {
			return it
		}
	}
	t.Fatalf("no object named %q", want)
	return nil
}

func jobNamed(t *testing.T, o *objects, n string) *batchv1.Job {
	return find(t, o.jobs, func(j *batchv1.Job) string { return j.Name }, n)
}

// flagValue is the value after flag in args.
func flagValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	i := slices.Index(args, flag)
	require.True(t, i >= 0 && i+1 < len(args), "%s not in %q", flag, args)
	return args[i+1]
}

// mountedClaim is the claim mounted at the directory holding file, and
// fails if no volume of the pod is mounted there.
func mountedClaim(t *testing.T, pod corev1.PodSpec, c corev1.Container, file string) string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") {
			for _, v := range pod.Volumes {
				if v.Name == m.Name {
					require.NotNil(t, v.PersistentVolumeClaim, "volume %s is a persistent volume claim", v.Name)
					return v.PersistentVolumeClaim.ClaimName
				}
			}
			t.Fatalf("mount %s names no volume of the pod", m.Name)
		}
	}
	t.Fatalf("%s is on no mounted volume of container %s", file, c.Name)
	return ""
}

func TestIndexedJob(t *testing.T) {
	t.Parallel()
	o := load(t)
	job := jobNamed(t, o, "distributed-arith-shards")
	s := job.Spec
	require.NotNil(t, s.CompletionMode)
	require.Equal(t, batchv1.IndexedCompletion, *s.CompletionMode)
	require.NotNil(t, s.Completions)
	require.NotNil(t, s.Parallelism)
	require.LessOrEqual(t, *s.Parallelism, *s.Completions)
	require.NotNil(t, s.BackoffLimitPerIndex, "a failed shard is retried on its own")
	require.Positive(t, *s.BackoffLimitPerIndex)
	require.NotNil(t, s.PodReplacementPolicy)
	require.Equal(t, batchv1.Failed, *s.PodReplacementPolicy, "two pods never run one index")
	pod := s.Template.Spec
	require.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy, "backoffLimitPerIndex requires it")
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]

	require.Equal(t, "run", c.Args[0])
	require.NotContains(t, c.Args, "-shard", "the shard comes from the Job's index")
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	require.Equal(t, strconv.Itoa(int(*s.Completions)), env["JOB_COMPLETIONS"].Value, "JOB_COMPLETIONS is the Job's completions")
	idx := env["JOB_COMPLETION_INDEX"]
	require.NotNil(t, idx.ValueFrom)
	require.Equal(t, "metadata.annotations['batch.kubernetes.io/job-completion-index']", idx.ValueFrom.FieldRef.FieldPath)

	log := flagValue(t, c.Args, "-log")
	require.Contains(t, log, "$(JOB_COMPLETION_INDEX)", "one log per shard")
	claim := mountedClaim(t, pod, c, log)
	pvc := find(t, o.claims, func(p *corev1.PersistentVolumeClaim) string { return p.Name }, claim)
	require.Contains(t, pvc.Spec.AccessModes, corev1.ReadWriteMany, "shards on several nodes share the volume")

	// The merge reads exactly the logs the shards write, on the same volume.
	merge := jobNamed(t, o, "distributed-arith-merge")
	mc := merge.Spec.Template.Spec.Containers[0]
	require.Equal(t, "merge", mc.Args[0])
	var want []string
	for i := range *s.Completions {
		want = append(want, strings.ReplaceAll(log, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(int(i))))
	}
	out := flagValue(t, mc.Args, "-o")
	var inputs []string
	for i := 1; i < len(mc.Args); i++ {
		switch a := mc.Args[i]; {
		case a == "-o":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			inputs = append(inputs, a)
		}
	}
	require.Equal(t, want, inputs, "merge every shard's log")
	require.Equal(t, claim, mountedClaim(t, merge.Spec.Template.Spec, mc, out))
	for _, in := range inputs {
		require.Equal(t, claim, mountedClaim(t, merge.Spec.Template.Spec, mc, in))
	}
	require.Equal(t, c.Image, mc.Image)
}

func TestCoordinatorAndWorkers(t *testing.T) {
	t.Parallel()
	o := load(t)
	for _, run := range []struct{ coordinator, worker string }{
		{"distributed-arith-coordinator", "distributed-arith-worker"},
		{"sandboxed-arith-coordinator", "sandboxed-arith-worker"},
	} {
		t.Run(run.worker, func(t *testing.T) { checkCoordinatorAndWorkers(t, o, run.coordinator, run.worker) })
	}
}

// checkCoordinatorAndWorkers checks that a coordinator Job, the Service
// selecting it and a worker Job fit together. Both are Jobs (a run is
// finite: a Deployment would start a complete coordinator again, in a
// loop): one coordinator pod at a time, started again when killed (it
// resumes) but not when it stopped the run (exit 1) or was misused (2),
// its log in a directory of the Job's own (the next run, a Job applied
// again, gets a new one); workers done when the run is.
func checkCoordinatorAndWorkers(t *testing.T, o *objects, coordinator, workers string) {
	coord := jobNamed(t, o, coordinator)
	require.NotNil(t, coord.Spec.Completions)
	require.NotNil(t, coord.Spec.Parallelism)
	require.EqualValues(t, 1, *coord.Spec.Completions, "one coordinator per run")
	require.EqualValues(t, 1, *coord.Spec.Parallelism, "one coordinator per run")
	require.NotNil(t, coord.Spec.PodReplacementPolicy)
	require.Equal(t, batchv1.Failed, *coord.Spec.PodReplacementPolicy, "never two coordinators on one log: a new pod once the old one has ended")
	require.Equal(t, corev1.RestartPolicyNever, coord.Spec.Template.Spec.RestartPolicy)
	require.NotNil(t, coord.Spec.PodFailurePolicy, "a stopped run is not started again")
	cc := coord.Spec.Template.Spec.Containers[0]
	stopped := slices.ContainsFunc(coord.Spec.PodFailurePolicy.Rules, func(r batchv1.PodFailurePolicyRule) bool {
		return r.Action == batchv1.PodFailurePolicyActionFailJob && r.OnExitCodes != nil && *r.OnExitCodes.ContainerName == cc.Name &&
			r.OnExitCodes.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && slices.Contains(r.OnExitCodes.Values, 1) && slices.Contains(r.OnExitCodes.Values, 2)
	})
	require.True(t, stopped, "the Job fails, not retries, on the coordinator's exit 1 (stopped) and 2 (usage)")
	require.Equal(t, "coordinate", cc.Args[0])
	log := flagValue(t, cc.Args, "-log")
	mountedClaim(t, coord.Spec.Template.Spec, cc, log)
	require.Contains(t, log, "/$(JOB_UID)/", "each Job's run has a log of its own")
	i := slices.IndexFunc(cc.Env, func(e corev1.EnvVar) bool { return e.Name == "JOB_UID" })
	require.GreaterOrEqual(t, i, 0, "the coordinator gets JOB_UID")
	require.NotNil(t, cc.Env[i].ValueFrom.FieldRef)
	require.Equal(t, "metadata.labels['batch.kubernetes.io/controller-uid']", cc.Env[i].ValueFrom.FieldRef.FieldPath)

	// The Service selects the coordinator's pods and reaches its port.
	var svc *corev1.Service
	for _, s := range o.services {
		if len(labelsSubset(coord.Spec.Template.Labels, s.Spec.Selector)) == len(s.Spec.Selector) {
			svc = s
		}
	}
	require.NotNil(t, svc, "a Service selects the coordinator")
	listen := flagValue(t, cc.Args, "-listen")
	require.True(t, strings.HasPrefix(listen, "0.0.0.0:"), "the coordinator listens beyond its pod: %s", listen)
	listenPort := strings.TrimPrefix(listen, "0.0.0.0:")
	require.Len(t, svc.Spec.Ports, 1)
	sp := svc.Spec.Ports[0]
	target := sp.TargetPort.String()
	if sp.TargetPort.IntValue() == 0 { // a named port
		i := slices.IndexFunc(cc.Ports, func(p corev1.ContainerPort) bool { return p.Name == target })
		require.GreaterOrEqual(t, i, 0, "the Service's target port %s is a port of the coordinator", target)
		target = strconv.Itoa(int(cc.Ports[i].ContainerPort))
	}
	require.Equal(t, listenPort, target, "the Service reaches the port the coordinator listens on")

	// Workers join the Service by name and port, and are done when the
	// run is (no completions: one pod's success, all ended).
	worker := jobNamed(t, o, workers)
	require.Nil(t, worker.Spec.Completions, "workers are done when one is and all have ended")
	require.NotEqual(t, corev1.RestartPolicyAlways, worker.Spec.Template.Spec.RestartPolicy)
	wc := worker.Spec.Template.Spec.Containers[0]
	require.Equal(t, "work", wc.Args[0])
	require.Equal(t, fmt.Sprintf("nats://%s:%d", svc.Name, sp.Port), flagValue(t, wc.Args, "-join"))
	require.Equal(t, cc.Image, wc.Image)

	// Both take the token from the one Secret, from a key it has.
	for _, c := range []corev1.Container{cc, wc} {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "PROCTOR_TOKEN" })
		require.GreaterOrEqual(t, i, 0, "%s gets PROCTOR_TOKEN", c.Name)
		ref := c.Env[i].ValueFrom.SecretKeyRef
		require.NotNil(t, ref, "%s's token comes from a Secret", c.Name)
		secret := find(t, o.secrets, func(s *corev1.Secret) string { return s.Name }, ref.Name)
		require.NotEmpty(t, secret.StringData[ref.Key]+string(secret.Data[ref.Key]), "Secret %s has key %s", ref.Name, ref.Key)
	}
}

func labelsSubset(labels, selector map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range selector {
		if labels[k] == v {
			m[k] = v
		}
	}
	return m
}

// TestArgsAreFlagsOfTheBinary checks every container's arguments against
// the flags the example's commands define (cluster.Main's run, coordinate
// and work; the proctor command's merge is checked in cmd/proctor's tests
// of its usage line), so that a misspelt flag fails here, not in a pod.
func TestArgsAreFlagsOfTheBinary(t *testing.T) {
	t.Parallel()
	o := load(t)
	var containers []corev1.Container
	for _, j := range o.jobs {
		containers = append(containers, j.Spec.Template.Spec.Containers...)
	}
	for _, d := range o.deployments {
		containers = append(containers, d.Spec.Template.Spec.Containers...)
	}
	for _, p := range o.pods {
		containers = append(containers, p.Spec.Containers...)
	}
	checked := 0
	for _, c := range containers {
		if c.Name == "reader" {
			continue // log-reader.yaml's busybox
		}
		if len(c.Command) > 0 {
			require.Equal(t, "proctor", path.Base(c.Command[0]), "container %s runs the eval binary or proctor", c.Name)
			require.Equal(t, []string{"merge", "-force", "-o"}, c.Args[:3])
			continue
		}
		flags := flagsOf(t, c.Args[0])
		for _, a := range c.Args[1:] {
			if !strings.HasPrefix(a, "-") {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			require.Contains(t, flags, name, "container %s: %s %s", c.Name, c.Args[0], a)
			checked++
		}
	}
	require.Positive(t, checked)
}

// flagsOf lists the flags of a command of a cluster.Main binary, from
// its -h output.
func flagsOf(t *testing.T, command string) []string {
	t.Helper()
	e := &eval.Eval[int, int]{Name: "flags"}
	var stdout, stderr bytes.Buffer
	code := cluster.MainArgs(context.Background(), e, eval.Config{}, []string{command, "-h"}, &stdout, &stderr)
	require.Zero(t, code, "%s -h: %s", command, stderr.String())
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`).FindAllStringSubmatch(stdout.String()+stderr.String(), -1) {
		names = append(names, m[1])
	}
	require.NotEmpty(t, names, "%s -h lists flags", command)
	return names
}

// TestSandboxWorker checks the workers whose sandboxes are pods
// (sandbox/kubernetes): they run as a ServiceAccount bound to a Role that
// grants what the driver does (and sandbox/kubernetes's
// TestManifestRoleSuffices runs the driver under that very Role on a real
// API server), and label their sandboxes with their own pod's name
// (TestCoordinatorAndWorkers checks that they join their coordinator).
func TestSandboxWorker(t *testing.T) {
	t.Parallel()
	o := load(t)
	w := jobNamed(t, o, "sandboxed-arith-worker")
	spec := w.Spec.Template.Spec
	sa := find(t, o.accounts, func(a *corev1.ServiceAccount) string { return a.Name }, spec.ServiceAccountName)
	var role *rbacv1.Role
	for _, b := range o.bindings {
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == sa.Name && s.Namespace == "" {
				require.Equal(t, "Role", b.RoleRef.Kind)
				role = find(t, o.roles, func(r *rbacv1.Role) string { return r.Name }, b.RoleRef.Name)
			}
		}
	}
	require.NotNil(t, role, "a RoleBinding binds %s to a Role", sa.Name)
	grants := map[string][]string{}
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				grants[g+"/"+res] = append(grants[g+"/"+res], r.Verbs...)
			}
		}
	}
	for res, verbs := range map[string][]string{
		"/pods":                             {"create", "get", "list", "watch", "delete"},
		"/pods/exec":                        {"create", "get"},
		"networking.k8s.io/networkpolicies": {"create", "list", "delete"},
	} {
		require.ElementsMatch(t, verbs, grants[res], "the Role's verbs on %s", res)
	}
	require.Len(t, grants, 3, "the Role grants nothing else")

	wc := spec.Containers[0]
	i := slices.IndexFunc(wc.Env, func(e corev1.EnvVar) bool { return e.Name == "PROCTOR_SANDBOX_RUN" })
	require.GreaterOrEqual(t, i, 0, "the worker gets PROCTOR_SANDBOX_RUN")
	require.NotNil(t, wc.Env[i].ValueFrom.FieldRef)
	require.Equal(t, "metadata.name", wc.Env[i].ValueFrom.FieldRef.FieldPath)
}

// TestLogReader checks the pod that gets a finished run's log out (the
// eval's distroless image has no tar for kubectl cp, and the coordinator's
// pod has exited): it mounts the coordinator's claim read-only, as the
// coordinator's user, in an image with tar.
func TestLogReader(t *testing.T) {
	t.Parallel()
	o := load(t)
	reader := find(t, o.pods, func(p *corev1.Pod) string { return p.Name }, "sandboxed-arith-log-reader")
	coord := jobNamed(t, o, "sandboxed-arith-coordinator")
	cc := coord.Spec.Template.Spec.Containers[0]
	claim := mountedClaim(t, coord.Spec.Template.Spec, cc, flagValue(t, cc.Args, "-log"))
	rc := reader.Spec.Containers[0]
	require.Equal(t, claim, mountedClaim(t, reader.Spec, rc, "/logs/run.jsonl"), "the reader mounts the coordinator's log")
	require.True(t, rc.VolumeMounts[0].ReadOnly, "the reader cannot change the log")
	require.True(t, strings.HasPrefix(rc.Image, "busybox:"), "the reader's image has tar: %s", rc.Image)
	require.Equal(t, *coord.Spec.Template.Spec.SecurityContext.FSGroup, *reader.Spec.SecurityContext.FSGroup)
}
