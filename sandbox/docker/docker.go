// Package docker is the sandbox driver over a Docker Engine, through
// github.com/moby/moby/client.
//
// Provision creates a container from Spec.Image, copies Spec.Template and
// Spec.Files into Spec.WorkDir (default /workspace), runs Spec.Setup there
// and commits the container to an image: the environment. Fork creates and
// starts a container from that image, running a keep-alive command
// ([WithKeepAlive]); each episode has its own container.
//
// # Enforcement
//
//   - Network: with Spec.Network false the containers have network mode
//     "none" (loopback only), Setup included; otherwise the default bridge.
//     A model gateway ([Driver.ServeGateway]) is served on each fork's own
//     loopback, from this process, so with Spec.Network false it is the
//     one address a fork reaches.
//   - Limits: CPUs (NanoCPUs), MemoryBytes (Memory) and Pids (PidsLimit)
//     are set on every container, Setup included. Whether the engine
//     enforces them depends on its cgroup setup (a daemon without the
//     memory or pids controller warns and ignores them).
//   - Timeouts: every command runs under a small sh wrapper that records
//     its pid; it is a process group leader (docker exec starts it in a new
//     session), so a done ctx (Cmd.Timeout makes one) kills the whole
//     group with a second exec ("kill -9 -PGID"). A descendant that calls setsid itself
//     escapes that kill; it dies with the container.
//
// The image must therefore provide sh and kill (busybox is enough; see
// [BuildBusyboxImage]). Processes a command leaves running in the
// background keep running until the sandbox closes (unlike sandbox/local).
//
// File operations use the archive API (tar through CopyToContainer and
// CopyFromContainer). Paths are resolved one component at a time with
// ContainerStatPath, so a symlink leading out of the workspace fails with
// [sandbox.ErrEscape] (there is a window between check and use if a command
// swaps a path for a symlink concurrently). ReadDir streams the tar of the
// whole subtree and keeps the first level: cheap for small directories,
// not for huge ones.
//
// Limits.DiskBytes bounds a fork's workspace: it is an anonymous volume
// of the engine's local driver on a tmpfs of that size, so it counts
// against the engine host's memory (up to the limit), not its disk (and
// what a command writes there, against Limits.MemoryBytes too), and a
// write beyond it fails with ENOSPC, through a command or the file API
// alike. The engine's own quota (--storage-opt size) would bound the
// whole writable layer, but only some storage drivers have one (overlay2
// on xfs with project quotas…), and the archive API cannot see into a
// plain tmpfs mount; a local volume works on any Linux engine. Setup runs
// without the bound; Provision then moves the workspace it leaves to
// /.proctor-workspace in the environment's image, and each fork copies
// it into its volume (cp -a), so it must fit in the limit, and the image
// must provide rm, mv and cp. Every legal file name works, "..name" included.
//
// Every container, volume and image carries the labels proctor.run (the
// driver's run ID) and proctor.role; [Cleanup] removes what a crashed run
// left behind. A container that died or was removed makes every call fail
// with an error wrapping [sandbox.ErrUnavailable].
//
// The client must be able to talk to the engine's API version: the moby
// client negotiates down to API 1.40 by default (Docker 19.03+), which is
// what [NewClient] uses.
package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/proctor-evals/proctor/internal/netns"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/driver"
)

// Labels set on every container and image.
const (
	LabelRun  = "proctor.run"
	LabelRole = "proctor.role" // "provision", "environment", "fork" or "workspace"
)

// DefaultWorkDir is the workspace when Spec.WorkDir is empty.
const DefaultWorkDir = "/workspace"

// seedDir holds the provisioned workspace in an environment's image when
// Limits.DiskBytes is set; each fork copies it into its own volume.
const seedDir = "/.proctor-workspace"

// NewClient returns a client configured from the environment (DOCKER_HOST…).
// It negotiates the API version with the engine (the client's default), so
// engines back to API 1.40 (Docker 19.03) work.
func NewClient() (*client.Client, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	return cli, nil
}

// Options configures the driver. The zero value is valid.
type Options struct {
	// RunID is the value of the proctor.run label (default: random).
	RunID string
	// KeepAlive is the command a fork's container runs while the episode
	// uses it (default: sh -c 'while :; do sleep 3600; done', which works
	// with busybox; "sleep infinity" needs GNU coreutils).
	KeepAlive []string
	// Capacity bounds the containers open at once (see
	// [sandbox.Provider.Capacity]); 0 is no bound.
	Capacity int
}

// New returns the portable provider over a Docker [Driver] using cli,
// which the caller keeps and closes; opts may be nil.
func New(cli *client.Client, opts *Options) *sandbox.Provider {
	d := NewDriver(cli, opts)
	return sandbox.NewProvider(d, &sandbox.ProviderOptions{Capacity: d.capacity})
}

// Driver is the Docker driver (a [driver.Provider]). Its methods may be
// called concurrently. Reach it from a provider made by [New] with
// p.Driver().(*docker.Driver).
type Driver struct {
	cli       *client.Client
	runID     string
	keepAlive []string
	capacity  int
	gateways  netns.Gateways // ServeGateway's
}

// NewDriver returns a Docker driver over cli; opts may be nil.
func NewDriver(cli *client.Client, opts *Options) *Driver {
	p := &Driver{cli: cli, keepAlive: []string{"sh", "-c", "while :; do sleep 3600; done"}}
	if opts != nil {
		p.runID, p.capacity = opts.RunID, opts.Capacity
		if len(opts.KeepAlive) > 0 {
			p.keepAlive = opts.KeepAlive
		}
	}
	if p.runID == "" {
		b := make([]byte, 8)
		rand.Read(b)
		p.runID = hex.EncodeToString(b)
	}
	return p
}

// RunID is the value of the proctor.run label on what this driver makes.
func (p *Driver) RunID() string { return p.runID }

// Guarantees implements [driver.GuaranteeReporter]: the engine isolates
// the network (no host socket is mounted either) and applies the limits
// (see the package documentation for the engine's part). An engine that
// cannot mount a fork's size-limited workspace fails the fork: a disk
// limit is never silently dropped.
func (p *Driver) Guarantees() sandbox.Guarantees {
	return sandbox.Guarantees{Network: true, Gateway: p.localEngine(), CPUs: true, Memory: true, OOM: true, Pids: true, Disk: true}
}

func (p *Driver) labels(role string) map[string]string {
	return map[string]string{LabelRun: p.runID, LabelRole: role}
}

func workDir(spec sandbox.Spec) string {
	if spec.WorkDir == "" {
		return DefaultWorkDir
	}
	return spec.WorkDir
}

// create creates and starts a container from image.
func (p *Driver) create(ctx context.Context, image, role string, spec sandbox.Spec) (string, error) {
	hc := &container.HostConfig{}
	if !spec.Network {
		hc.NetworkMode = "none"
	}
	if l := spec.Limits; l.CPUs > 0 || l.MemoryBytes > 0 || l.Pids > 0 {
		hc.Resources.NanoCPUs = int64(l.CPUs * 1e9)
		hc.Resources.Memory = l.MemoryBytes
		if l.MemoryBytes > 0 {
			hc.Resources.MemorySwap = l.MemoryBytes // no swap beyond the limit
		}
		if l.Pids > 0 {
			hc.Resources.PidsLimit = &l.Pids
		}
	}
	if n := spec.Limits.DiskBytes; n > 0 && role == "fork" {
		hc.Mounts = []mount.Mount{{
			Type:   mount.TypeVolume,
			Target: workDir(spec),
			VolumeOptions: &mount.VolumeOptions{
				Labels: p.labels("workspace"),
				DriverConfig: &mount.Driver{Name: "local", Options: map[string]string{
					"type": "tmpfs", "device": "tmpfs", "o": "size=" + strconv.FormatInt(n, 10),
				}},
			},
		}}
	}
	env := make([]string, 0, len(spec.Env))
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	res, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:      image,
			Cmd:        p.keepAlive,
			Env:        env,
			Labels:     p.labels(role),
			WorkingDir: "/",
		},
		HostConfig: hc,
	})
	if err != nil {
		return "", unavailable("create container", err)
	}
	if _, err := p.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		p.remove(res.ID)
		return "", unavailable("start container", err)
	}
	return res.ID, nil
}

func (p *Driver) remove(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: remove container: %w", err)
	}
	return nil
}

func unavailable(op string, err error) error {
	return fmt.Errorf("docker: %s: %w: %w", op, sandbox.ErrUnavailable, err)
}

// Provision implements [driver.Provider].
func (p *Driver) Provision(ctx context.Context, spec sandbox.Spec) (driver.Environment, error) {
	if spec.Image == "" {
		return nil, errors.New("docker: provision: Spec.Image is empty")
	}
	if spec.Limits.DiskBytes > 0 && path.Clean(workDir(spec)) == "/" {
		return nil, errors.New("docker: provision: Limits.DiskBytes needs a workspace below / (Spec.WorkDir)")
	}
	id, err := p.create(ctx, spec.Image, "provision", spec)
	if err != nil {
		return nil, err
	}
	defer p.remove(id)
	b := &box{p: p, id: id, ws: workDir(spec), spec: spec}
	if err := b.populate(ctx); err != nil {
		return nil, err
	}
	if err := driver.Setup(ctx, b, spec.Setup); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if spec.Limits.DiskBytes > 0 {
		// Forks mount their own workspace over b.ws: keep what Setup left
		// where they can copy it from.
		// (An image made from an environment image has a seed already.)
		mv := sandbox.Cmd{Args: []string{"sh", "-c", `rm -rf "$1" && mv "$0" "$1"`, b.ws, seedDir}}
		if err := b.must(ctx, "provision", mv); err != nil {
			return nil, err
		}
	}
	labels := p.labels("environment")
	// No internal exec may run during the commit, and the container is not
	// paused for it: after Setup only the keep-alive loop runs, so there is
	// nothing to freeze, and an exec caught in a paused container can hang
	// the engine's commit and even a forced removal (seen with Engine 20.10).
	b.background.Wait()
	img, err := p.cli.ContainerCommit(ctx, id, client.ContainerCommitOptions{
		NoPause: true,
		Comment: "proctor environment",
		Config:  &container.Config{Cmd: p.keepAlive, Labels: labels, WorkingDir: "/"},
	})
	if err != nil {
		return nil, unavailable("commit", err)
	}
	env := &environment{p: p, image: img.ID, spec: spec}
	if ins, err := p.cli.ImageInspect(ctx, spec.Image); err == nil {
		env.digest = ins.ID
		if len(ins.RepoDigests) > 0 {
			env.digest = ins.RepoDigests[0]
		}
	}
	return env, nil
}

// must runs c in b, an error unless it exits 0.
func (b *box) must(ctx context.Context, op string, c sandbox.Cmd) error {
	var stderr bytes.Buffer
	exit, err := b.Exec(ctx, c, io.Discard, &limited{&stderr, 4096})
	if err != nil {
		return fmt.Errorf("docker: %s %q: %w", op, c.Args, err)
	}
	if exit.Code != 0 {
		return fmt.Errorf("docker: %s %q exited %d: %s: %w",
			op, c.Args, exit.Code, strings.TrimSpace(stderr.String()), sandbox.ErrUnavailable)
	}
	return nil
}

// limited writes at most n bytes to w and drops the rest.
type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	l.w.Write(p[:min(len(p), max(l.n-l.w.Len(), 0))])
	return len(p), nil
}

type environment struct {
	p      *Driver
	image  string
	spec   sandbox.Spec
	digest string // of spec.Image
}

// ImageDigest implements [driver.ImageDigester].
func (e *environment) ImageDigest() string { return e.digest }

// Fork implements [driver.Environment].
func (e *environment) Fork(ctx context.Context) (driver.Sandbox, error) {
	id, err := e.p.create(ctx, e.image, "fork", e.spec)
	if err != nil {
		return nil, err
	}
	f := &forked{box: &box{p: e.p, id: id, ws: workDir(e.spec), spec: e.spec}}
	if f.gateways, err = e.p.serveGateways(ctx, id); err != nil {
		f.Close()
		return nil, err
	}
	if e.spec.Limits.DiskBytes > 0 {
		if err := f.must(ctx, "fork: fill the workspace (Limits.DiskBytes)", sandbox.Cmd{Args: []string{"cp", "-a", seedDir + "/.", f.ws}}); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// Close implements [driver.Environment]: it removes the committed image
// (the portable type calls it after the last fork closed).
func (e *environment) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := e.p.cli.ImageRemove(ctx, e.image, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: remove image: %w", err)
	}
	return nil
}

type forked struct {
	*box
	gateways netns.Listeners // in the container's network namespace
}

// Close implements [driver.Sandbox]: it removes the container (force).
func (f *forked) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.gateways.Close()
	return f.p.remove(f.id)
}

// Cleanup removes every container, volume and image labelled with runID:
// what a crashed run left behind. Images are removed after containers.
func Cleanup(ctx context.Context, cli *client.Client, runID string) error {
	filter := make(client.Filters).Add("label", LabelRun+"="+runID)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		return fmt.Errorf("docker: cleanup: %w", err)
	}
	var errs []error
	for _, c := range cs.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	// A fork's workspace volume goes with its container; one the engine
	// kept (a daemon that died in between) goes here.
	vols, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: filter})
	if err != nil {
		return fmt.Errorf("docker: cleanup: %w", err)
	}
	for _, v := range vols.Items {
		if _, err := cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	imgs, err := cli.ImageList(ctx, client.ImageListOptions{All: true, Filters: filter})
	if err != nil {
		return fmt.Errorf("docker: cleanup: %w", err)
	}
	for _, img := range imgs.Items {
		if _, err := cli.ImageRemove(ctx, img.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("docker: cleanup: %w", err)
	}
	return nil
}
