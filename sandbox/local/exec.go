package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/proctor-evals/proctor/sandbox"
)

// box runs commands and file operations on one workspace: a fork, or the
// base while Setup runs.
type box struct {
	ws    string // workspace root
	iodir string // per-command stdin/stdout/stderr files, outside the workspace
	spec  sandbox.Spec
	iso   isolation
	ns    *netns  // nil: the host's network
	cg    *cgroup // nil: no limits

	mu      sync.Mutex
	closed  bool
	n       int
	running map[int]struct{} // process group ids
	wg      sync.WaitGroup
}

func newBox(p *Provider, spec sandbox.Spec, ws, iodir string) (*box, error) {
	if err := os.MkdirAll(iodir, 0o700); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	b := &box{ws: ws, iodir: iodir, spec: spec, iso: p.iso, running: map[int]struct{}{}}
	var err error
	if p.iso.root && !spec.Network {
		if b.ns, err = newNetns(); err != nil {
			return nil, fmt.Errorf("local: network namespace: %w", err)
		}
	}
	if l := spec.Limits; p.iso.cgroup != cgroupNone && (l.CPUs > 0 || l.MemoryBytes > 0 || l.Pids > 0) {
		if b.cg, err = newCgroup(p.iso.cgroup, l); err != nil {
			b.ns.close()
			return nil, fmt.Errorf("local: cgroup: %w", err)
		}
	}
	return b, nil
}

func (b *box) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// close kills every running command, waits for them and releases the
// namespaces and cgroup. It reports whether this call closed the box.
func (b *box) close() bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	b.closed = true
	for pgid := range b.running {
		killGroup(pgid)
	}
	b.mu.Unlock()
	b.wg.Wait()
	b.ns.close()
	b.cg.remove()
	os.RemoveAll(b.iodir)
	return true
}

// Exec implements [sandbox.Sandbox].
func (b *box) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	return b.exec(ctx, cmd)
}

func (b *box) exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.Result{}, fmt.Errorf("local: exec: %w", err)
	}
	if len(cmd.Args) == 0 {
		return sandbox.Result{}, errors.New("local: exec: empty command")
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return sandbox.Result{}, fmt.Errorf("local: exec: %w", sandbox.ErrClosed)
	}
	b.n++
	n := b.n
	b.wg.Add(1)
	b.mu.Unlock()
	defer b.wg.Done()

	dir, err := b.dir(cmd.Dir)
	if err != nil {
		return sandbox.Result{}, err
	}
	env := b.environ(cmd)
	path, err := lookPath(cmd.Args[0], env)
	if err != nil {
		// Like a shell: a missing program is exit status 127, not a
		// sandbox fault.
		return sandbox.Result{ExitCode: 127, Stderr: []byte(err.Error() + "\n")}, nil
	}

	// Output goes to files, not pipes: Wait then returns when the process
	// exits, not when the last descendant holding a pipe does, and large
	// outputs do not sit in this process's memory while the command runs.
	stdin, stdout, stderr, err := b.ioFiles(n, cmd.Stdin)
	if err != nil {
		return sandbox.Result{}, err
	}
	defer func() {
		for _, f := range []*os.File{stdin, stdout, stderr} {
			f.Close()
			os.Remove(f.Name())
		}
	}()

	c := &exec.Cmd{Path: path, Args: cmd.Args, Dir: dir, Env: env, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	start := time.Now()
	if err := b.start(c); err != nil {
		return sandbox.Result{}, fmt.Errorf("local: exec %q: %w: %w", cmd.Args[0], sandbox.ErrUnavailable, err)
	}
	pgid := c.Process.Pid
	b.mu.Lock()
	b.running[pgid] = struct{}{}
	b.mu.Unlock()

	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var timeout <-chan time.Time
	if cmd.Timeout > 0 {
		t := time.NewTimer(cmd.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var timedOut bool
	var ctxErr error
	select {
	case <-done:
	case <-timeout:
		timedOut = true
		killGroup(pgid)
		<-done
	case <-ctx.Done():
		ctxErr = ctx.Err()
		killGroup(pgid)
		<-done
	}
	// Whatever the command left behind in its group dies with it.
	killGroup(pgid)
	b.mu.Lock()
	delete(b.running, pgid)
	b.mu.Unlock()

	res := sandbox.Result{ExitCode: c.ProcessState.ExitCode(), TimedOut: timedOut, Duration: time.Since(start)}
	if timedOut {
		res.ExitCode = -1
	}
	if res.Stdout, err = os.ReadFile(stdout.Name()); err != nil {
		return res, fmt.Errorf("local: exec: stdout: %w", err)
	}
	if res.Stderr, err = os.ReadFile(stderr.Name()); err != nil {
		return res, fmt.Errorf("local: exec: stderr: %w", err)
	}
	if ctxErr != nil {
		return res, fmt.Errorf("local: exec %q: %w", cmd.Args[0], ctxErr)
	}
	return res, nil
}

func (b *box) ioFiles(n int, in []byte) (stdin, stdout, stderr *os.File, err error) {
	name := func(s string) string { return filepath.Join(b.iodir, fmt.Sprintf("%d.%s", n, s)) }
	if err = os.WriteFile(name("in"), in, 0o600); err == nil {
		if stdin, err = os.Open(name("in")); err == nil {
			if stdout, err = os.Create(name("out")); err == nil {
				if stderr, err = os.Create(name("err")); err == nil {
					return stdin, stdout, stderr, nil
				}
				stdout.Close()
			}
			stdin.Close()
		}
	}
	return nil, nil, nil, fmt.Errorf("local: exec: %w: %w", sandbox.ErrUnavailable, err)
}

// dir resolves a command's working directory inside the workspace.
func (b *box) dir(d string) (string, error) {
	n, err := relName(d)
	if err != nil {
		return "", fileErr("exec: dir", d, err)
	}
	if n == "." {
		return b.ws, nil
	}
	r, err := b.root()
	if err != nil {
		return "", fileErr("exec: dir", d, err)
	}
	defer r.Close()
	// Stat through os.Root: a symlink leading out of the workspace fails.
	if _, err := r.Stat(n); err != nil {
		return "", fileErr("exec: dir", d, err)
	}
	return filepath.Join(b.ws, n), nil
}

func (b *box) environ(cmd sandbox.Cmd) []string {
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": b.ws}
	if env["PATH"] == "" {
		env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	for k, v := range b.spec.Env {
		env[k] = v
	}
	for k, v := range cmd.Env {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// lookPath finds name in the PATH of env (not of this process: Spec.Env
// may set its own).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	var path string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found", name)
}
