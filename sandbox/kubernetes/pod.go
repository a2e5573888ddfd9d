package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/proctor-evals/proctor/sandbox"
)

// keepAlive is PID 1 of every pod: it sleeps until the pod is deleted,
// and exits at once on SIGTERM (sh as PID 1 ignores signals it does not
// trap). busybox's sleep has no "infinity".
var keepAlive = []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"}

// StartError is a pod that did not come to run: its image could not be
// pulled, it could not be scheduled, a quota refused it… It wraps
// [sandbox.ErrUnavailable].
type StartError struct {
	Pod     string // namespace/name; empty when the API refused to create it
	Image   string
	Reason  string // the pod's own: ErrImagePull, ImagePullBackOff, Unschedulable, Forbidden, Failed…; or Timeout
	Message string
}

func (e *StartError) Error() string {
	pod := e.Pod
	if pod == "" {
		pod = "(not created)"
	}
	return fmt.Sprintf("kubernetes: pod %s of image %q did not start: %s: %s", pod, e.Image, e.Reason, e.Message)
}

func (e *StartError) Unwrap() error { return sandbox.ErrUnavailable }

// podFor is the pod of one sandbox (role "seed" or "fork") of spec.
func (d *Driver) podFor(role string, spec sandbox.Spec) *corev1.Pod {
	no := false
	zero := int64(0)
	c := corev1.Container{
		Name:            container,
		Image:           spec.Image,
		Command:         keepAlive,
		WorkingDir:      "/",
		ImagePullPolicy: d.opts.ImagePullPolicy,
		Resources:       resources(spec.Limits),
		SecurityContext: d.opts.SecurityContext,
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "proctor-" + role + "-",
			Namespace:    d.ns,
			Labels:       d.labels(role, spec.Network),
			Annotations:  d.opts.Annotations,
		},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{c},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &zero,
			ServiceAccountName:            d.opts.ServiceAccount,
			// The agent gets no credentials to the API server, and no
			// environment naming the cluster's services.
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			NodeSelector:                 d.opts.NodeSelector,
			Tolerations:                  d.opts.Tolerations,
			SecurityContext:              d.opts.PodSecurityContext,
		},
	}
	if n := spec.Limits.DiskBytes; n > 0 && role == "fork" {
		// A fork's workspace is a tmpfs of that size: a write beyond it
		// fails (ENOSPC). Kubelets size a memory-backed emptyDir by its
		// sizeLimit (SizeMemoryBackedVolumes, on by default since 1.22).
		// Setup, in the seed pod, runs without the bound.
		size := resource.NewQuantity(n, resource.BinarySI)
		p.Spec.Volumes = []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: size},
		}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "workspace", MountPath: path.Clean("/" + workDir(spec))}}
	}
	if d.opts.RuntimeClassName != "" {
		rc := d.opts.RuntimeClassName
		p.Spec.RuntimeClassName = &rc
	}
	for _, s := range d.opts.ImagePullSecrets {
		p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	return p
}

// resources are the container's requests and limits, equal (the pod is
// then of the Guaranteed QoS class) for CPU and memory.
func resources(l sandbox.Limits) corev1.ResourceRequirements {
	rl := corev1.ResourceList{}
	if l.CPUs > 0 {
		rl[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Ceil(l.CPUs*1000)), resource.DecimalSI)
	}
	if l.MemoryBytes > 0 {
		rl[corev1.ResourceMemory] = *resource.NewQuantity(l.MemoryBytes, resource.BinarySI)
	}
	if len(rl) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}
}

// start creates a pod for spec and waits until it runs.
func (d *Driver) start(ctx context.Context, role string, spec sandbox.Spec) (*box, error) {
	pod := d.podFor(role, spec)
	created, err := d.cs.CoreV1().Pods(d.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// A quota or an admission policy refuses here, with the reason.
		return nil, &StartError{Image: spec.Image, Reason: string(apierrors.ReasonForError(err)), Message: err.Error()}
	}
	running, err := d.waitRunning(ctx, created.Name, spec.Image)
	if err != nil {
		deletePod(context.Background(), d.cs, d.ns, created.Name)
		return nil, err
	}
	b := newBox(d, created.Name, spec)
	b.imageID = imageID(running)
	return b, nil
}

// imageID is what the pod's container runs, as its status names it
// (ContainerStatus.ImageID), without the runtime's scheme: a registry
// digest ("name@sha256:…") for a pulled image, else the image's ID.
func imageID(p *corev1.Pod) string {
	for _, st := range p.Status.ContainerStatuses {
		if st.ImageID != "" {
			id := st.ImageID
			if _, rest, ok := strings.Cut(id, "://"); ok {
				id = rest // docker-pullable://, docker://, containerd's none
			}
			return id
		}
	}
	return ""
}

// fatalWaiting are the reasons a container waits that will not resolve on
// their own (with restartPolicy Never).
var fatalWaiting = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"ImageInspectError": true, "RegistryUnavailable": true, "CreateContainerConfigError": true,
	"CreateContainerError": true, "RunContainerError": true, "CrashLoopBackOff": true,
}

// podState says whether p runs, failed (a StartError without Pod and
// Image), or waits; unschedulable is the scheduler's message while it
// cannot place p.
func podState(p *corev1.Pod) (running bool, failed *StartError, unschedulable string) {
	if p.DeletionTimestamp != nil {
		return false, &StartError{Reason: "Deleted", Message: "the pod was deleted while starting"}, ""
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && fatalWaiting[w.Reason] {
			return false, &StartError{Reason: w.Reason, Message: w.Message}, ""
		}
		if t := cs.State.Terminated; t != nil {
			return false, &StartError{Reason: "Terminated", Message: fmt.Sprintf("the container exited (%s, code %d): %s", t.Reason, t.ExitCode, t.Message)}, ""
		}
	}
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return false, &StartError{Reason: orElse(p.Status.Reason, string(p.Status.Phase)), Message: p.Status.Message}, ""
	case corev1.PodRunning:
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == container && cs.State.Running != nil {
				return true, nil, ""
			}
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return false, nil, c.Message
		}
	}
	return false, nil, ""
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// waitRunning watches the pod until it runs (and returns it as it was
// then), fails, stays unschedulable past Options.SchedulingGrace, or
// Options.StartTimeout passes.
func (d *Driver) waitRunning(ctx context.Context, name, image string) (*corev1.Pod, error) {
	fail := func(e *StartError) error {
		e.Pod, e.Image = d.ns+"/"+name, image
		return e
	}
	timeout := time.NewTimer(d.opts.StartTimeout)
	defer timeout.Stop()
	var last *corev1.Pod
	var grace <-chan time.Time // set while the pod is unschedulable
	for {
		// A watch without a resource version starts with the pod as it is;
		// one the server ends is started again.
		w, err := d.cs.CoreV1().Pods(d.ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("kubernetes: watch pod %s/%s: %w: %w", d.ns, name, sandbox.ErrUnavailable, err)
		}
		err = func() error {
			defer w.Stop()
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						return nil
					}
					p, ok := ev.Object.(*corev1.Pod)
					if !ok {
						continue
					}
					if ev.Type == watch.Deleted {
						return fail(&StartError{Reason: "Deleted", Message: "the pod was deleted while starting"})
					}
					last = p
					running, failed, unsched := podState(p)
					switch {
					case running:
						return errRunning
					case failed != nil:
						return fail(failed)
					case unsched != "" && d.opts.SchedulingGrace <= 0:
						return fail(&StartError{Reason: corev1.PodReasonUnschedulable, Message: unsched})
					case unsched != "" && grace == nil:
						grace = time.After(d.opts.SchedulingGrace)
					case unsched == "":
						grace = nil
					}
				case <-grace:
					_, _, unsched := podState(last)
					return fail(&StartError{Reason: corev1.PodReasonUnschedulable, Message: fmt.Sprintf("%s (for %s)", unsched, d.opts.SchedulingGrace)})
				case <-timeout.C:
					msg := "no status yet"
					if last != nil {
						msg = describe(last)
					}
					return fail(&StartError{Reason: "Timeout", Message: fmt.Sprintf("not running after %s: %s", d.opts.StartTimeout, msg)})
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}()
		if err == errRunning {
			return last, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

var errRunning = errors.New("running")

// describe summarizes a pod's status for an error.
func describe(p *corev1.Pod) string {
	parts := []string{"phase " + orElse(string(p.Status.Phase), "unknown")}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, fmt.Sprintf("container waiting: %s %s", w.Reason, w.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// deletePod deletes a pod at once (grace period 0: what runs in a sandbox
// has nothing to save), ignoring one already gone.
func deletePod(ctx context.Context, cs k8s.Interface, ns, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	zero := int64(0)
	err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: delete pod %s/%s: %w", ns, name, err)
	}
	return nil
}
