package kubetest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/proctor-evals/proctor/sandbox/docker"
)

// Labels of the kubelet's Docker objects.
const (
	labelCluster   = "proctor.kubetest.cluster" // the Cluster's id
	labelPid       = "proctor.kubetest.pid"     // the test binary's pid, for removing what a killed one left
	labelNamespace = "proctor.kubetest.namespace"
	labelPod       = "proctor.kubetest.pod"
	labelPodUID    = "proctor.kubetest.pod-uid"
	labelContainer = "proctor.kubetest.container"
	labelOOMGroup  = "proctor.kubetest.oom-group" // "true": an OOM kill ends the whole container (OOMGroupAnnotation)
)

// kubelet runs the pods bound to its node as Docker containers.
type kubelet struct {
	node    string
	id      string // the Cluster's id
	cs      kubernetes.Interface
	docker  *client.Client
	log     *log.Logger
	logFile *os.File
	port    int // of the exec server

	ctx        context.Context // canceled by stop
	cancel     context.CancelFunc
	factory    informers.SharedInformerFactory
	pods       cache.SharedIndexInformer
	queue      workqueue.TypedRateLimitingInterface[string]
	server     *http.Server
	wg         sync.WaitGroup
	mu         sync.Mutex
	started    map[string]map[string]string // pod UID → container name → Docker ID, of every container started
	keys       map[string]string            // pod UID → namespace/name, for the started
	finalizing map[string]bool              // pod UIDs being finalized
	forwarders map[string][]net.Listener    // pod UID → the forwarders of the egress its NetworkPolicies allow (policy.go)
}

func startKubelet(c *Cluster, pki *pki) (*kubelet, error) {
	cli, err := docker.NewClient()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(c.rest)
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(c.dir, "kubelet.log"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &kubelet{
		node:       "kubetest",
		id:         c.id,
		cs:         cs,
		docker:     cli,
		log:        log.New(logFile, "", log.LstdFlags|log.Lmicroseconds),
		logFile:    logFile,
		ctx:        ctx,
		cancel:     cancel,
		queue:      workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		started:    map[string]map[string]string{},
		keys:       map[string]string{},
		finalizing: map[string]bool{},
		forwarders: map[string][]net.Listener{},
	}
	k.removeOrphans()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return k, err
	}
	k.port = l.Addr().(*net.TCPAddr).Port
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/", k.serveExec)
	k.server = &http.Server{
		Handler:   mux,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pki.serving}},
		ErrorLog:  k.log,
	}
	k.wg.Go(func() { k.server.ServeTLS(l, "", "") })

	if err := k.register(); err != nil {
		return k, err
	}
	k.wg.Go(k.heartbeat)

	k.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.nodeName=" + k.node
	}))
	k.pods = k.factory.Core().V1().Pods().Informer()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	k.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	k.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), k.pods.HasSynced) {
		return k, errors.New("kubelet: pod informer did not sync")
	}
	for range 4 {
		k.wg.Go(k.work)
	}
	k.wg.Go(k.oomGroups)
	return k, nil
}

// oomGroups kills, as a whole, each container of a pod annotated
// OOMGroupAnnotation in which the OOM killer ended a process (Docker's
// "oom" event), as the kernel does for a kubelet's container on cgroup v2
// (memory.oom.group): Docker then says State.OOMKilled, which sync
// reports as the reason OOMKilled.
func (k *kubelet) oomGroups() {
	for k.ctx.Err() == nil {
		filters := make(client.Filters).Add("type", "container").Add("event", "oom").
			Add("label", labelCluster+"="+k.id, labelOOMGroup+"=true")
		res := k.docker.Events(k.ctx, client.EventsListOptions{Filters: filters})
	events:
		for {
			select {
			case m := <-res.Messages:
				k.log.Printf("oom in container %s: killing it whole", m.Actor.ID)
				if _, err := k.docker.ContainerKill(k.ctx, m.Actor.ID, client.ContainerKillOptions{Signal: "KILL"}); err != nil && k.ctx.Err() == nil {
					k.log.Printf("oom kill %s: %v", m.Actor.ID, err)
				}
			case err := <-res.Err:
				if k.ctx.Err() == nil {
					k.log.Printf("docker events: %v", err)
				}
				break events
			}
		}
		select {
		case <-k.ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// stop stops the kubelet and removes every Docker object of the cluster.
func (k *kubelet) stop() error {
	k.cancel()
	k.queue.ShutDown()
	if k.factory != nil {
		k.factory.Shutdown()
	}
	if k.server != nil {
		k.server.Close()
	}
	k.mu.Lock()
	uids := slices.Collect(maps.Keys(k.forwarders))
	k.mu.Unlock()
	for _, uid := range uids {
		k.closeForwarders(uid) // their goroutines are the wait group's
	}
	k.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := k.removeLabelled(ctx, labelCluster+"="+k.id)
	// Removals in progress (see removeLabelled) must end before the test
	// binary does.
	for err == nil {
		res, lerr := k.docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelCluster+"="+k.id)})
		if lerr != nil {
			err = fmt.Errorf("kubelet: list containers: %w", lerr)
		} else if len(res.Items) == 0 {
			break
		} else if ctx.Err() != nil {
			err = fmt.Errorf("kubelet: %d containers still there: %w", len(res.Items), ctx.Err())
		} else {
			time.Sleep(100 * time.Millisecond)
			err = k.removeLabelled(ctx, labelCluster+"="+k.id)
		}
	}
	if err == nil {
		err = k.removeLabelled(ctx, labelCluster+"="+k.id) // the volumes the last containers used
	}
	k.docker.Close()
	k.logFile.Close()
	return err
}

// removeOrphans removes the containers and volumes of test binaries that
// are gone (killed before Main could stop their cluster).
func (k *kubelet) removeOrphans() {
	ctx, cancel := context.WithTimeout(k.ctx, time.Minute)
	defer cancel()
	res, err := k.docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelPid)})
	if err != nil {
		k.log.Printf("orphans: %v", err)
		return
	}
	clusters := map[string]bool{}
	for _, c := range res.Items {
		pid, err := strconv.Atoi(c.Labels[labelPid])
		if err == nil && syscall.Kill(pid, 0) == syscall.ESRCH {
			clusters[c.Labels[labelCluster]] = true
		}
	}
	for id := range clusters {
		k.log.Printf("removing the containers of cluster %s, whose test binary is gone", id)
		if err := k.removeLabelled(ctx, labelCluster+"="+id); err != nil {
			k.log.Printf("orphans: %v", err)
		}
	}
}

// removeLabelled removes the containers, then the volumes, that have all
// the labels (each "key=value").
func (k *kubelet) removeLabelled(ctx context.Context, labels ...string) error {
	filter := make(client.Filters).Add("label", labels...)
	res, err := k.docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		return fmt.Errorf("kubelet: list containers: %w", err)
	}
	var errs []error
	for _, c := range res.Items {
		// A conflict is a removal already in progress (one whose request a
		// canceled context abandoned).
		if _, err := k.docker.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
			errs = append(errs, fmt.Errorf("kubelet: remove container: %w", err))
		}
	}
	vols, err := k.docker.VolumeList(ctx, client.VolumeListOptions{Filters: filter})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("kubelet: list volumes: %w", err))...)
	}
	for _, v := range vols.Items {
		if _, err := k.docker.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
			errs = append(errs, fmt.Errorf("kubelet: remove volume: %w", err))
		}
	}
	return errors.Join(errs...)
}

// --- the node ---

func (k *kubelet) register() error {
	ctx, cancel := context.WithTimeout(k.ctx, time.Minute)
	defer cancel()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(hostMemory(), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		// Pods that request ephemeral storage must fit somewhere; it is
		// not enforced (a kubelet enforces it by eviction, afterwards).
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(diskSize(), resource.BinarySI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: k.node,
			Labels: map[string]string{
				NodeLabel:                "true",
				"kubernetes.io/hostname": k.node,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     runtime.GOARCH,
			},
		},
	}
	node, err := k.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("kubelet: register node: %w", err)
	}
	now := metav1.Now()
	node.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubetest kubelet is posting ready status"},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure"},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID"},
		},
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(k.port)}},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion:          Version,
			OperatingSystem:         "linux",
			Architecture:            runtime.GOARCH,
			ContainerRuntimeVersion: "docker://kubetest",
		},
	}
	for i := range node.Status.Conditions {
		node.Status.Conditions[i].LastHeartbeatTime = now
		node.Status.Conditions[i].LastTransitionTime = now
	}
	if _, err := k.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("kubelet: node status: %w", err)
	}
	return nil
}

// hostMemory is the host's memory in bytes (from /proc/meminfo; 8 GiB if
// unreadable).
func hostMemory() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		for line := range strings.Lines(string(data)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 8 << 30
}

// diskSize is the size of the filesystem holding the temporary directory
// (100 GiB if unknown).
func diskSize() int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(os.TempDir(), &st); err != nil {
		return 100 << 30
	}
	return int64(st.Blocks) * int64(st.Bsize)
}

// heartbeat renews the node's Lease and its conditions' heartbeat times
// every few seconds, so that the node-lifecycle controller keeps it Ready
// and never evicts its pods.
func (k *kubelet) heartbeat() {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		k.beat()
		select {
		case <-k.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (k *kubelet) beat() {
	ctx, cancel := context.WithTimeout(k.ctx, 10*time.Second)
	defer cancel()
	now := metav1.NowMicro()
	leases := k.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	lease, err := leases.Get(ctx, k.node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		duration := int32(40)
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: k.node},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &k.node, LeaseDurationSeconds: &duration, RenewTime: &now},
		}, metav1.CreateOptions{})
	case err == nil:
		lease.Spec.RenewTime = &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil && k.ctx.Err() == nil {
		k.log.Printf("lease: %v", err)
	}
	node, err := k.cs.CoreV1().Nodes().Get(ctx, k.node, metav1.GetOptions{})
	if err == nil {
		for i := range node.Status.Conditions {
			node.Status.Conditions[i].LastHeartbeatTime = metav1.Time(now)
		}
		_, err = k.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	}
	if err != nil && k.ctx.Err() == nil {
		k.log.Printf("node status: %v", err)
	}
}

// --- pods ---

func (k *kubelet) work() {
	for {
		key, quit := k.queue.Get()
		if quit {
			return
		}
		retry, err := k.sync(key)
		switch {
		case err != nil && k.ctx.Err() == nil:
			k.log.Printf("sync %s: %v", key, err)
			k.queue.AddRateLimited(key)
		case retry > 0:
			k.queue.Forget(key)
			k.queue.AddAfter(key, retry)
		default:
			k.queue.Forget(key)
		}
		k.queue.Done(key)
	}
}

// sync brings the Docker containers of the pod named key in line with
// the pod, and the pod's status in line with its containers. A positive
// retry asks to sync again after that long (waiting for a missing image).
func (k *kubelet) sync(key string) (retry time.Duration, err error) {
	ctx, cancel := context.WithTimeout(k.ctx, 5*time.Minute)
	defer cancel()
	obj, exists, err := k.pods.GetStore().GetByKey(key)
	if err != nil {
		return 0, err
	}
	if !exists {
		// Deleted at once (grace 0) or finalized: nothing of it may run.
		ns, name, _ := strings.Cut(key, "/")
		if err := k.removeLabelled(ctx, labelCluster+"="+k.id, labelNamespace+"="+ns, labelPod+"="+name); err != nil {
			return 0, err
		}
		k.mu.Lock()
		var gone []string
		for uid, kk := range k.keys {
			if kk == key {
				delete(k.started, uid)
				delete(k.keys, uid)
				gone = append(gone, uid)
			}
		}
		k.mu.Unlock()
		for _, uid := range gone {
			k.closeForwarders(uid)
		}
		return 0, nil
	}
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		k.finalize(pod)
		return 0, nil
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0, nil
	}

	status := pod.Status.DeepCopy()
	status.HostIP = "127.0.0.1"
	status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	if status.StartTime == nil {
		now := metav1.Now()
		status.StartTime = &now
	}
	var statuses []corev1.ContainerStatus
	var first string // Docker ID of the pod's first container, whose namespaces the others join
	for i, c := range pod.Spec.Containers {
		if i > 0 && first == "" {
			// The first container holds the pod's namespaces: the others
			// wait for it, as for a kubelet's pod sandbox.
			statuses = append(statuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}})
			continue
		}
		st, id, err := k.container(ctx, pod, c, first)
		if err != nil {
			return 0, err
		}
		if i == 0 {
			first = id
		}
		if w := st.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || strings.HasPrefix(w.Reason, "CreateContainer")) {
			retry = 2 * time.Second // as a kubelet retries, if less patiently
		}
		statuses = append(statuses, st)
	}
	status.ContainerStatuses = statuses
	if first != "" && pod.Annotations[NetworkAnnotation] != "" {
		if ins, err := k.docker.ContainerInspect(ctx, first, client.ContainerInspectOptions{}); err == nil && ins.Container.NetworkSettings != nil {
			for _, ep := range ins.Container.NetworkSettings.Networks {
				if ep.IPAddress.IsValid() {
					status.PodIP = ep.IPAddress.String()
					status.PodIPs = []corev1.PodIP{{IP: status.PodIP}}
					break
				}
			}
		}
	}
	setPhase(status)
	if apiequality.Semantic.DeepEqual(&pod.Status, status) {
		return retry, nil
	}
	pod = pod.DeepCopy()
	pod.Status = *status
	_, err = k.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return 0, nil // a newer version (or the deletion) is on its way to the informer
	}
	return retry, err
}

// setPhase sets the pod's phase and conditions from its container
// statuses.
func setPhase(s *corev1.PodStatus) {
	waiting, running, failed := 0, 0, 0
	for _, c := range s.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			waiting++
		case c.State.Running != nil:
			running++
		case c.State.Terminated != nil && c.State.Terminated.ExitCode != 0:
			failed++
		}
	}
	ready := len(s.ContainerStatuses) > 0 && running == len(s.ContainerStatuses)
	switch {
	case waiting > 0:
		s.Phase = corev1.PodPending
	case running > 0:
		s.Phase = corev1.PodRunning
	case failed > 0:
		s.Phase = corev1.PodFailed
	default:
		s.Phase = corev1.PodSucceeded
	}
	notReady := "ContainersNotReady"
	if s.Phase == corev1.PodSucceeded || s.Phase == corev1.PodFailed {
		notReady = "PodCompleted"
	}
	setCondition(s, corev1.PodReadyToStartContainers, true, "")
	setCondition(s, corev1.PodInitialized, true, "")
	setCondition(s, corev1.ContainersReady, ready, notReady)
	setCondition(s, corev1.PodReady, ready, notReady)
}

// setCondition sets a condition, keeping its transition time unless its
// status changes.
func setCondition(s *corev1.PodStatus, typ corev1.PodConditionType, ok bool, reason string) {
	want := corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue}
	if !ok {
		want.Status, want.Reason = corev1.ConditionFalse, reason
	}
	for i, c := range s.Conditions {
		if c.Type == typ {
			if c.Status == want.Status && c.Reason == want.Reason {
				return
			}
			want.LastTransitionTime = metav1.Now()
			s.Conditions[i] = want
			return
		}
	}
	want.LastTransitionTime = metav1.Now()
	s.Conditions = append(s.Conditions, want)
}

// container returns the status of a pod's container, starting it if it
// never was, and its Docker ID ("" if none).
func (k *kubelet) container(ctx context.Context, pod *corev1.Pod, c corev1.Container, first string) (corev1.ContainerStatus, string, error) {
	st := corev1.ContainerStatus{Name: c.Name, Image: c.Image}
	k.mu.Lock()
	id, started := k.started[string(pod.UID)][c.Name]
	k.mu.Unlock()
	if !started {
		img, err := k.docker.ImageInspect(ctx, c.Image)
		if cerrdefs.IsNotFound(err) {
			st.State.Waiting = &corev1.ContainerStateWaiting{
				Reason:  "ErrImagePull",
				Message: fmt.Sprintf("Failed to pull image %q: no local image of that name (the kubetest kubelet pulls no images)", c.Image),
			}
			return st, "", nil
		}
		if err != nil {
			return st, "", err
		}
		imageUser := ""
		if img.Config != nil {
			imageUser = img.Config.User
		}
		u, err := userOf(pod, c, imageUser)
		if err != nil {
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}
			return st, "", nil
		}
		vars, err := k.env(ctx, pod, c)
		if err != nil {
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}
			return st, "", nil
		}
		var isolated bool
		var allowed []netip.AddrPort
		if first == "" {
			if isolated, allowed, err = k.egressOf(ctx, pod); err != nil {
				st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: err.Error()}
				return st, "", nil
			}
		}
		id, err = k.create(ctx, pod, c, u, vars, first, isolated)
		if err != nil {
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: err.Error()}
			return st, "", nil
		}
		k.mu.Lock()
		if k.started[string(pod.UID)] == nil {
			k.started[string(pod.UID)] = map[string]string{}
			k.keys[string(pod.UID)] = pod.Namespace + "/" + pod.Name
		}
		k.started[string(pod.UID)][c.Name] = id
		k.mu.Unlock()
		if _, err := k.docker.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
			// Like a runtime that cannot start the command: terminated, 128.
			k.log.Printf("start %s/%s %s: %v", pod.Namespace, pod.Name, c.Name, err)
		} else if len(allowed) > 0 {
			if err := k.allowEgress(ctx, string(pod.UID), id, allowed); err != nil {
				// Never run under a policy not enforced: the pod fails.
				k.log.Printf("egress of %s/%s: %v", pod.Namespace, pod.Name, err)
				k.docker.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
			}
		}
		k.watch(id, pod.Namespace+"/"+pod.Name)
	}
	st.ContainerID = "docker://" + id
	ins, err := k.docker.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: "the container was removed", ContainerID: st.ContainerID}
		return st, "", nil
	}
	if err != nil {
		return st, "", err
	}
	st.ImageID = "docker://" + ins.Container.Image
	s := ins.Container.State
	switch {
	case s.Running:
		st.State.Running = &corev1.ContainerStateRunning{StartedAt: dockerTime(s.StartedAt)}
		st.Ready = true
		started := true
		st.Started = &started
	case s.Status == container.StateCreated:
		st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		if s.Error != "" {
			st.State.Waiting = nil
			st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: s.Error, ContainerID: st.ContainerID}
		}
	default:
		reason := "Completed"
		if s.OOMKilled {
			reason = "OOMKilled"
		} else if s.ExitCode != 0 {
			reason = "Error"
		}
		st.State.Terminated = &corev1.ContainerStateTerminated{
			ExitCode: int32(s.ExitCode), Reason: reason, Message: s.Error,
			StartedAt: dockerTime(s.StartedAt), FinishedAt: dockerTime(s.FinishedAt), ContainerID: st.ContainerID,
		}
		started := false
		st.Started = &started
	}
	return st, id, nil
}

func dockerTime(s string) metav1.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() < 2000 {
		return metav1.Time{}
	}
	return metav1.NewTime(t.Truncate(time.Second)) // the API keeps seconds
}

// watch syncs the pod again when the container stops.
func (k *kubelet) watch(id, key string) {
	k.wg.Go(func() {
		res := k.docker.ContainerWait(k.ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case <-res.Result:
		case <-res.Error:
		}
		if k.ctx.Err() == nil {
			k.queue.Add(key)
		}
	})
}

// create creates the Docker container of a pod's container.
func (k *kubelet) create(ctx context.Context, pod *corev1.Pod, c corev1.Container, u user, vars []string, first string, isolated bool) (string, error) {
	labels := map[string]string{
		labelCluster:   k.id,
		labelPid:       strconv.Itoa(os.Getpid()),
		labelNamespace: pod.Namespace,
		labelPod:       pod.Name,
		labelPodUID:    string(pod.UID),
		labelContainer: c.Name,
	}
	if pod.Annotations[OOMGroupAnnotation] == "true" {
		labels[labelOOMGroup] = "true"
	}
	cfg := &container.Config{
		Image:      c.Image,
		Entrypoint: expand(c.Command, vars),
		Cmd:        expand(c.Args, vars),
		WorkingDir: c.WorkingDir,
		Labels:     labels,
		Env:        vars,
		Tty:        c.TTY,
		OpenStdin:  c.Stdin,
	}
	pids := int64(PodPidsLimit)
	hc := &container.HostConfig{
		NetworkMode: "none",
		IpcMode:     "shareable",
	}
	hc.PidsLimit = &pids
	if first != "" {
		hc.NetworkMode = container.NetworkMode("container:" + first)
		hc.IpcMode = container.IpcMode("container:" + first)
	} else {
		cfg.Hostname = pod.Name
		if len(cfg.Hostname) > 63 {
			cfg.Hostname = cfg.Hostname[:63]
		}
		if n := pod.Annotations[NetworkAnnotation]; n != "" && !isolated {
			hc.NetworkMode = container.NetworkMode(n) // a pod whose egress a policy isolates has none (policy.go)
		}
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		hc.NanoCPUs = q.MilliValue() * 1e6
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		hc.Memory = q.Value()
		hc.MemorySwap = q.Value() // no swap, as on a kubelet's node
	}
	cfg.User, hc.GroupAdd = u.user, u.groups
	if sc := c.SecurityContext; sc != nil {
		if sc.Capabilities != nil {
			for _, cap := range sc.Capabilities.Add {
				hc.CapAdd = append(hc.CapAdd, string(cap))
			}
			for _, cap := range sc.Capabilities.Drop {
				hc.CapDrop = append(hc.CapDrop, string(cap))
			}
		}
		if sc.ReadOnlyRootFilesystem != nil {
			hc.ReadonlyRootfs = *sc.ReadOnlyRootFilesystem
		}
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			hc.SecurityOpt = append(hc.SecurityOpt, "no-new-privileges")
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, vm := range c.VolumeMounts {
		v, ok := volumes[vm.Name]
		if ok && v.PersistentVolumeClaim != nil {
			// A named volume per claim, outliving its pods as the claim's
			// storage does (whatever PV it is bound to), removed with the
			// cluster.
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Target: vm.MountPath,
				ReadOnly:      vm.ReadOnly || v.PersistentVolumeClaim.ReadOnly,
				Source:        "kubetest-" + k.id + "-pvc-" + pod.Namespace + "-" + v.PersistentVolumeClaim.ClaimName,
				VolumeOptions: &mount.VolumeOptions{Labels: map[string]string{labelCluster: k.id, labelPid: labels[labelPid]}}})
			continue
		}
		if !ok || v.EmptyDir == nil {
			continue // only emptyDir and persistentVolumeClaim are simulated
		}
		if v.EmptyDir.Medium == corev1.StorageMediumMemory {
			// A tmpfs through HostConfig.Tmpfs, whose options the engine
			// takes as given (API 1.41 has no exec in TmpfsOptions): exec,
			// as a kubelet's tmpfs is (Docker's default is noexec).
			opts := "exec"
			if vm.ReadOnly {
				opts += ",ro"
			}
			if v.EmptyDir.SizeLimit != nil {
				opts += ",size=" + strconv.FormatInt(v.EmptyDir.SizeLimit.Value(), 10)
			}
			if hc.Tmpfs == nil {
				hc.Tmpfs = map[string]string{}
			}
			hc.Tmpfs[vm.MountPath] = opts
			continue
		}
		// A named volume, shared by the pod's containers.
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Target: vm.MountPath, ReadOnly: vm.ReadOnly,
			Source: "kubetest-" + string(pod.UID) + "-" + v.Name, VolumeOptions: &mount.VolumeOptions{Labels: labels}})
	}
	name := "kubetest-" + k.id + "-" + pod.Namespace + "-" + pod.Name + "-" + c.Name
	res, err := k.docker.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc, Name: name})
	if err != nil {
		return "", err
	}
	return res.ID, nil
}

// user is whom a container runs as: Docker's "uid[:gid]" ("" for the
// image's user) and supplementary groups.
type user struct {
	user   string
	groups []string
}

// userOf merges the pod's security context into the container's (whose
// fields win), and refuses, as a kubelet does, to run as root a container
// that must not.
func userOf(pod *corev1.Pod, c corev1.Container, imageUser string) (user, error) {
	var uid, gid *int64
	var nonRoot *bool
	var u user
	if ps := pod.Spec.SecurityContext; ps != nil {
		uid, gid, nonRoot = ps.RunAsUser, ps.RunAsGroup, ps.RunAsNonRoot
		for _, g := range ps.SupplementalGroups {
			u.groups = append(u.groups, strconv.FormatInt(g, 10))
		}
		if ps.FSGroup != nil { // a kubelet also gives volumes to the group; not simulated
			u.groups = append(u.groups, strconv.FormatInt(*ps.FSGroup, 10))
		}
	}
	if cs := c.SecurityContext; cs != nil {
		if cs.RunAsUser != nil {
			uid = cs.RunAsUser
		}
		if cs.RunAsGroup != nil {
			gid = cs.RunAsGroup
		}
		if cs.RunAsNonRoot != nil {
			nonRoot = cs.RunAsNonRoot
		}
	}
	if uid != nil {
		u.user = strconv.FormatInt(*uid, 10)
		if gid != nil {
			u.user += ":" + strconv.FormatInt(*gid, 10)
		}
	}
	if nonRoot == nil || !*nonRoot {
		return u, nil
	}
	where := fmt.Sprintf("(pod: %q, container: %s)", pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")", c.Name)
	if uid != nil {
		if *uid == 0 {
			return u, fmt.Errorf("container's runAsUser breaks non-root policy %s", where)
		}
		return u, nil
	}
	name, _, _ := strings.Cut(imageUser, ":")
	if name == "" || name == "root" || name == "0" {
		return u, fmt.Errorf("container has runAsNonRoot and image will run as root %s", where)
	}
	if _, err := strconv.ParseInt(name, 10, 64); err != nil {
		return u, fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root %s", name, where)
	}
	return u, nil
}

// env is a container's environment: plain values; by fieldRef the pod's
// name, namespace, UID, node, and its labels and annotations by key; by
// secretKeyRef a key of a Secret of the pod's namespace (missing, an error
// unless optional, as a kubelet's CreateContainerConfigError); other
// sources are left out.
func (k *kubelet) env(ctx context.Context, pod *corev1.Pod, c corev1.Container) ([]string, error) {
	var out []string
	for _, e := range c.Env {
		v := e.Value
		if from := e.ValueFrom; from != nil {
			switch {
			case from.FieldRef != nil:
				var ok bool
				if v, ok = fieldRef(pod, from.FieldRef.FieldPath); !ok {
					continue
				}
			case from.SecretKeyRef != nil:
				ref := from.SecretKeyRef
				optional := ref.Optional != nil && *ref.Optional
				s, err := k.cs.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) && optional {
					continue
				}
				if apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("secret %q not found", ref.Name)
				}
				if err != nil {
					return nil, err
				}
				b, ok := s.Data[ref.Key]
				if !ok {
					if optional {
						continue
					}
					return nil, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
				}
				v = string(b)
			default:
				continue
			}
		}
		out = append(out, e.Name+"="+v)
	}
	return out, nil
}

// expand replaces, as a kubelet does, each $(NAME) in args by the value of
// the container's variable NAME (left as it is when undefined), and $$ by
// $.
func expand(args, vars []string) []string {
	if args == nil {
		return nil
	}
	values := map[string]string{}
	for _, v := range vars {
		name, value, _ := strings.Cut(v, "=")
		values[name] = value
	}
	out := make([]string, len(args))
	for i, a := range args {
		var b strings.Builder
		for len(a) > 0 {
			j := strings.IndexByte(a, '$')
			if j < 0 || j == len(a)-1 {
				b.WriteString(a)
				break
			}
			b.WriteString(a[:j])
			a = a[j:]
			switch {
			case a[1] == '$':
				b.WriteByte('$')
				a = a[2:]
				continue
			case a[1] == '(':
				if end := strings.IndexByte(a, ')'); end > 0 {
					if v, ok := values[a[2:end]]; ok {
						b.WriteString(v)
						a = a[end+1:]
						continue
					}
				}
			}
			b.WriteByte('$')
			a = a[1:]
		}
		out[i] = b.String()
	}
	return out
}

// fieldRef is the value of a downward-API field path, and whether it is
// one simulated.
func fieldRef(pod *corev1.Pod, path string) (string, bool) {
	switch path {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.uid":
		return string(pod.UID), true
	case "spec.nodeName":
		return pod.Spec.NodeName, true
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok {
			if key, ok := strings.CutSuffix(key, "']"); ok {
				return m[key], true
			}
		}
	}
	return "", false
}

// finalize stops a deleted pod's containers within its grace period,
// removes them, and deletes the pod for good. It works in the background,
// so that a container waiting out its grace period holds up no other pod;
// a later deletion with grace 0 kills the containers at once.
func (k *kubelet) finalize(pod *corev1.Pod) {
	grace := 30
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		grace = int(*g)
	}
	uid := string(pod.UID)
	k.mu.Lock()
	ids := maps.Clone(k.started[uid])
	busy := k.finalizing[uid]
	k.finalizing[uid] = true
	k.mu.Unlock()
	if busy {
		if grace == 0 {
			for _, id := range ids {
				k.docker.ContainerKill(k.ctx, id, client.ContainerKillOptions{Signal: "KILL"})
			}
		}
		return
	}
	k.wg.Go(func() {
		err := k.finalizeNow(pod, ids, grace)
		k.mu.Lock()
		delete(k.finalizing, uid)
		if err == nil {
			delete(k.started, uid)
			delete(k.keys, uid)
		}
		k.mu.Unlock()
		if err == nil {
			k.closeForwarders(uid)
		}
		if err != nil && k.ctx.Err() == nil {
			k.log.Printf("finalize %s/%s: %v", pod.Namespace, pod.Name, err)
			k.queue.AddRateLimited(pod.Namespace + "/" + pod.Name)
		}
	})
}

func (k *kubelet) finalizeNow(pod *corev1.Pod, ids map[string]string, grace int) error {
	ctx, cancel := context.WithTimeout(k.ctx, time.Duration(grace)*time.Second+time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			// Stop sends SIGTERM, then SIGKILL after the grace period.
			k.docker.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &grace})
		})
	}
	wg.Wait()
	if err := k.removeLabelled(ctx, labelCluster+"="+k.id, labelPodUID+"="+string(pod.UID)); err != nil {
		return err
	}
	zero := int64(0)
	err := k.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod: %w", err)
	}
	return nil
}

// containerID returns the Docker ID of a pod's container on the node.
func (k *kubelet) containerID(namespace, pod, name string) (string, error) {
	obj, exists, err := k.pods.GetStore().GetByKey(namespace + "/" + pod)
	if err != nil {
		return "", err
	}
	if !exists {
		return "", fmt.Errorf("kubetest: no pod %s/%s on node %s", namespace, pod, k.node)
	}
	uid := obj.(*corev1.Pod).UID
	k.mu.Lock()
	id, ok := k.started[string(uid)][name]
	k.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("kubetest: container %s of pod %s/%s not started", name, namespace, pod)
	}
	return id, nil
}
