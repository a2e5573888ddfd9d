package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/driver"
)

// box is one container: a fork, or the container Setup runs in.
type box struct {
	p    *Driver
	id   string
	ws   string
	spec sandbox.Spec

	mu     sync.Mutex
	closed bool
	n      int   // names pid files
	ooms   int64 // the container's OOM kills already reported

	background sync.WaitGroup // internal execs still running (pid file removal)
}

// fault classifies an engine error: a missing path in a running container
// is fs.ErrNotExist, anything else is the sandbox failing.
func (b *box) fault(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st, ierr := b.p.cli.ContainerInspect(ctx, b.id, client.ContainerInspectOptions{})
	running := ierr == nil && st.Container.State != nil && st.Container.State.Running
	if cerrdefs.IsNotFound(err) && running {
		return fs.ErrNotExist
	}
	if ierr == nil && st.Container.State != nil && st.Container.State.OOMKilled {
		// The container itself died of its memory limit.
		return fmt.Errorf("docker: %w: %w", sandbox.ErrOOM, err)
	}
	return fmt.Errorf("docker: %w: %w", sandbox.ErrUnavailable, err)
}

// populate creates the workspace and copies Template and Files into it.
func (b *box) populate(ctx context.Context) error {
	// The tar is extracted at "/" with the workspace as a prefix, not at the
	// workspace: the engine refuses relative symlinks that climb out of the
	// extraction root, and a template may hold such links (the file API
	// refuses to follow them, with ErrEscape).
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarWorkspace(pw, b.ws, b.spec.Template)) }()
	_, err := b.p.cli.CopyToContainer(ctx, b.id, client.CopyToContainerOptions{DestinationPath: "/", Content: pr})
	pr.CloseWithError(err)
	if err != nil {
		return unavailable("provision: template", err)
	}
	for _, name := range slices.Sorted(maps.Keys(b.spec.Files)) {
		if err := b.WriteFile(ctx, name, b.spec.Files[name], 0o644); err != nil {
			return fmt.Errorf("docker: Files[%q]: %w", name, err)
		}
	}
	return nil
}

// tarWorkspace writes a tar stream of the directories of ws (absolute)
// and, under it, the tree at dir if any, keeping symlinks as links.
func tarWorkspace(w io.Writer, ws, dir string) error {
	tw := tar.NewWriter(w)
	prefix := strings.Trim(ws, "/")
	parts := strings.Split(prefix, "/")
	for i := range parts {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.Join(parts[:i+1], "/") + "/", Mode: 0o755, ModTime: time.Now()}); err != nil {
			return err
		}
	}
	if dir != "" {
		if _, err := driver.AddTree(tw, dir, prefix); err != nil {
			return err
		}
	}
	return tw.Close()
}

// --- exec ---

// wrapper records the command's pid (its process group id: docker exec
// starts it as a session leader) so that a done ctx can kill the group.
const wrapper = `echo $$ > "$0"; exec "$@"`

// Exec implements [driver.Sandbox].
func (b *box) Exec(ctx context.Context, cmd sandbox.Cmd, stdout, stderr io.Writer) (driver.Exit, error) {
	dir, _, err := b.resolve(ctx, cmd.Dir, false)
	if err != nil {
		return driver.Exit{}, err
	}
	b.mu.Lock()
	b.n++
	pidfile := fmt.Sprintf("/tmp/.proctor-exec-%d.pid", b.n)
	b.mu.Unlock()

	env := make([]string, 0, len(cmd.Env))
	for _, k := range slices.Sorted(maps.Keys(cmd.Env)) {
		env = append(env, k+"="+cmd.Env[k])
	}
	created, err := b.p.cli.ExecCreate(ctx, b.id, client.ExecCreateOptions{
		Cmd:          append([]string{"sh", "-c", wrapper, pidfile}, cmd.Args...),
		Env:          env,
		WorkingDir:   dir,
		AttachStdin:  len(cmd.Stdin) > 0,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return driver.Exit{}, b.fault(ctx, err)
	}
	att, err := b.p.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return driver.Exit{}, b.fault(ctx, err)
	}
	defer att.Close()
	if len(cmd.Stdin) > 0 {
		go func() {
			att.Conn.Write(cmd.Stdin)
			att.CloseWrite()
		}()
	}
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, att.Reader)
		done <- err
	}()

	var streamErr error
	select {
	case streamErr = <-done:
	case <-ctx.Done():
		b.kill(pidfile)
		b.wait(done, att)
		return driver.Exit{Code: -1}, ctx.Err()
	}
	res := driver.Exit{Code: -1}
	if streamErr != nil {
		return res, b.fault(ctx, streamErr)
	}
	// The stream ends a moment before the engine records the exit code.
	for i := 0; ; i++ {
		ins, err := b.p.cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			return res, b.fault(ctx, err)
		}
		if !ins.Running {
			res.Code = ins.ExitCode
			break
		}
		if i == 200 {
			return res, fmt.Errorf("docker: still running after its output ended: %w", sandbox.ErrUnavailable)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.rmPidfile(pidfile)
	if res.Code != 0 && b.spec.Limits.MemoryBytes > 0 && b.oomKilled(ctx) {
		return res, sandbox.ErrOOM
	}
	return res, nil
}

// oomCount prints the container's memory cgroup's count of processes the
// OOM killer ended (cgroup v2 with its own namespace, then v1).
const oomCount = `for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do [ -r $f ] && exec cat $f; done`

// oomKilled reports whether the OOM killer ended a process of the
// container since the last time it said so. A process killed in an exec
// leaves no trace in the container's state (State.OOMKilled is the main
// process's), only in its cgroup's count, read here after a command that
// failed: a process killed for memory fails its command.
func (b *box) oomKilled(ctx context.Context) bool {
	var out bytes.Buffer
	if err := b.output(ctx, []string{"sh", "-c", oomCount}, &out); err != nil {
		return false
	}
	for line := range strings.Lines(out.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			b.mu.Lock()
			defer b.mu.Unlock()
			if n > b.ooms {
				b.ooms = n
				return true
			}
			return false
		}
	}
	return false
}

// wait waits for the output stream after a kill, closing it if the engine
// keeps it open (a descendant that escaped the group holds it).
func (b *box) wait(done chan error, att client.ExecAttachResult) {
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		att.Close()
		<-done
	}
}

// kill kills the process group recorded in pidfile, with a fresh exec
// that does not depend on the caller's (maybe done) ctx.
func (b *box) kill(pidfile string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := `p=$(cat "$0" 2>/dev/null) && [ -n "$p" ] && { kill -9 -"$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; }; rm -f "$0"`
	b.run(ctx, []string{"sh", "-c", script, pidfile})
}

func (b *box) rmPidfile(pidfile string) {
	// Best effort and asynchronous: a leftover file in /tmp harms nobody.
	// Provision waits for these before it commits the container.
	b.background.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b.run(ctx, []string{"rm", "-f", pidfile})
	})
}

// run runs an internal command to completion, ignoring its output.
func (b *box) run(ctx context.Context, args []string) {
	b.output(ctx, args, io.Discard)
}

// output runs an internal command to completion, copying its standard
// output to w.
func (b *box) output(ctx context.Context, args []string, w io.Writer) error {
	created, err := b.p.cli.ExecCreate(ctx, b.id, client.ExecCreateOptions{Cmd: args, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return err
	}
	att, err := b.p.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return err
	}
	defer att.Close()
	_, err = stdcopy.StdCopy(w, io.Discard, att.Reader)
	return err
}

// --- files ---

// resolve maps a workspace path (clean, as the portable type passes it)
// to an absolute path in the container, following symlinks one component
// at a time and refusing any that leads out of the workspace. With create,
// a missing tail is allowed: it returns the deepest existing directory and
// the components still to create.
func (b *box) resolve(ctx context.Context, name string, create bool) (string, []string, error) {
	cur := b.ws
	var comps []string
	if name != "." {
		comps = strings.Split(name, "/")
	}
	for i, c := range comps {
		next := path.Join(cur, c)
		st, err := b.p.cli.ContainerStatPath(ctx, b.id, client.ContainerStatPathOptions{Path: next})
		if err != nil {
			err = b.fault(ctx, err)
			if create && errors.Is(err, fs.ErrNotExist) {
				return cur, comps[i:], nil
			}
			return "", nil, err
		}
		if st.Stat.Mode&fs.ModeSymlink != 0 {
			target := path.Clean(st.Stat.LinkTarget)
			if target != b.ws && !strings.HasPrefix(target, b.ws+"/") {
				return "", nil, sandbox.ErrEscape
			}
			next = target
		}
		cur = next
	}
	return cur, nil, nil
}

// ReadFile implements [driver.Sandbox]: the archive's stat, sent before
// its content, says what the file is and how large, so a FIFO, a device or
// a sparse 100 GB file is refused without reading it.
func (b *box) ReadFile(ctx context.Context, name string, max int64) ([]byte, error) {
	p, _, err := b.resolve(ctx, name, false)
	if err != nil {
		return nil, err
	}
	res, err := b.p.cli.CopyFromContainer(ctx, b.id, client.CopyFromContainerOptions{SourcePath: p})
	if err != nil {
		return nil, b.fault(ctx, err)
	}
	defer res.Content.Close()
	if !res.Stat.Mode.IsRegular() {
		return nil, fmt.Errorf("%w: %v", sandbox.ErrNotRegular, res.Stat.Mode.Type())
	}
	if res.Stat.Size > max {
		return nil, fmt.Errorf("%w: %d bytes, over %d", sandbox.ErrTooLarge, res.Stat.Size, max)
	}
	tr := tar.NewReader(res.Content)
	h, err := tr.Next()
	if err != nil {
		return nil, b.fault(ctx, err)
	}
	if h.Typeflag != tar.TypeReg {
		return nil, fmt.Errorf("%w: tar type %q", sandbox.ErrNotRegular, h.Typeflag)
	}
	if h.Size > max {
		return nil, fmt.Errorf("%w: %d bytes, over %d", sandbox.ErrTooLarge, h.Size, max)
	}
	data, err := io.ReadAll(io.LimitReader(tr, max+1))
	if err != nil {
		return nil, b.fault(ctx, err)
	}
	return data, nil
}

// WriteFile implements [driver.Sandbox].
func (b *box) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	dir, rest, err := b.resolve(ctx, name, true)
	if err != nil {
		return err
	}
	if len(rest) == 0 { // the file exists: write to its resolved path
		dir, rest = path.Dir(dir), []string{path.Base(dir)}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for i := range rest[:len(rest)-1] {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.Join(rest[:i+1], "/") + "/", Mode: 0o755, ModTime: now})
	}
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.Join(rest, "/"), Mode: int64(perm.Perm()), Size: int64(len(data)), ModTime: now})
	tw.Write(data)
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := b.p.cli.CopyToContainer(ctx, b.id, client.CopyToContainerOptions{DestinationPath: dir, Content: &buf}); err != nil {
		return b.fault(ctx, err)
	}
	return nil
}

// ReadDir implements [driver.Sandbox].
func (b *box) ReadDir(ctx context.Context, name string) ([]sandbox.FileInfo, error) {
	p, _, err := b.resolve(ctx, name, false)
	if err != nil {
		return nil, err
	}
	res, err := b.p.cli.CopyFromContainer(ctx, b.id, client.CopyFromContainerOptions{SourcePath: p + "/."})
	if err != nil {
		return nil, b.fault(ctx, err)
	}
	defer res.Content.Close()
	if !res.Stat.Mode.IsDir() {
		return nil, fmt.Errorf("docker: %s: not a directory", name)
	}
	var out []sandbox.FileInfo
	tr := tar.NewReader(res.Content)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, b.fault(ctx, err)
		}
		// Entries are "./x", "./x/y"…: keep the first level.
		rel := strings.Trim(strings.TrimPrefix(h.Name, "."), "/")
		if i := strings.IndexByte(rel, '/'); rel == "" || (i >= 0 && i < len(rel)) {
			continue
		}
		fi := h.FileInfo()
		out = append(out, sandbox.FileInfo{Name: rel, Size: h.Size, Mode: fi.Mode(), IsDir: fi.IsDir()})
	}
	return out, nil
}
