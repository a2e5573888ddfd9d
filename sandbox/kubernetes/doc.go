// Package kubernetes is the sandbox driver over a Kubernetes cluster,
// through k8s.io/client-go: every environment and every episode is a pod
// of its own, and everything happens through the API server (pods and
// pods/exec), so the process running it (a cluster worker, say) needs no
// Docker, no node access and no shared volume: only a Role in one
// namespace. docs/kubernetes.md is the operator's guide.
//
// It is a module of its own so that proctor's module never requires
// client-go.
//
// # Pods
//
// Provision creates a seed pod from Spec.Image, extracts Spec.Template and
// Spec.Files into Spec.WorkDir (default /workspace) as one tar stream over
// exec, runs Spec.Setup there, and then streams the workspace out (tar c)
// into a file on this machine (Options.SnapshotDir) and deletes the seed
// pod. Fork creates a new pod from the same image and streams that file
// into its workspace (tar x): each episode has a pod, a filesystem, a
// process tree and a network namespace of its own, isolated by the
// cluster's runtime (with RuntimeClassName, gVisor or Kata Containers).
//
// Only the workspace, and the paths of Options.CarryPaths (a tool under
// /opt, a cache under /root), are carried from Setup to the forks: what
// Setup changes elsewhere (a package installed under /usr) is not. Bake
// system dependencies into the image, as a cluster pulls images anyway;
// run in Setup what belongs to the sample (a checkout, a virtualenv or
// node_modules in the workspace). Spec.WorkDir "/" is refused: its
// snapshot would hold /proc.
//
// Why not keep the seed pod and fork inside it (a copy of the workspace
// per episode in one pod)? Episodes would share a kernel namespace set,
// PID space, network and resource limits: not the isolation the fork
// promise makes. Why not a volume snapshot (CSI VolumeSnapshot, clone of
// a PVC)? It needs a CSI driver with snapshots and takes seconds to
// minutes per clone on common ones; the tar stream needs nothing but
// exec, and costs the workspace's size per fork. Measured on the test
// cluster (a real kube-apiserver, scheduler and controller-manager v1.34.4
// with the project's test kubelet running pods as Docker containers, 2
// cores shared with other jobs), side by side with the Docker driver from
// the same image (BenchmarkDrivers, medians of 10, three runs): Provision
// (two files, one Setup command) 715, 589 and 536 ms against Docker's
// 1915, 2596 and 2712 ms (it commits an image); Fork 508, 530 and 403 ms
// against 461, 473 and 655 ms; an Exec 61, 84 and 65 ms against 199, 110
// and 139 ms. A small fork costs a pod's start, about a container's. A
// large workspace costs its copy: a fork of 20 MB in 2000 files took
// 3169 ms against Docker's 535 ms (whose forks share the image's layers),
// mostly tar x creating the files on the container's overlay layer (the
// 20 MB travel in 0.2 s). Keep large, read-only dependencies in the image.
// With Limits.DiskBytes set, a fork's workspace is a memory-backed
// emptyDir of that size (a tmpfs: a write beyond it fails with ENOSPC,
// and kubelets size such a volume by its sizeLimit), which also makes the
// copy cheap: the same 20 MB fork took 596 ms (Docker's, under its disk
// limit, 534 ms). Its pages count against the pod's memory, so
// MemoryBytes must cover DiskBytes and the agent's own use. Setup, in the
// seed pod, runs without the bound. docs/kubernetes.md has the table.
//
// Every pod carries the labels proctor.run (Options.RunID), proctor.role
// ("seed" or "fork"), proctor.network ("off" unless Spec.Network) and
// app.kubernetes.io/managed-by=proctor, plus Options.Labels; no service
// account token is mounted (the agent gets no credentials to the API),
// no service links are set in its environment, and restartPolicy is
// Never. Closing a sandbox deletes its pod (grace period 0). [Cleanup]
// deletes what a killed process left, by label.
//
// A pod that does not come to run fails Provision or Fork with a
// [*StartError] (wrapping [sandbox.ErrUnavailable]) carrying the pod's
// own reason: ErrImagePull or ImagePullBackOff naming the image,
// Unschedulable with the scheduler's message (at once, or after
// Options.SchedulingGrace for a cluster autoscaler to add a node),
// Forbidden with the quota's message when a ResourceQuota refuses the
// pod, Timeout after Options.StartTimeout.
//
// # Commands and files
//
// Everything goes through pods/exec (client-go's WebSocket executor, with
// SPDY as the fallback for API servers before 1.30). The image must
// provide sh, env, cat, head, tar, stat, readlink, mkdir, rm, chmod,
// kill and a sleep that takes fractions of a second (busybox is enough,
// as are GNU coreutils).
//
//   - Exec runs the command under a small sh wrapper that records its pid
//     in /tmp: the container runtime starts an exec'd process in a new
//     session (runc and crun do), so killing its process group kills the
//     command's tree. A command with a deadline (Cmd.Timeout, or ctx's) is
//     killed so by a watchdog the wrapper starts in the pod, at the
//     deadline counted from the exec's start, not by the driver's second
//     exec ("kill -9 -PGID", which follows), which a loaded node starts
//     seconds late; a done ctx without a deadline has only that exec. A
//     descendant that calls setsid itself escapes the kill and dies with
//     the pod. Spec.Env and Cmd.Env reach the command through env, not the
//     pod's environment (where the kubelet would expand $(VAR)). A
//     non-zero exit, which client-go reports as an error, is an Exit.
//   - ReadFile, WriteFile and ReadDir are one exec each, a sh script that
//     resolves the path one component at a time, following symlinks as
//     the kernel does, and refuses (ErrEscape) one that leads out of the
//     workspace (there is a window between the check and the use if a
//     command swaps a path for a symlink concurrently). ReadFile checks
//     the file's type and size with stat before reading it (a FIFO or a
//     sparse 100 GB file is refused at once) and reads at most the cap
//     plus one byte (head -c). What these scripts print comes from the
//     sandbox and is parsed as untrusted input.
//   - A pod deleted or evicted under an episode makes its calls fail with
//     an error wrapping [sandbox.ErrUnavailable]: the episode ends in
//     error (and is retried), the run goes on.
//
// # Guarantees
//
// CPUs and Memory: the container's requests and limits are set from
// Limits (equal, so the pod's QoS class is Guaranteed), and a kubelet
// enforces limits through cgroups. Pids is not claimed: a pod spec cannot
// bound its processes (the kubelet's podPidsLimit is node-wide). Disk:
// DiskBytes sizes each fork's workspace, a memory-backed emptyDir, whose
// tmpfs refuses a write beyond it (an ephemeral-storage limit would only
// evict the pod after the fact).
// The network is claimed only with Options.NetworkPolicy (the driver
// creates a NetworkPolicy denying all ingress and egress of the run's
// pods with Spec.Network false) and Options.NetworkPolicyEnforced (the
// operator's word that the cluster's network plugin enforces it, checked
// as docs/kubernetes.md says): the API server accepts NetworkPolicies
// that nothing enforces. A model gateway is served at
// Options.GatewayAddress ([Driver.ServeGateway]); with NetworkPolicy, a
// second policy allows the network-off pods egress to it alone, and
// Gateway is claimed under the same operator's word.
//
// OOM: after a command that failed under a memory limit the driver reads
// the container's cgroup count of OOM kills (a kernel that killed one
// process, the container running on, as on cgroup v1 nodes) and, when the
// container does not answer, waits for the kubelet to report it
// terminated as OOMKilled (cgroup v2, memory.oom.group): either is
// [sandbox.ErrOOM].
package kubernetes
