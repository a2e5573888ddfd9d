package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/driver"
)

// drainAfterExit bounds how long Exec waits for the output pipes to close
// once the command's group is dead: only a process that left the group
// (setsid, without a PID namespace) can still hold them.
const drainAfterExit = 2 * time.Second

// box runs commands and file operations on one workspace: a fork, or the
// base while Setup runs.
type box struct {
	ws   string // workspace root
	spec sandbox.Spec
	iso  isolation
	ns   *netns  // nil: the host's network
	cg   *cgroup // nil: no limits

	mu      sync.Mutex
	closed  bool
	running map[int]struct{} // process group ids
	wg      sync.WaitGroup
}

func newBox(d *Driver, spec sandbox.Spec, ws string) (*box, error) {
	b := &box{ws: ws, spec: spec, iso: d.iso, running: map[int]struct{}{}}
	var err error
	if d.iso.root && !spec.Network {
		if b.ns, err = newNetns(); err != nil {
			return nil, fmt.Errorf("network namespace: %w: %w", sandbox.ErrUnavailable, err)
		}
	}
	if l := spec.Limits; d.iso.cgroup != cgroupNone && (l.CPUs > 0 || l.MemoryBytes > 0 || l.Pids > 0) {
		if b.cg, err = newCgroup(d.iso.cgroup, l); err != nil {
			b.ns.close()
			return nil, fmt.Errorf("cgroup: %w: %w", sandbox.ErrUnavailable, err)
		}
	}
	return b, nil
}

func (b *box) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Close kills every running command, waits for them and releases the
// namespaces and cgroup.
func (b *box) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	for pgid := range b.running {
		killGroup(pgid)
	}
	b.mu.Unlock()
	b.wg.Wait()
	b.ns.close()
	b.cg.remove()
	return nil
}

// Exec implements [driver.Sandbox].
func (b *box) Exec(ctx context.Context, cmd sandbox.Cmd, stdout, stderr io.Writer) (driver.Exit, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return driver.Exit{}, sandbox.ErrClosed
	}
	b.wg.Add(1)
	b.mu.Unlock()
	defer b.wg.Done()

	dir, err := b.dir(cmd.Dir)
	if err != nil {
		return driver.Exit{}, err
	}
	env := b.environ(cmd)
	path, err := lookPath(cmd.Args[0], env)
	if err != nil {
		// Like a shell: a missing program is exit status 127, not a
		// sandbox fault.
		io.WriteString(stderr, err.Error()+"\n")
		return driver.Exit{Code: 127}, nil
	}

	// Pipes of our own rather than exec's: exec.Cmd.Wait would wait for
	// every process holding them, while the command's end is its leader's
	// exit (then the group is killed), and the copies run into the
	// caller's capped writers, so that endless output costs no memory.
	var files []*os.File // to close in the parent once started
	var drains sync.WaitGroup
	pipeTo := func(w io.Writer) (*os.File, *os.File, error) {
		r, pw, err := os.Pipe()
		if err != nil {
			return nil, nil, err
		}
		files = append(files, pw)
		drains.Go(func() { io.Copy(w, r) })
		return r, pw, nil
	}
	outR, outW, err := pipeTo(stdout)
	if err != nil {
		return driver.Exit{}, fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	errR, errW, err := pipeTo(stderr)
	if err != nil {
		outW.Close()
		outR.Close()
		return driver.Exit{}, fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		for _, f := range []*os.File{outR, outW, errR, errW} {
			f.Close()
		}
		return driver.Exit{}, fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	files = append(files, inR)
	go func() {
		inW.Write(cmd.Stdin) // fails once the command is gone: nothing to do
		inW.Close()
	}()
	closeParent := func() {
		for _, f := range files {
			f.Close()
		}
	}

	c := &exec.Cmd{Path: path, Args: cmd.Args, Dir: dir, Env: env, Stdin: inR, Stdout: outW, Stderr: errW}
	oomBefore := b.cg.oomKills()
	p, err := b.start(c)
	closeParent()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		drains.Wait()
		return driver.Exit{}, fmt.Errorf("start %q: %w: %w", cmd.Args[0], sandbox.ErrUnavailable, err)
	}
	pgid := c.Process.Pid
	b.mu.Lock()
	b.running[pgid] = struct{}{}
	b.mu.Unlock()

	var ctxErr error
	select {
	case <-p.done:
	case <-ctx.Done():
		ctxErr = ctx.Err()
		killGroup(pgid)
		<-p.done
	}
	// Whatever the command left behind in its group dies with it.
	killGroup(pgid)
	b.mu.Lock()
	delete(b.running, pgid)
	b.mu.Unlock()

	drained := make(chan struct{})
	go func() { drains.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainAfterExit):
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()
	inW.Close()

	exit := driver.Exit{Code: c.ProcessState.ExitCode()}
	if ctxErr == nil && b.cg.oomKills() > oomBefore {
		// The sandbox's cgroup ran out of memory while the command ran
		// (another command of the fork may have been the one killed:
		// either way the limit, not the agent, decided).
		return exit, sandbox.ErrOOM
	}
	return exit, ctxErr
}

// dir resolves a command's working directory inside the workspace.
func (b *box) dir(d string) (string, error) {
	if d == "." {
		return b.ws, nil
	}
	r, err := b.root()
	if err != nil {
		return "", err
	}
	defer r.Close()
	// Stat through os.Root: a symlink leading out of the workspace fails.
	if _, err := r.Stat(d); err != nil {
		return "", fileErr(err)
	}
	return filepath.Join(b.ws, filepath.FromSlash(d)), nil
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

// startRetrying starts c, retrying while the executable is busy: a file
// just written (the agent's own build, say) may still be open for writing
// in a child another goroutine is forking (golang.org/issue/22315).
func startRetrying(c *exec.Cmd) error {
	var err error
	for i := range 20 {
		if err = c.Start(); !errors.Is(err, syscall.ETXTBSY) {
			return err
		}
		// c cannot be started twice: a copy of its configuration can.
		*c = exec.Cmd{Path: c.Path, Args: c.Args, Dir: c.Dir, Env: c.Env, Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr, SysProcAttr: c.SysProcAttr}
		time.Sleep(time.Duration(i+1) * 5 * time.Millisecond)
	}
	return err
}

// process is a started command; done is closed once it has been waited
// for.
type process struct {
	done chan struct{}
}
