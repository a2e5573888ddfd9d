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
// The method is probed once per Provider; [Provider.Method] reports it and
// [WithMethod] forces one.
//
// # Isolation (best effort, stated honestly)
//
// File operations (ReadFile, WriteFile, ReadDir) go through [os.Root]: a
// path that leaves the workspace, through ".." or a symlink, fails with
// [sandbox.ErrEscape]. Commands are host processes started with the
// workspace as working directory; they are NOT confined to it and run with
// the caller's user (this driver is not a security boundary against a
// hostile agent: use sandbox/docker for that). What is enforced:
//
//   - Every command runs in its own process group. When it exits, times out
//     or its ctx is done, the whole group is killed (SIGKILL), so no child
//     outlives it.
//   - As root on Linux, every command also runs in a new PID namespace, of
//     which it is init: when it dies the kernel kills every process it left,
//     even one that escaped the process group (setsid).
//   - As root on Linux with Spec.Network false, all commands of a sandbox
//     share a private network namespace with only loopback up: they can
//     talk to each other over 127.0.0.1 but reach nothing else, not even
//     the host's loopback. Without root, Spec.Network is not enforced.
//   - As root on Linux with writable cgroups (v2 with the cpu, memory and
//     pids controllers, or the v1 cpu, memory and pids hierarchies), each
//     sandbox gets its own cgroup enforcing Spec.Limits (CPUs as a CFS
//     quota, MemoryBytes, Pids) over all its processes together.
//     Otherwise limits are not enforced.
//
// [Provider.Guarantees] reports which of these hold on the running host.
//
// Commands get a small environment, not the caller's (which may hold
// secrets): PATH (the caller's), HOME (the workspace), then Spec.Env and
// Cmd.Env. Spec.WorkDir is ignored: the workspace is a host directory and
// commands see its real path. Spec.Image is ignored.
package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/proctor-evals/proctor/sandbox"
)

// Method is how a fork's workspace is made from the environment's base.
type Method string

const (
	Overlay Method = "overlay" // overlayfs mount, copy-on-write, O(1)
	Reflink Method = "reflink" // FICLONE per file, shares data blocks
	Copy    Method = "copy"    // plain recursive copy
)

// Option configures a Provider.
type Option func(*Provider)

// WithDir sets the directory under which environments and forks are made.
// The default is "proctor-local" in [os.TempDir]. For the overlay method it
// must be on a filesystem that can hold an overlay upper dir (not an
// overlay itself); for reflink, on a filesystem that supports it.
func WithDir(dir string) Option { return func(p *Provider) { p.dir = dir } }

// WithMethod forces the fork method instead of probing for the best one.
// Provision fails if the method does not work here.
func WithMethod(m Method) Option { return func(p *Provider) { p.method = m } }

// WithCapacity bounds how many sandboxes may be open at once (see
// [sandbox.Provider.Capacity]). The default, 0, is no bound.
func WithCapacity(n int) Option { return func(p *Provider) { p.capacity = n } }

// Provider is the local sandbox driver. Its methods may be called
// concurrently. The zero Provider is not valid: use [New].
type Provider struct {
	dir      string
	method   Method
	capacity int

	once  sync.Once
	err   error
	iso   isolation
	count atomic.Int64 // names environments uniquely
}

// New returns a local provider.
func New(opts ...Option) *Provider {
	p := &Provider{dir: filepath.Join(os.TempDir(), "proctor-local")}
	for _, o := range opts {
		o(p)
	}
	return p
}

// init probes the host once: the fork method and what isolation is
// available.
func (p *Provider) init() error {
	p.once.Do(func() {
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			p.err = fmt.Errorf("local: %w", err)
			return
		}
		p.iso = probeIsolation()
		probe := func(m Method) bool {
			switch m {
			case Overlay:
				return probeOverlay(p.dir)
			case Reflink:
				return probeReflink(p.dir)
			case Copy:
				return true
			}
			return false
		}
		if p.method != "" {
			if !probe(p.method) {
				p.err = fmt.Errorf("local: fork method %q does not work in %s", p.method, p.dir)
			}
			return
		}
		for _, m := range []Method{Overlay, Reflink, Copy} {
			if probe(m) {
				p.method = m
				return
			}
		}
	})
	return p.err
}

// Method reports the fork method this provider uses, probing the host on
// first use ("" if the probe failed).
func (p *Provider) Method() Method {
	if p.init() != nil {
		return ""
	}
	return p.method
}

// Guarantees reports what this provider enforces on the running host; see
// the package documentation.
func (p *Provider) Guarantees() sandbox.Guarantees {
	if p.init() != nil {
		return sandbox.Guarantees{}
	}
	c := p.iso.cgroup != cgroupNone
	return sandbox.Guarantees{Network: p.iso.root, CPUs: c, Memory: c, Pids: c}
}

// Capacity implements [sandbox.Provider].
func (p *Provider) Capacity() int { return p.capacity }

// Provision implements [sandbox.Provider].
func (p *Provider) Provision(ctx context.Context, spec sandbox.Spec) (sandbox.Environment, error) {
	if err := p.init(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(p.dir, fmt.Sprintf("env%d-", p.count.Add(1)))
	if err != nil {
		return nil, fmt.Errorf("local: provision: %w", err)
	}
	e := &environment{p: p, spec: spec, dir: dir, base: filepath.Join(dir, "base")}
	if err := e.build(ctx); err != nil {
		e.remove()
		return nil, err
	}
	return e, nil
}

type environment struct {
	p    *Provider
	spec sandbox.Spec
	dir  string // holds base and the forks
	base string

	forks sandbox.Forks // the base outlives the environment until its forks close
	n     atomic.Int64  // names forks
}

func (e *environment) build(ctx context.Context) error {
	if e.spec.Template != "" {
		if err := copyTree(e.spec.Template, e.base, false); err != nil {
			return fmt.Errorf("local: provision: template: %w", err)
		}
	} else if err := os.Mkdir(e.base, 0o755); err != nil {
		return fmt.Errorf("local: provision: %w", err)
	}
	setup, err := newBox(e.p, e.spec, e.base, filepath.Join(e.dir, "setup"))
	if err != nil {
		return err
	}
	defer setup.close()
	// Sorted, so that a file and a directory of the same prefix are
	// written in a reproducible order.
	for _, name := range slices.Sorted(mapsKeys(e.spec.Files)) {
		if err := setup.writeFile(ctx, name, e.spec.Files[name], 0o644); err != nil {
			return fmt.Errorf("local: provision: %w", err)
		}
	}
	for _, c := range e.spec.Setup {
		res, err := setup.exec(ctx, c)
		if err != nil {
			return fmt.Errorf("local: provision: setup %q: %w", c.Args, err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("local: provision: setup %q exited %d: %s: %w",
				c.Args, res.ExitCode, strings.TrimSpace(string(res.Stderr)), sandbox.ErrUnavailable)
		}
	}
	return nil
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Fork implements [sandbox.Environment].
func (e *environment) Fork(ctx context.Context) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: fork: %w", err)
	}
	if err := e.forks.Add(); err != nil {
		return nil, fmt.Errorf("local: fork: %w", err)
	}
	dir := filepath.Join(e.dir, fmt.Sprintf("fork%d", e.n.Add(1)))

	sb, err := e.fork(dir)
	if err != nil {
		os.RemoveAll(dir)
		e.release()
		return nil, err
	}
	return sb, nil
}

func (e *environment) fork(dir string) (*sandboxImpl, error) {
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("local: fork: %w", err)
	}
	var mounted bool
	switch e.p.method {
	case Overlay:
		if err := mountOverlay(e.base, dir, ws); err != nil {
			return nil, fmt.Errorf("local: fork: %w", err)
		}
		mounted = true
	case Reflink, Copy:
		if err := copyTree(e.base, ws, e.p.method == Reflink); err != nil {
			return nil, fmt.Errorf("local: fork: %w", err)
		}
	}
	b, err := newBox(e.p, e.spec, ws, filepath.Join(dir, "io"))
	if err != nil {
		if mounted {
			unmount(ws)
		}
		return nil, err
	}
	return &sandboxImpl{box: b, env: e, dir: dir, mounted: mounted}, nil
}

func (e *environment) release() {
	if e.forks.Done() {
		e.remove()
	}
}

func (e *environment) remove() { os.RemoveAll(e.dir) }

// Close implements [sandbox.Environment]. The base directory is removed when
// the last open fork closes: an overlay's lower dir must outlive its mounts.
func (e *environment) Close() error {
	if e.forks.Close() {
		e.remove()
	}
	return nil
}

// sandboxImpl is one fork.
type sandboxImpl struct {
	*box
	env     *environment
	dir     string
	mounted bool
}

// Close implements [sandbox.Sandbox]: it kills whatever still runs, then
// unmounts and removes the fork.
func (s *sandboxImpl) Close() error {
	if !s.box.close() {
		return nil
	}
	var err error
	if s.mounted {
		err = unmount(filepath.Join(s.dir, "ws"))
	}
	if rerr := os.RemoveAll(s.dir); rerr != nil && err == nil {
		err = fmt.Errorf("local: close: %w", rerr)
	}
	s.env.release()
	return err
}

// --- file operations ---

// relName turns a slash-separated sandbox path into a local one for
// os.Root, rejecting what is not inside the workspace lexically ("..",
// absolute paths). Symlinks are os.Root's job.
func relName(name string) (string, error) {
	if name == "" {
		return ".", nil
	}
	// Cleaned lexically, as io/fs paths: "a/../b" is "b" even if a does
	// not exist.
	n := filepath.Clean(filepath.FromSlash(name))
	if n == "." {
		return n, nil
	}
	if !filepath.IsLocal(n) {
		return "", sandbox.ErrEscape
	}
	return n, nil
}

// fileErr wraps err for op on name, translating os.Root's escape error to
// sandbox.ErrEscape.
func fileErr(op, name string, err error) error {
	if errors.Is(err, errEscape()) {
		return fmt.Errorf("local: %s %s: %w", op, name, sandbox.ErrEscape)
	}
	if errors.Is(err, sandbox.ErrEscape) || errors.Is(err, sandbox.ErrClosed) {
		return fmt.Errorf("local: %s %s: %w", op, name, err)
	}
	return fmt.Errorf("local: %s: %w", op, err)
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
	if b.isClosed() {
		return nil, sandbox.ErrClosed
	}
	r, err := os.OpenRoot(b.ws)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	return r, nil
}

func (b *box) ReadFile(ctx context.Context, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: read: %w", err)
	}
	n, err := relName(name)
	if err != nil {
		return nil, fileErr("read", name, err)
	}
	r, err := b.root()
	if err != nil {
		return nil, fileErr("read", name, err)
	}
	defer r.Close()
	data, err := r.ReadFile(n)
	if err != nil {
		return nil, fileErr("read", name, err)
	}
	return data, nil
}

func (b *box) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local: write: %w", err)
	}
	return b.writeFile(ctx, name, data, perm)
}

func (b *box) writeFile(_ context.Context, name string, data []byte, perm fs.FileMode) error {
	n, err := relName(name)
	if err != nil || n == "." {
		return fileErr("write", name, sandbox.ErrEscape)
	}
	r, err := b.root()
	if err != nil {
		return fileErr("write", name, err)
	}
	defer r.Close()
	if d := filepath.Dir(n); d != "." {
		if err := r.MkdirAll(d, 0o755); err != nil {
			return fileErr("write", name, err)
		}
	}
	if err := r.WriteFile(n, data, perm); err != nil {
		return fileErr("write", name, err)
	}
	return nil
}

func (b *box) ReadDir(ctx context.Context, name string) ([]sandbox.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: readdir: %w", err)
	}
	n, err := relName(name)
	if err != nil {
		return nil, fileErr("readdir", name, err)
	}
	r, err := b.root()
	if err != nil {
		return nil, fileErr("readdir", name, err)
	}
	defer r.Close()
	f, err := r.Open(n)
	if err != nil {
		return nil, fileErr("readdir", name, err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, fileErr("readdir", name, err)
	}
	out := make([]sandbox.FileInfo, 0, len(entries))
	for _, de := range entries {
		fi, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, sandbox.FileInfo{Name: de.Name(), Size: fi.Size(), Mode: fi.Mode(), IsDir: de.IsDir()})
	}
	slices.SortFunc(out, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
