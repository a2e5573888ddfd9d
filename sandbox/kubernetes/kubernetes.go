package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/driver"
)

// Labels set on every object the driver makes.
const (
	LabelRun     = "proctor.run"
	LabelRole    = "proctor.role"    // "seed" (runs Setup) or "fork"
	LabelNetwork = "proctor.network" // "off" or "on": what Spec.Network asked
	LabelManaged = "app.kubernetes.io/managed-by"
)

// DefaultWorkDir is the workspace when Spec.WorkDir is empty.
const DefaultWorkDir = "/workspace"

// container is the name of the sandbox container in every pod.
const container = "sandbox"

// Options configures the driver. The zero value is valid: the REST
// configuration from the usual places, the namespace they name.
type Options struct {
	// Config is the API server's REST configuration. Nil loads it as
	// kubectl does: in a pod, the in-cluster configuration (the pod's
	// service account); elsewhere $KUBECONFIG, else ~/.kube/config.
	Config *rest.Config
	// Namespace holds the sandboxes' pods; default the in-cluster pod's
	// own namespace, else the kubeconfig context's, else "default".
	Namespace string
	// RunID is the value of the proctor.run label (default: random); it
	// must be a valid label value. [Cleanup] finds a run's objects by it.
	RunID string
	// Labels are added to every pod (a team, a cost centre…), and
	// Annotations too (sidecar.istio.io/inject: "false" in a mesh, say).
	Labels      map[string]string
	Annotations map[string]string
	// PodSecurityContext and SecurityContext (the sandbox container's)
	// run the sandboxes as another user, with fewer capabilities… as a
	// namespace's Pod Security Standard demands. The user must be able to
	// write Spec.WorkDir (or the directory that will hold it) and /tmp.
	PodSecurityContext *corev1.PodSecurityContext
	SecurityContext    *corev1.SecurityContext
	// ServiceAccount runs the sandboxes' pods (default: the namespace's
	// default). Its token is never mounted into a sandbox.
	ServiceAccount string
	// NodeSelector, Tolerations and RuntimeClassName place the pods: a
	// node pool for agents, a runtime class for gVisor or Kata Containers
	// where the cluster has them.
	NodeSelector     map[string]string
	Tolerations      []corev1.Toleration
	RuntimeClassName string
	// ImagePullPolicy of the sandbox container; default the cluster's
	// (Always for :latest, else IfNotPresent).
	ImagePullPolicy corev1.PullPolicy
	// ImagePullSecrets name Secrets for private registries.
	ImagePullSecrets []string
	// NetworkPolicy makes the driver create, before its first pod, a
	// NetworkPolicy that denies all egress and ingress of the run's pods
	// whose spec has Network false (labelled proctor.network=off). It
	// carries the run's label: [Cleanup] removes it.
	NetworkPolicy bool
	// NetworkPolicyEnforced says that the cluster's network plugin
	// enforces NetworkPolicies (Calico, Cilium… do; kindnet before 0.24
	// and flannel do not: docs/kubernetes.md says how to check). Only
	// with NetworkPolicy and NetworkPolicyEnforced does the driver claim
	// network isolation in [Driver.Guarantees].
	NetworkPolicyEnforced bool
	// GatewayAddress is the IP address at which the run's pods reach
	// this process (in a pod: its own IP, the downward API's
	// status.podIP). Set, the driver serves a model gateway there
	// ([Driver.ServeGateway], eval.Config.Models) at a free port, and
	// with NetworkPolicy a second NetworkPolicy allows the network-off
	// pods egress to that address and port alone: the gateway is the one
	// address they reach, claimed (Guarantees.Gateway) under
	// NetworkPolicyEnforced. Unset, ServeGateway is unsupported.
	GatewayAddress string
	// SchedulingGrace is how long a pod may stay unschedulable before
	// Provision or Fork fails with the scheduler's message; default 0,
	// at once. Set it to cover a cluster autoscaler's scale-up.
	SchedulingGrace time.Duration
	// StartTimeout bounds the wait for a pod to run; default 5 minutes.
	StartTimeout time.Duration
	// CarryPaths are absolute paths outside the workspace that Setup
	// changes and forks must see as Setup left them (a tool installed
	// under /opt, a cache under /root): they are snapshotted with the
	// workspace. Only the workspace is, by default.
	CarryPaths []string
	// SnapshotDir holds the environments' workspace snapshots on this
	// machine; default os.TempDir().
	SnapshotDir string
	// Capacity bounds the pods open at once (see
	// [sandbox.Provider.Capacity]); 0 is no bound.
	Capacity int
}

// New returns the portable provider over a Kubernetes [Driver].
func New(opts Options) (*sandbox.Provider, error) {
	d, err := NewDriver(opts)
	if err != nil {
		return nil, err
	}
	return sandbox.NewProvider(d, &sandbox.ProviderOptions{Capacity: opts.Capacity}), nil
}

// Driver is the Kubernetes driver (a [driver.Provider]). Its methods may
// be called concurrently. Reach it from a provider made by [New] with
// p.Driver().(*kubernetes.Driver).
type Driver struct {
	opts   Options
	config *rest.Config
	cs     k8s.Interface
	ns     string
	runID  string

	policy struct {
		sync.Mutex
		made bool
	}
}

// NewDriver returns a Kubernetes driver; see [New].
func NewDriver(opts Options) (*Driver, error) {
	cfg, ns, err := loadConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	if opts.Namespace != "" {
		ns = opts.Namespace
	}
	cfg = rest.CopyConfig(cfg)
	// client-go's default (5 requests/s) would throttle every exec.
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 100, 200
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	d := &Driver{opts: opts, config: cfg, cs: cs, ns: ns, runID: opts.RunID}
	if d.runID == "" {
		b := make([]byte, 8)
		rand.Read(b)
		d.runID = hex.EncodeToString(b)
	}
	if errs := validation.IsValidLabelValue(d.runID); len(errs) > 0 {
		return nil, fmt.Errorf("kubernetes: RunID %q: %s", d.runID, strings.Join(errs, "; "))
	}
	for k, v := range opts.Labels {
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			return nil, fmt.Errorf("kubernetes: Labels[%q]: %s", k, strings.Join(errs, "; "))
		}
	}
	for _, p := range opts.CarryPaths {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			return nil, fmt.Errorf("kubernetes: CarryPaths: %q is not a clean absolute path below /", p)
		}
	}
	if d.opts.StartTimeout <= 0 {
		d.opts.StartTimeout = 5 * time.Minute
	}
	return d, nil
}

// loadConfig finds the REST configuration and default namespace as
// kubectl does: explicit, in-cluster, $KUBECONFIG or ~/.kube/config.
func loadConfig(explicit *rest.Config) (*rest.Config, string, error) {
	const saNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{})
	kubeconfigNamespace := func() string {
		if ns, _, err := loader.Namespace(); err == nil && ns != "" {
			return ns
		}
		return "default"
	}
	if explicit != nil {
		return explicit, kubeconfigNamespace(), nil
	}
	cfg, err := rest.InClusterConfig()
	if err == nil {
		ns := "default"
		if b, err := os.ReadFile(saNamespace); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			ns = strings.TrimSpace(string(b))
		}
		return cfg, ns, nil
	}
	if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, "", fmt.Errorf("in-cluster configuration: %w", err)
	}
	cfg, err = loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no in-cluster configuration and no kubeconfig ($KUBECONFIG, ~/.kube/config): %w", err)
	}
	return cfg, kubeconfigNamespace(), nil
}

// RunID is the value of the proctor.run label on what this driver makes.
func (d *Driver) RunID() string { return d.runID }

// Namespace is where the driver makes its pods.
func (d *Driver) Namespace() string { return d.ns }

// Config is the driver's REST configuration.
func (d *Driver) Config() *rest.Config { return rest.CopyConfig(d.config) }

// Client is the driver's clientset.
func (d *Driver) Client() k8s.Interface { return d.cs }

// Guarantees implements [driver.GuaranteeReporter]: CPU and memory from
// the pods' resources (requests equal to limits; every conformant kubelet
// enforces limits through cgroups); the disk, each fork's workspace being a
// tmpfs of Limits.DiskBytes; OOM kills, from the container's cgroup count
// or its termination as OOMKilled (box.oomKilled); the network only when the driver applies its
// deny-all policy and the operator says the cluster enforces it. Pids is
// never claimed: a pod spec cannot bound processes (the kubelet's
// podPidsLimit is node-wide).
func (d *Driver) Guarantees() sandbox.Guarantees {
	net := d.opts.NetworkPolicy && d.opts.NetworkPolicyEnforced
	// No host path is ever mounted: with egress denied nothing outside the
	// pod is reachable, Unix sockets of the node included.
	return sandbox.Guarantees{Network: net, IPNetwork: net, Gateway: net && d.opts.GatewayAddress != "",
		CPUs: true, Memory: true, Disk: true, OOM: true}
}

func (d *Driver) labels(role string, network bool) map[string]string {
	l := map[string]string{}
	for k, v := range d.opts.Labels {
		l[k] = v
	}
	l[LabelRun], l[LabelRole], l[LabelManaged] = d.runID, role, "proctor"
	l[LabelNetwork] = "off"
	if network {
		l[LabelNetwork] = "on"
	}
	return l
}

func workDir(spec sandbox.Spec) string {
	if spec.WorkDir == "" {
		return DefaultWorkDir
	}
	return spec.WorkDir
}

// ensurePolicy creates the run's deny-all NetworkPolicy once.
func (d *Driver) ensurePolicy(ctx context.Context) error {
	if !d.opts.NetworkPolicy {
		return nil
	}
	d.policy.Lock()
	defer d.policy.Unlock()
	if d.policy.made {
		return nil
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "proctor-deny-" + d.runID,
			Labels: map[string]string{LabelRun: d.runID, LabelManaged: "proctor"},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelRun: d.runID, LabelNetwork: "off"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress, networkingv1.PolicyTypeIngress},
			// No rule: nothing in, nothing out.
		},
	}
	_, err := d.cs.NetworkingV1().NetworkPolicies(d.ns).Create(ctx, np, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes: create the deny-all NetworkPolicy: %w: %w", sandbox.ErrUnavailable, err)
	}
	d.policy.made = true
	return nil
}

// Provision implements [driver.Provider]: a seed pod is created, its
// workspace filled (Template, Files) and Setup run in it; the workspace is
// then kept as a tar on this machine and the seed pod deleted.
func (d *Driver) Provision(ctx context.Context, spec sandbox.Spec) (driver.Environment, error) {
	if spec.Image == "" {
		return nil, errors.New("kubernetes: provision: Spec.Image is empty")
	}
	if path.Clean("/"+workDir(spec)) == "/" {
		return nil, errors.New("kubernetes: provision: Spec.WorkDir / cannot be snapshotted for the forks (it would hold /proc): use a directory below it")
	}
	if err := d.ensurePolicy(ctx); err != nil {
		return nil, err
	}
	b, err := d.start(ctx, "seed", spec)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if err := b.populate(ctx); err != nil {
		return nil, err
	}
	if err := driver.Setup(ctx, b, spec.Setup); err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	f, err := os.CreateTemp(d.opts.SnapshotDir, "proctor-k8s-workspace-*.tar")
	if err != nil {
		return nil, fmt.Errorf("kubernetes: provision: %w", err)
	}
	env := &environment{d: d, spec: spec, snapshot: f.Name(), digest: b.imageID}
	err = b.snapshot(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		env.Close()
		return nil, err
	}
	return env, nil
}

type environment struct {
	d        *Driver
	spec     sandbox.Spec
	snapshot string // the workspace after Setup, a tar file
	digest   string // the image the seed pod ran
}

// ImageDigest implements [driver.ImageDigester]: the image the
// environment's seed pod ran, as its container status names it.
func (e *environment) ImageDigest() string { return e.digest }

// Fork implements [driver.Environment]: a new pod from the same image,
// with the environment's workspace extracted into it.
func (e *environment) Fork(ctx context.Context) (driver.Sandbox, error) {
	b, err := e.d.start(ctx, "fork", e.spec)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(e.snapshot)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("kubernetes: fork: %w", err)
	}
	defer f.Close()
	if err := b.extract(ctx, f, "/"); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Close implements [driver.Environment]: it removes the snapshot (the
// seed pod is gone already).
func (e *environment) Close() error {
	if err := os.Remove(e.snapshot); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("kubernetes: %w", err)
	}
	return nil
}

// Cleanup deletes every pod and NetworkPolicy labelled with runID in
// namespace: what a killed run left behind, or the run's policy at its
// end.
func Cleanup(ctx context.Context, cs k8s.Interface, namespace, runID string) error {
	// List and delete, not DeleteCollection: the driver's Role needs no
	// deletecollection verb.
	sel := metav1.ListOptions{LabelSelector: LabelRun + "=" + runID}
	var errs []error
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, sel)
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, p := range pods.Items {
			if err := deletePod(ctx, cs, namespace, p.Name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	pols, err := cs.NetworkingV1().NetworkPolicies(namespace).List(ctx, sel)
	if err != nil && !apierrors.IsForbidden(err) { // a Role without the policy option's grants
		errs = append(errs, err)
	} else if err == nil {
		for _, p := range pols.Items {
			if err := cs.NetworkingV1().NetworkPolicies(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kubernetes: cleanup of run %s in %s: %w", runID, namespace, err)
	}
	return nil
}

// Cleanup deletes what this driver's run left; see [Cleanup].
func (d *Driver) Cleanup(ctx context.Context) error {
	err := Cleanup(ctx, d.cs, d.ns, d.runID)
	if err == nil {
		d.policy.Lock()
		d.policy.made = false
		d.policy.Unlock()
	}
	return err
}
