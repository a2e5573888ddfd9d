package sandboxtest

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/driver"
)

// Fake is an in-memory sandbox driver for unit tests: files live in maps,
// nothing touches the host after Provision reads Spec.Template, and
// commands are Go code. [Fake.Provider] wraps it in the portable type.
//
// Exec runs Fake.Exec when set; otherwise a few builtins: echo, cat (its
// files or stdin), true, false, env (sorted), sleep (seconds; honours
// Timeout and ctx) and "./probe yes [N]" / "./probe yes-err N" (endless or
// N bytes of output, as the suite's probe). Anything else exits 127. There
// is no shell and no binary runs: run the conformance suite with
// Options.Without [Shell] and [Binaries].
//
// Symlinks in Spec.Template that point inside it are copied as the files
// they point to; those pointing out of it make any path through them fail
// with [sandbox.ErrEscape], as a real driver must.
//
// The zero Fake is ready to use; its methods may be called concurrently.
type Fake struct {
	// Exec, when set, runs every command (Setup included) instead of the
	// builtins. sb is the sandbox the command runs in, for its files. ctx
	// is done when Cmd.Timeout expires (package sandbox derives it); if
	// Exec returns after that, the Result is marked TimedOut.
	Exec func(ctx context.Context, sb Files, cmd sandbox.Cmd) (sandbox.Result, error)
	// MaxOpen is the capacity of [Fake.Provider].
	MaxOpen int
}

// Files is the file API of the sandbox a [Fake] command runs in; relative
// names start at the command's directory.
type Files interface {
	ReadFile(ctx context.Context, name string) ([]byte, error)
	WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error
	ReadDir(ctx context.Context, name string) ([]sandbox.FileInfo, error)
}

// Provider returns the portable provider over f, with capacity MaxOpen.
func (f *Fake) Provider() *sandbox.Provider {
	return sandbox.NewProvider(f, &sandbox.ProviderOptions{Capacity: f.MaxOpen})
}

type fakeEntry struct {
	data   []byte // never mutated: writes replace the entry, so forks share it
	mode   fs.FileMode
	escape bool // a symlink leading out of the template
}

// Provision implements [driver.Provider].
func (f *Fake) Provision(ctx context.Context, spec sandbox.Spec) (driver.Environment, error) {
	base := &fakeSandbox{fake: f, spec: spec, files: map[string]fakeEntry{".": {mode: fs.ModeDir | 0o755}}}
	if spec.Template != "" {
		if err := base.load(spec.Template); err != nil {
			return nil, fmt.Errorf("sandboxtest: provision: %w", err)
		}
	}
	for name, data := range spec.Files {
		if err := base.WriteFile(ctx, name, data, 0o644); err != nil {
			return nil, fmt.Errorf("sandboxtest: provision: %w", err)
		}
	}
	if err := driver.Setup(ctx, base, spec.Setup); err != nil {
		return nil, fmt.Errorf("sandboxtest: provision: %w", err)
	}
	return &fakeEnv{base: base}, nil
}

func (s *fakeSandbox) load(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			s.files[name] = fakeEntry{mode: fs.ModeDir | info.Mode().Perm()}
		case d.Type()&fs.ModeSymlink != 0:
			target, err := filepath.EvalSymlinks(p)
			root, rerr := filepath.EvalSymlinks(dir)
			if err != nil || rerr != nil {
				return nil // dangling: left out
			}
			if r, err := filepath.Rel(root, target); err != nil || !filepath.IsLocal(r) {
				s.files[name] = fakeEntry{escape: true}
				return nil
			}
			data, err := os.ReadFile(target)
			if err != nil {
				return nil // a link to a directory inside: left out, for simplicity
			}
			s.files[name] = fakeEntry{data: data, mode: 0o644}
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s.files[name] = fakeEntry{data: data, mode: info.Mode().Perm()}
		}
		return nil
	})
}

type fakeEnv struct {
	base   *fakeSandbox
	mu     sync.Mutex
	closed bool
}

func (e *fakeEnv) Fork(ctx context.Context) (driver.Sandbox, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("sandboxtest: fork: %w", sandbox.ErrClosed)
	}
	e.base.mu.Lock()
	defer e.base.mu.Unlock()
	files := make(map[string]fakeEntry, len(e.base.files))
	for k, v := range e.base.files {
		files[k] = v
	}
	return &fakeSandbox{fake: e.base.fake, spec: e.base.spec, files: files}, nil
}

func (e *fakeEnv) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	return nil
}

type fakeSandbox struct {
	fake *Fake
	spec sandbox.Spec

	mu     sync.Mutex
	closed bool
	files  map[string]fakeEntry // cleaned slash paths; "." is the root
	cancel []context.CancelFunc // running commands, stopped by Close
}

// clean resolves name to a key of files, or fails with ErrEscape.
func clean(name string) (string, error) {
	if name == "" {
		return ".", nil
	}
	if path.IsAbs(name) {
		return "", sandbox.ErrEscape
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", sandbox.ErrEscape
	}
	return c, nil
}

// lookup checks that no prefix of name is an escaping link or a file.
// It is called with s.mu held.
func (s *fakeSandbox) check(name string) error {
	if s.closed {
		return sandbox.ErrClosed
	}
	for p := name; p != "."; p = path.Dir(p) {
		if e, ok := s.files[p]; ok && e.escape {
			return sandbox.ErrEscape
		}
	}
	return nil
}

func (s *fakeSandbox) op(ctx context.Context, op, name string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("sandboxtest: %s %s: %w", op, name, err)
	}
	n, err := clean(name)
	if err == nil {
		err = s.check(n)
	}
	if err != nil {
		return "", fmt.Errorf("sandboxtest: %s %s: %w", op, name, err)
	}
	return n, nil
}

func (s *fakeSandbox) ReadFile(ctx context.Context, name string, max int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.op(ctx, "read", name)
	if err != nil {
		return nil, err
	}
	e, ok := s.files[n]
	if !ok {
		return nil, &fs.PathError{Op: "sandboxtest: read", Path: name, Err: fs.ErrNotExist}
	}
	if e.mode.IsDir() {
		return nil, sandbox.ErrNotRegular
	}
	if int64(len(e.data)) > max {
		return nil, sandbox.ErrTooLarge
	}
	return slices.Clone(e.data), nil
}

func (s *fakeSandbox) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.op(ctx, "write", name)
	if err != nil {
		return err
	}
	if n == "." {
		return fmt.Errorf("sandboxtest: write %s: is a directory", name)
	}
	return s.write(n, data, perm)
}

// write stores a file and its missing parents; s.mu is held.
func (s *fakeSandbox) write(n string, data []byte, perm fs.FileMode) error {
	if e, ok := s.files[n]; ok && e.mode.IsDir() {
		return fmt.Errorf("sandboxtest: write %s: is a directory", n)
	}
	for d := path.Dir(n); d != "."; d = path.Dir(d) {
		if e, ok := s.files[d]; ok {
			if !e.mode.IsDir() {
				return fmt.Errorf("sandboxtest: write %s: %s is not a directory", n, d)
			}
			break
		}
		s.files[d] = fakeEntry{mode: fs.ModeDir | 0o755}
	}
	s.files[n] = fakeEntry{data: slices.Clone(data), mode: perm.Perm()}
	return nil
}

func (s *fakeSandbox) ReadDir(ctx context.Context, name string) ([]sandbox.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.op(ctx, "readdir", name)
	if err != nil {
		return nil, err
	}
	if e, ok := s.files[n]; !ok || !e.mode.IsDir() {
		if !ok {
			return nil, &fs.PathError{Op: "sandboxtest: readdir", Path: name, Err: fs.ErrNotExist}
		}
		return nil, fmt.Errorf("sandboxtest: readdir %s: not a directory", name)
	}
	var out []sandbox.FileInfo
	for p, e := range s.files {
		if p == "." || path.Dir(p) != n || e.escape {
			continue
		}
		out = append(out, sandbox.FileInfo{Name: path.Base(p), Size: int64(len(e.data)), Mode: e.mode, IsDir: e.mode.IsDir()})
	}
	return out, nil
}

func (s *fakeSandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		for _, c := range s.cancel {
			c()
		}
	}
	return nil
}

func (s *fakeSandbox) Exec(ctx context.Context, cmd sandbox.Cmd, stdout, stderr io.Writer) (driver.Exit, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return driver.Exit{}, sandbox.ErrClosed
	}
	dir, err := s.op(ctx, "exec: dir", cmd.Dir)
	if err == nil {
		if e, ok := s.files[dir]; !ok || !e.mode.IsDir() {
			err = &fs.PathError{Op: "sandboxtest: exec: dir", Path: cmd.Dir, Err: fs.ErrNotExist}
		}
	}
	// Close cancels this context, stopping the command.
	closeCtx, stop := context.WithCancel(context.Background())
	s.cancel = append(s.cancel, stop)
	s.mu.Unlock()
	defer stop()
	if err != nil {
		return driver.Exit{}, err
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(closeCtx, cancel)()
	var res sandbox.Result
	if s.fake.Exec != nil {
		res, err = s.fake.Exec(runCtx, &fakeCmd{s, dir}, cmd)
		stdout.Write(res.Stdout)
		stderr.Write(res.Stderr)
	} else {
		res, err = s.builtin(runCtx, dir, cmd, stdout, stderr)
	}
	exit := driver.Exit{Code: res.ExitCode, TimedOut: res.TimedOut}
	if ctx.Err() != nil {
		// Also Cmd.Timeout's: ctx is driver.Exec's.
		return exit, ctx.Err()
	}
	return exit, err
}

// fakeCmd is the sandbox seen by a command: relative paths start at its
// working directory.
type fakeCmd struct {
	*fakeSandbox
	dir string
}

func (c *fakeCmd) path(name string) string {
	if path.IsAbs(name) {
		return name
	}
	return path.Join(c.dir, name)
}

func (c *fakeCmd) ReadFile(ctx context.Context, name string) ([]byte, error) {
	return c.fakeSandbox.ReadFile(ctx, c.path(name), 1<<63-1)
}

func (c *fakeCmd) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	return c.fakeSandbox.WriteFile(ctx, c.path(name), data, perm)
}

func (c *fakeCmd) ReadDir(ctx context.Context, name string) ([]sandbox.FileInfo, error) {
	return c.fakeSandbox.ReadDir(ctx, c.path(name))
}

func (s *fakeSandbox) builtin(ctx context.Context, dir string, cmd sandbox.Cmd, stdout, stderr io.Writer) (sandbox.Result, error) {
	var res sandbox.Result
	defer func() {
		stdout.Write(res.Stdout)
		stderr.Write(res.Stderr)
	}()
	args := cmd.Args[1:]
	switch cmd.Args[0] {
	case "./probe":
		if len(args) == 0 || (args[0] != "yes" && args[0] != "yes-err") {
			res.ExitCode = 127
			res.Stderr = []byte("probe: only yes and yes-err in the fake\n")
			break
		}
		w := stdout
		if args[0] == "yes-err" {
			w = stderr
		}
		n := int64(-1)
		if len(args) > 1 {
			v, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil {
				res.ExitCode = 2
				break
			}
			n = v
		}
		buf := []byte(strings.Repeat("y\n", 32<<10))
		for n != 0 {
			if ctx.Err() != nil {
				res.ExitCode = -1
				break
			}
			b := buf
			if n > 0 && int64(len(b)) > n {
				b = b[:n]
			}
			w.Write(b)
			if n > 0 {
				n -= int64(len(b))
			}
		}
	case "true":
	case "false":
		res.ExitCode = 1
	case "echo":
		res.Stdout = []byte(strings.Join(args, " ") + "\n")
	case "cat":
		if len(args) == 0 {
			res.Stdout = slices.Clone(cmd.Stdin)
		}
		fc := &fakeCmd{s, dir}
		for _, a := range args {
			b, err := fc.ReadFile(ctx, a)
			if err != nil {
				res.Stderr = fmt.Appendf(res.Stderr, "cat: %s: %v\n", a, err)
				res.ExitCode = 1
				continue
			}
			res.Stdout = append(res.Stdout, b...)
		}
	case "env":
		env := map[string]string{}
		for k, v := range s.spec.Env {
			env[k] = v
		}
		for k, v := range cmd.Env {
			env[k] = v
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range env {
				if !yield(k) {
					return
				}
			}
		}) {
			res.Stdout = fmt.Appendf(res.Stdout, "%s=%s\n", k, env[k])
		}
	case "sleep":
		secs, err := strconv.ParseFloat(strings.Join(args, ""), 64)
		if err != nil {
			return sandbox.Result{ExitCode: 1, Stderr: []byte("sleep: bad duration\n")}, nil
		}
		select {
		case <-time.After(time.Duration(secs * float64(time.Second))):
		case <-ctx.Done():
			res.ExitCode = -1
		}
	default:
		res.ExitCode = 127
		res.Stderr = []byte(cmd.Args[0] + ": not found\n")
	}
	return res, nil
}
