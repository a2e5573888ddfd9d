// Package local is the embedded sandbox driver: no daemon, workspaces are
// directories on the host and commands are host processes.
//
// # Provisioning and forking
//
// Provision materialises the environment once in a base directory (copy of
// Spec.Template, then Spec.Files, then Spec.Setup run there). Fork gives each
// episode its own copy-on-write view of that base, by the first method that
// works on this host, in this order:
//
//  1. [Overlay]: an overlayfs mount (lowerdir = the base, a private upper
//     and work dir per fork). Needs Linux, root (CAP_SYS_ADMIN) and a
//     filesystem that can hold an overlay upper dir. A fork is a few mkdirs
//     and one mount: constant time, whatever the size of the tree.
//  2. [Reflink]: every file is cloned with the FICLONE ioctl (btrfs, xfs,
//     bcachefs…): data blocks are shared, metadata is copied, so a fork is
//     linear in the number of files.
//  3. [Copy]: a plain recursive copy.
//
// The method is probed once per driver; [Driver.Method] reports it and
// Options.Method forces one.
//
// # What it isolates, and what it does not
//
// This driver is NOT a security boundary against a hostile agent: use
// sandbox/docker for untrusted code. Commands are host processes, run with
// the caller's user and the workspace as working directory; they are not
// confined to it and see the host's filesystem (including Unix sockets
// such as /var/run/docker.sock: a command that can reach the Docker socket
// controls the host). What is enforced:
//
//   - The file API (ReadFile, WriteFile, ReadDir) goes through [os.Root]: a
//     path that leaves the workspace, through ".." or a symlink, fails with
//     [sandbox.ErrEscape].
//   - Every command runs in its own process group. When it exits, times out
//     or its ctx is done, the whole group is killed (SIGKILL), so no child
//     outlives it. Every command also gets SIGKILL when the process that
//     started it dies (Linux: Pdeathsig), even by kill -9.
//   - As root on Linux, every command also runs in a new PID namespace, of
//     which it is init: when it dies the kernel kills every process it left,
//     even one that escaped the process group (setsid).
//   - As root on Linux with Spec.Network false, all commands of a sandbox
//     share a private network namespace with only loopback up: they can
//     talk to each other over 127.0.0.1 but reach no IP address of the host
//     or beyond. Host Unix sockets stay reachable through the filesystem, so
//     [Driver.Guarantees] reports IPNetwork, never Network. Without root,
//     Spec.Network is not enforced at all.
//   - As root on Linux with writable cgroups (v2 with the cpu, memory and
//     pids controllers, or the v1 cpu, memory and pids hierarchies), each
//     sandbox gets its own cgroup enforcing Spec.Limits (CPUs as a CFS
//     quota, MemoryBytes, Pids) over all its processes together.
//     Otherwise these limits are not enforced.
//   - Limits.DiskBytes is enforced with the overlay method only: a fork's
//     writes then live on a tmpfs of that size (so they count against the
//     host's memory, up to the limit, not its disk).
//
// [Driver.Guarantees] reports which of these hold on the running host.
//
// Commands get a small environment, not the caller's (which may hold
// secrets): PATH (the caller's), HOME (the workspace), then Spec.Env and
// Cmd.Env. Spec.WorkDir is ignored: the workspace is a host directory and
// commands see its real path. Spec.Image is ignored.
//
// # Nothing left behind
//
// Each driver keeps its environments and forks under a directory of its
// own, named for its process, inside Options.Dir. When a process dies
// without closing its sandboxes (a crash, kill -9), its commands die with
// it (above), and the next driver to provision in the same Options.Dir
// sweeps what it left: overlay and tmpfs mounts are unmounted, directories
// and cgroups removed. [Cleanup] does the same sweep on demand.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	gatewayns "github.com/proctor-evals/proctor/internal/netns"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/driver"
)

// Method is how a fork's workspace is made from the environment's base.
type Method string

const (
	Overlay Method = "overlay" // overlayfs mount, copy-on-write, O(1)
	Reflink Method = "reflink" // FICLONE per file, shares data blocks
	Copy    Method = "copy"    // plain recursive copy
)

// DefaultDir is where environments and forks are made when Options.Dir is
// empty.
func DefaultDir() string { return filepath.Join(os.TempDir(), "proctor-local") }

// Options configures the driver. The zero value is valid.
type Options struct {
	// Dir is the directory under which environments and forks are made
	// (default [DefaultDir]). For the overlay method it must be on a
	// filesystem that can hold an overlay upper dir (not an overlay
	// itself); for reflink, on a filesystem that supports it.
	Dir string
	// Method forces the fork method instead of probing for the best one;
	// Provision fails if it does not work here.
	Method Method
	// Capacity bounds how many sandboxes may be open at once (see
	// [sandbox.Provider.Capacity]); 0 is no bound.
	Capacity int
}

// New returns the portable provider over a local [Driver]; opts may be nil.
func New(opts *Options) *sandbox.Provider {
	d := NewDriver(opts)
	return sandbox.NewProvider(d, &sandbox.ProviderOptions{Capacity: d.capacity})
}

// Driver is the local sandbox driver (a [driver.Provider]). Its methods
// may be called concurrently. Reach it from a provider made by [New] with
// p.Driver().(*local.Driver).
type Driver struct {
	dir      string
	method   Method
	capacity int

	once  sync.Once
	err   error
	iso   isolation
	run   string       // this process's directory inside dir
	count atomic.Int64 // names environments uniquely

	gateways gatewayns.Gateways // ServeGateway's
}

// NewDriver returns a local driver; opts may be nil.
func NewDriver(opts *Options) *Driver {
	d := &Driver{dir: DefaultDir()}
	if opts != nil {
		if opts.Dir != "" {
			d.dir = opts.Dir
		}
		d.method, d.capacity = opts.Method, opts.Capacity
	}
	return d
}

// init probes the host once (the fork method and what isolation is
// available), sweeps what dead processes left in the directory and makes
// this process's own.
func (d *Driver) init() error {
	d.once.Do(func() {
		if err := os.MkdirAll(d.dir, 0o755); err != nil {
			d.err = fmt.Errorf("local: %w", err)
			return
		}
		sweep(d.dir)
		run, err := makeRunDir(d.dir)
		if err != nil {
			d.err = fmt.Errorf("local: %w", err)
			return
		}
		d.run = run
		d.iso = probeIsolation()
		probe := func(m Method) bool {
			switch m {
			case Overlay:
				return probeOverlay(d.run)
			case Reflink:
				return probeReflink(d.run)
			case Copy:
				return true
			}
			return false
		}
		if d.method != "" {
			if !probe(d.method) {
				d.err = fmt.Errorf("local: fork method %q does not work in %s", d.method, d.dir)
			}
			return
		}
		for _, m := range []Method{Overlay, Reflink, Copy} {
			if probe(m) {
				d.method = m
				return
			}
		}
	})
	return d.err
}

// Method reports the fork method this driver uses, probing the host on
// first use ("" if the probe failed).
func (d *Driver) Method() Method {
	if d.init() != nil {
		return ""
	}
	return d.method
}

// Guarantees implements [driver.GuaranteeReporter]; see the package
// documentation. Network is never claimed: host Unix sockets stay
// reachable.
func (d *Driver) Guarantees() sandbox.Guarantees {
	if d.init() != nil {
		return sandbox.Guarantees{}
	}
	c := d.iso.cgroup != cgroupNone
	return sandbox.Guarantees{IPNetwork: d.iso.root, CPUs: c, Memory: c, OOM: c, Pids: c,
		Disk: d.method == Overlay && d.iso.root}
}

// ServeGateway implements [driver.GatewayServer]: h is served on the
// host's loopback at a free port and, in every sandbox forked from then on
// that has a network namespace of its own (root, Spec.Network false), on
// that namespace's loopback at the same port: url is the same for all.
// This driver does not isolate the network (host Unix sockets, and
// without root every address, stay reachable), so it never claims
// [sandbox.Guarantees].Gateway: the gateway keeps the provider key out of
// the sandbox, but not the agent off the network.
func (d *Driver) ServeGateway(h http.Handler) (string, func() error, error) {
	url, stop, err := d.gateways.Serve(h, true)
	if err != nil {
		return "", nil, fmt.Errorf("local: gateway: %w", err)
	}
	return url, stop, nil
}

// Cleanup removes what dead processes left in dir (the default directory
// when empty): their mounts, directories and cgroups. Live processes'
// sandboxes are not touched. Drivers do this when they start; call it to
// reclaim space without starting one.
func Cleanup(dir string) error {
	if dir == "" {
		dir = DefaultDir()
	}
	return sweep(dir)
}

// Provision implements [driver.Provider].
func (d *Driver) Provision(ctx context.Context, spec sandbox.Spec) (driver.Environment, error) {
	if err := d.init(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(d.run, fmt.Sprintf("env%d-", d.count.Add(1)))
	if err != nil {
		return nil, err
	}
	e := &environment{d: d, spec: spec, dir: dir, base: filepath.Join(dir, "base")}
	if err := e.build(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

type environment struct {
	d    *Driver
	spec sandbox.Spec
	dir  string // holds base and the forks
	base string
	n    atomic.Int64 // names forks
}

func (e *environment) build(ctx context.Context) error {
	if e.spec.Template != "" {
		if err := copyTree(e.spec.Template, e.base, false); err != nil {
			return fmt.Errorf("template: %w", err)
		}
	} else if err := os.Mkdir(e.base, 0o755); err != nil {
		return err
	}
	setup, err := newBox(e.d, e.spec, e.base)
	if err != nil {
		return err
	}
	defer setup.Close()
	// Sorted, so that a file and a directory of the same prefix are
	// written in a reproducible order.
	for _, name := range slices.Sorted(maps.Keys(e.spec.Files)) {
		if err := setup.WriteFile(ctx, name, e.spec.Files[name], 0o644); err != nil {
			//lint:ignore ST1005 the message starts with the field it is about
			return fmt.Errorf("Files[%q]: %w", name, err)
		}
	}
	return driver.Setup(ctx, setup, e.spec.Setup)
}

// Fork implements [driver.Environment].
func (e *environment) Fork(ctx context.Context) (driver.Sandbox, error) {
	dir := filepath.Join(e.dir, fmt.Sprintf("fork%d", e.n.Add(1)))
	sb, err := e.fork(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return sb, nil
}

func (e *environment) fork(dir string) (*sandboxImpl, error) {
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	s := &sandboxImpl{dir: dir}
	switch e.d.method {
	case Overlay:
		layers := dir
		if n := e.spec.Limits.DiskBytes; n > 0 && e.d.iso.root {
			layers = filepath.Join(dir, "disk")
			if err := mountTmpfs(layers, n); err != nil {
				return nil, err
			}
			s.mounts = append(s.mounts, layers)
		}
		if err := mountOverlay(e.base, layers, ws); err != nil {
			s.unmount()
			return nil, err
		}
		s.mounts = append(s.mounts, ws)
	case Reflink, Copy:
		if err := copyTree(e.base, ws, e.d.method == Reflink); err != nil {
			return nil, err
		}
	}
	b, err := newBox(e.d, e.spec, ws)
	if err != nil {
		s.unmount()
		return nil, err
	}
	s.box = b
	if b.ns != nil {
		if s.gateways, err = e.d.gateways.ServeIn(b.ns.fd); err != nil {
			b.Close()
			s.unmount()
			return nil, fmt.Errorf("local: gateway in the sandbox's network namespace: %w: %w", sandbox.ErrUnavailable, err)
		}
	}
	return s, nil
}

// Close implements [driver.Environment]: the portable type calls it after
// the last fork closed, so the base (an overlay's lower dir) is unused.
func (e *environment) Close() error { return os.RemoveAll(e.dir) }

// sandboxImpl is one fork.
type sandboxImpl struct {
	*box
	dir      string
	mounts   []string            // innermost last
	gateways gatewayns.Listeners // in the sandbox's network namespace
}

func (s *sandboxImpl) unmount() error {
	var errs []error
	for _, m := range slices.Backward(s.mounts) {
		errs = append(errs, unmount(m))
	}
	s.mounts = nil
	return errors.Join(errs...)
}

// Close implements [driver.Sandbox]: it kills whatever still runs, then
// unmounts and removes the fork.
func (s *sandboxImpl) Close() error {
	s.box.Close()
	s.gateways.Close()
	err := s.unmount()
	if rerr := os.RemoveAll(s.dir); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// --- file operations ---

// fileErr translates os.Root's escape error to sandbox.ErrEscape.
func fileErr(err error) error {
	if errors.Is(err, errEscape()) {
		return fmt.Errorf("%w: %w", sandbox.ErrEscape, err)
	}
	return err
}

var escapeErr = sync.OnceValue(func() error {
	// os.Root reports an escape with an unexported sentinel; learn it once,
	// so that errors.Is works by identity rather than by message.
	dir, err := os.MkdirTemp("", "proctor-probe-")
	if err != nil {
		return errors.New("local: no escape probe")
	}
	defer os.RemoveAll(dir)
	r, err := os.OpenRoot(dir)
	if err != nil {
		return errors.New("local: no escape probe")
	}
	defer r.Close()
	_, err = r.Stat("../x")
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return errors.New("local: no escape probe")
})

func errEscape() error { return escapeErr() }

func (b *box) root() (*os.Root, error) {
	r, err := os.OpenRoot(b.ws)
	if err != nil {
		if b.isClosed() {
			return nil, sandbox.ErrClosed
		}
		return nil, fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	return r, nil
}

// ReadFile implements [driver.Sandbox]. The file is opened non-blocking, so
// that a FIFO is refused rather than waited on, and checked before it is
// read.
func (b *box) ReadFile(ctx context.Context, name string, max int64) ([]byte, error) {
	r, err := b.root()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.OpenFile(name, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, fileErr(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %v", sandbox.ErrNotRegular, fi.Mode().Type())
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %d bytes, over %d", sandbox.ErrTooLarge, fi.Size(), max)
	}
	// The file may grow while it is read: the cap holds whatever its
	// size was.
	data := make([]byte, 0, fi.Size()+1)
	lr := io.LimitReader(f, max+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			data = slices.Grow(data, min(len(data), 1<<20)+512)
		}
		n, err := lr.Read(data[len(data):min(cap(data), len(data)+4<<20)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: over %d bytes", sandbox.ErrTooLarge, max)
	}
	return data, nil
}

// WriteFile implements [driver.Sandbox]. Opened non-blocking too: a FIFO
// without a reader fails rather than hangs.
func (b *box) WriteFile(_ context.Context, name string, data []byte, perm fs.FileMode) error {
	r, err := b.root()
	if err != nil {
		return err
	}
	defer r.Close()
	if d := filepath.Dir(name); d != "." {
		if err := r.MkdirAll(d, 0o755); err != nil {
			return fileErr(err)
		}
	}
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|nonblock, perm)
	if err != nil {
		return fileErr(err)
	}
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("%w: %v", sandbox.ErrNotRegular, fi.Mode().Type())
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadDir implements [driver.Sandbox].
func (b *box) ReadDir(_ context.Context, name string) ([]sandbox.FileInfo, error) {
	r, err := b.root()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.OpenFile(name, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, fileErr(err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.FileInfo, 0, len(entries))
	for _, de := range entries {
		fi, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, sandbox.FileInfo{Name: de.Name(), Size: fi.Size(), Mode: fi.Mode(), IsDir: de.IsDir()})
	}
	return out, nil
}
