// Package sandbox defines where an episode's agent acts: an isolated world
// with a filesystem and a way to run commands in it.
//
// A [Provider] provisions an [Environment] once per sample (the repository
// at its commit, installed dependencies…) and each episode of that sample
// gets a cheap, isolated [Sandbox] forked from it. Episodes of one sample
// run in parallel without seeing each other's writes, and no write ever
// reaches the environment they were forked from. A [Pool] does that
// bookkeeping for many samples at once: one environment per key, a fork per
// episode, a bound on open sandboxes, each environment released after its
// last use.
//
// Provider, Environment and Sandbox are concrete types over a small driver
// interface (package sandbox/driver), as database/sql is over its drivers:
// what every driver would otherwise repeat, or forget, is done here once.
//
//   - Paths are slash-separated and relative to the workspace root ("" or
//     "." is the root), cleaned lexically as io/fs paths are: "a/../b" is
//     "b". One that leaves the workspace ("..", "../x", "/etc") is an
//     error wrapping [ErrEscape]; so is one a driver finds leaving through
//     a symlink. A name with a NUL byte or that is not UTF-8 is an error
//     wrapping [fs.ErrInvalid]. Any other name is legal: "..name",
//     spaces, any UTF-8.
//   - Calls after Close return [ErrClosed]; a done ctx is checked before
//     any work.
//   - Commands are validated (an argument, no NUL bytes, a valid Dir, a
//     non-negative Timeout) before they reach the driver, and their
//     Timeout is enforced here, through the ctx the driver gets
//     ([driver.Exec]); a driver's Provision runs Setup the same way
//     ([driver.Setup]).
//   - What comes back into the caller's process is bounded: each output
//     stream of a command is capped at Limits.OutputBytes (default 16 MiB;
//     the Result is then marked Truncated), and ReadFile refuses a file
//     over Limits.ReadBytes (default 64 MiB) with [ErrTooLarge] and
//     anything but a regular file (a FIFO, a device) with
//     [ErrNotRegular], without reading it.
//   - An environment's resources outlive its Close until its last fork is
//     closed.
//   - Every error is wrapped once, in a [*PathError]; a driver that panics
//     yields an error wrapping [ErrUnavailable], not a crash.
//
// Errors: a missing file satisfies errors.Is(err, fs.ErrNotExist); an
// error wrapping [ErrUnavailable] means the sandbox itself failed (died,
// was removed, the engine is unreachable): an infrastructure fault, not the
// agent's.
//
// Drivers live in subpackages (sandbox/local, sandbox/docker); the
// conformance suite every driver runs, and an in-memory fake for users' unit
// tests, live in sandbox/sandboxtest.
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/internal/semconv"
	"github.com/proctor-evals/proctor/sandbox/driver"
)

// The plain data types live in package driver, so that driver interfaces
// can name them without an import cycle; these are the same types.
type (
	// Spec describes the environment one sample needs; see [driver.Spec].
	Spec = driver.Spec
	// Limits bounds what one sandbox may use; see [driver.Limits].
	Limits = driver.Limits
	// Cmd is one command to run in a sandbox; see [driver.Cmd].
	Cmd = driver.Cmd
	// FileInfo describes one entry of a directory listing.
	FileInfo = driver.FileInfo
	// Guarantees is what a provider enforces on this host; see
	// [driver.Guarantees].
	Guarantees = driver.Guarantees
)

// Default caps; see [Limits].
const (
	DefaultOutputBytes = driver.DefaultOutputBytes
	DefaultReadBytes   = driver.DefaultReadBytes
)

var (
	// ErrUnavailable marks an infrastructure fault of the sandbox itself.
	ErrUnavailable = driver.ErrUnavailable
	// ErrClosed is returned by calls on a closed sandbox or environment.
	ErrClosed = driver.ErrClosed
	// ErrEscape is returned for a path that leaves the workspace.
	ErrEscape = driver.ErrEscape
	// ErrTooLarge is returned by ReadFile for a file over Limits.ReadBytes.
	ErrTooLarge = driver.ErrTooLarge
	// ErrNotRegular is returned by ReadFile for a directory, FIFO, device
	// or socket.
	ErrNotRegular = driver.ErrNotRegular
	// ErrOOM is returned by Exec when the out-of-memory killer ended a
	// process of the sandbox while the command ran; it wraps
	// [ErrUnavailable]. See [Sandbox.OOMKilled].
	ErrOOM = driver.ErrOOM
)

// Result is what a finished command left. A command that ran and exited
// non-zero is a Result with ExitCode != 0 and a nil error: the command
// failed, the sandbox did not.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int // -1 when killed by a signal or timeout
	TimedOut bool
	Duration time.Duration
	// Truncated: Stdout or Stderr reached Limits.OutputBytes and the rest
	// of it was discarded.
	Truncated bool
}

// PathError records an error and the operation and path (the command's
// name, for Exec; empty for Provision and Fork) that caused it.
type PathError struct {
	Op   string
	Path string
	Err  error
}

func (e *PathError) Error() string {
	if e.Path == "" {
		return "sandbox: " + e.Op + ": " + e.Err.Error()
	}
	return "sandbox: " + e.Op + " " + e.Path + ": " + e.Err.Error()
}

func (e *PathError) Unwrap() error { return e.Err }

// call runs f, turning a panic of the driver into an error.
func call(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("driver panicked: %v: %w\n%s", p, ErrUnavailable, debug.Stack())
		}
	}()
	return f()
}

// ProviderOptions configures a [Provider]. The zero value is valid.
type ProviderOptions struct {
	// Capacity is how many sandboxes the provider can keep open at once; 0
	// means no limit. A [Pool] bounds open sandboxes by it.
	Capacity int
}

// Provider provisions environments through a driver. Its methods may be
// called concurrently.
type Provider struct {
	d        driver.Provider
	capacity int
}

// NewProvider returns a provider over d. Drivers offer a constructor that
// calls it (local.New, docker.New); opts may be nil.
func NewProvider(d driver.Provider, opts *ProviderOptions) *Provider {
	p := &Provider{d: d}
	if opts != nil {
		p.capacity = opts.Capacity
	}
	return p
}

// Driver returns the driver, for its own methods (type-assert it).
func (p *Provider) Driver() driver.Provider { return p.d }

// Capacity is how many sandboxes the provider can keep open at once; 0
// means no limit.
func (p *Provider) Capacity() int { return p.capacity }

// Guarantees reports what the driver enforces on this host; a driver that
// does not say guarantees nothing.
func (p *Provider) Guarantees() Guarantees {
	if r, ok := p.d.(driver.GuaranteeReporter); ok {
		var g Guarantees
		if call(func() error { g = r.Guarantees(); return nil }) == nil {
			if g.Network {
				g.IPNetwork = true
			}
			return g
		}
	}
	return Guarantees{}
}

// ServeGateway serves h (a model gateway, package gateway) to the
// sandboxes the provider forks from then on, through the driver's
// [driver.GatewayServer]: url is where their commands reach it; stop
// stops serving. A driver that cannot serve one is an error wrapping
// [errors.ErrUnsupported]. Where it sees [Guarantees].Gateway, a sandbox
// whose Spec.Network is false reaches h and nothing else.
func (p *Provider) ServeGateway(h http.Handler) (url string, stop func() error, err error) {
	gs, ok := p.d.(driver.GatewayServer)
	if !ok {
		return "", nil, fmt.Errorf("sandbox: the %T driver cannot serve a model gateway: %w", p.d, errors.ErrUnsupported)
	}
	var stopDriver func() error
	if err := call(func() (err error) { url, stopDriver, err = gs.ServeGateway(h); return err }); err != nil {
		return "", nil, &PathError{Op: "serve gateway", Err: err}
	}
	return url, func() error { return call(stopDriver) }, nil
}

// Provision builds the environment spec describes, running its Setup. A
// Setup command that exits non-zero is an error wrapping [ErrUnavailable].
func (p *Provider) Provision(ctx context.Context, spec Spec) (*Environment, error) {
	if err := ctx.Err(); err != nil {
		return nil, &PathError{Op: "provision", Err: err}
	}
	spec, err := checkSpec(spec)
	if err != nil {
		return nil, &PathError{Op: "provision", Err: err}
	}
	var span trace.Span
	if t := tracerFrom(ctx); t != nil {
		ctx, span = t.Start(ctx, "sandbox.provision")
	}
	var env driver.Environment
	if err := call(func() (err error) { env, err = p.d.Provision(ctx, spec); return err }); err != nil {
		endSpan(span, err)
		return nil, &PathError{Op: "provision", Err: err}
	}
	endSpan(span, nil)
	e := &Environment{d: env, limits: spec.Limits, image: spec.Image}
	if d, ok := env.(driver.ImageDigester); ok {
		call(func() error { e.digest = d.ImageDigest(); return nil })
	}
	return e, nil
}

// checkSpec validates spec and returns it with its paths cleaned and its
// limits' defaults filled in.
func checkSpec(spec Spec) (Spec, error) {
	if spec.Files != nil {
		files := make(map[string][]byte, len(spec.Files))
		for name, data := range spec.Files {
			n, err := clean(name)
			if err == nil && n == "." {
				err = fs.ErrInvalid
			}
			if err != nil {
				//lint:ignore ST1005 the message starts with the field it is about
				return spec, fmt.Errorf("Files[%q]: %w", name, err)
			}
			files[n] = data
		}
		spec.Files = files
	}
	if spec.Setup != nil {
		spec.Setup = slices.Clone(spec.Setup)
		for i := range spec.Setup {
			if err := checkCmd(&spec.Setup[i]); err != nil {
				//lint:ignore ST1005 the message starts with the field it is about
				return spec, fmt.Errorf("Setup[%d]: %w", i, err)
			}
		}
	}
	for k, v := range spec.Env {
		if err := checkEnv(k, v); err != nil {
			return spec, err
		}
	}
	l := &spec.Limits
	if l.CPUs < 0 || l.MemoryBytes < 0 || l.Pids < 0 || l.DiskBytes < 0 {
		return spec, errors.New("negative Limits")
	}
	if l.OutputBytes == 0 {
		l.OutputBytes = DefaultOutputBytes
	}
	if l.ReadBytes == 0 {
		l.ReadBytes = DefaultReadBytes
	}
	return spec, nil
}

// clean validates a sandbox path and returns it in the form drivers get:
// fs.ValidPath holds, "." is the root.
func clean(name string) (string, error) {
	if name == "" {
		return ".", nil
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%w: NUL in name", fs.ErrInvalid)
	}
	// As io/fs: a name that is not UTF-8 would not survive every driver
	// (Docker's API carries paths in JSON and tar headers).
	if !utf8.ValidString(name) {
		return "", fmt.Errorf("%w: name is not UTF-8", fs.ErrInvalid)
	}
	if name[0] == '/' {
		return "", ErrEscape
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", ErrEscape
	}
	return c, nil
}

func checkEnv(k, v string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%w: environment variable %q", fs.ErrInvalid, k)
	}
	return nil
}

// checkCmd validates c and cleans its Dir.
func checkCmd(c *Cmd) error {
	if len(c.Args) == 0 {
		return fmt.Errorf("%w: empty command", fs.ErrInvalid)
	}
	for _, a := range c.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: NUL in argument", fs.ErrInvalid)
		}
	}
	for k, v := range c.Env {
		if err := checkEnv(k, v); err != nil {
			return err
		}
	}
	if c.Timeout < 0 {
		return fmt.Errorf("%w: negative Timeout", fs.ErrInvalid)
	}
	d, err := clean(c.Dir)
	if err != nil {
		//lint:ignore ST1005 the message starts with the field it is about
		return fmt.Errorf("Dir %q: %w", c.Dir, err)
	}
	c.Dir = d
	return nil
}

// Environment is a sample's provisioned world, from which episodes fork.
// Fork may be called concurrently. Close releases the environment; forks
// still open stay usable until they are closed, and what the environment
// holds is released after the last of them.
type Environment struct {
	d             driver.Environment
	limits        Limits
	image, digest string

	mu       sync.Mutex
	open     int // forks not yet closed
	closed   bool
	released bool
}

// Fork returns a new sandbox, isolated from the environment and from every
// other fork.
func (e *Environment) Fork(ctx context.Context) (*Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, &PathError{Op: "fork", Err: err}
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, &PathError{Op: "fork", Err: ErrClosed}
	}
	e.open++
	e.mu.Unlock()
	var span trace.Span
	if t := tracerFrom(ctx); t != nil {
		ctx, span = t.Start(ctx, "sandbox.fork")
	}
	var d driver.Sandbox
	if err := call(func() (err error) { d, err = e.d.Fork(ctx); return err }); err != nil {
		endSpan(span, err)
		e.release()
		return nil, &PathError{Op: "fork", Err: err}
	}
	endSpan(span, nil)
	return &Sandbox{d: d, limits: e.limits, image: e.image, digest: e.digest, done: e.release}, nil
}

// release counts a fork closed (or failed) and releases the driver's
// environment once it is closed and unused.
func (e *Environment) release() error {
	e.mu.Lock()
	e.open--
	last := e.closed && e.open == 0 && !e.released
	e.released = e.released || last
	e.mu.Unlock()
	if last {
		return e.closeDriver()
	}
	return nil
}

func (e *Environment) closeDriver() error {
	if err := call(e.d.Close); err != nil {
		return &PathError{Op: "close", Err: err}
	}
	return nil
}

// Close closes the environment: no fork may be made after it. It is
// idempotent.
func (e *Environment) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	last := e.open == 0
	e.released = last
	e.mu.Unlock()
	if last {
		return e.closeDriver()
	}
	return nil
}

// Open provisions spec and forks one sandbox from it, for callers that need
// a single fresh sandbox. Closing the sandbox also releases the environment.
func Open(ctx context.Context, p *Provider, spec Spec) (*Sandbox, error) {
	env, err := p.Provision(ctx, spec)
	if err != nil {
		return nil, err
	}
	sb, err := env.Fork(ctx)
	if err != nil {
		env.Close()
		return nil, err
	}
	sb.after = env.Close
	return sb, nil
}

// Sandbox is one episode's isolated world. Its methods may be called
// concurrently. Close releases everything the sandbox holds and stops what
// runs in it; it is idempotent, may be called from another goroutine while
// a call is in flight, and calls after it return [ErrClosed].
type Sandbox struct {
	d             driver.Sandbox
	limits        Limits
	image, digest string
	done          func() error // the environment's fork count
	after         func() error // Open's environment, a Pool's slot

	mu     sync.Mutex
	closed bool
	env    map[string]string // SetEnv's
	oom    error             // the first command the OOM killer ended
}

// OOMKilled returns the error of the first command of s during which the
// out-of-memory killer ended a process (wrapping [ErrOOM], naming the
// memory limit), or nil. It outlives the harness's handling of that
// error: the engine reads it after every attempt, so that an episode
// whose sandbox ran out of memory ends as an infrastructure error,
// whatever its harness or judge made of the command's failure.
func (s *Sandbox) OOMKilled() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.oom
}

// SetEnv sets variables that every command run in s from then on gets,
// over Spec.Env and its own Cmd.Env; nil clears them. The engine gives an
// episode's sandbox its model gateway's variables this way (the base URLs
// and the episode's token), so that every command of the episode, the
// agent's or a judge's, reaches the gateway and none carries another key
// under those names.
func (s *Sandbox) SetEnv(env map[string]string) {
	s.mu.Lock()
	s.env = env
	s.mu.Unlock()
}

func (s *Sandbox) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// begin checks what every call checks before reaching the driver.
func (s *Sandbox) begin(ctx context.Context, op, name string) error {
	if s.isClosed() {
		return &PathError{Op: op, Path: name, Err: ErrClosed}
	}
	if err := ctx.Err(); err != nil {
		return &PathError{Op: op, Path: name, Err: err}
	}
	return nil
}

// fail wraps a driver's error once; an error of a call that Close
// interrupted also wraps ErrClosed.
func (s *Sandbox) fail(op, name string, err error) error {
	if s.isClosed() && !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return &PathError{Op: op, Path: name, Err: err}
}

// Exec runs cmd and waits for it. When cmd.Timeout expires the command's
// whole process tree is killed and Exec returns a Result with TimedOut set
// and a nil error. When ctx is done first, the tree is killed too and Exec
// returns an error wrapping ctx.Err(). Each output stream keeps at most
// Limits.OutputBytes (see [Result.Truncated]).
//
// When ctx carries an OpenTelemetry span context, the command gets it in
// TRACEPARENT and TRACESTATE (unless cmd.Env sets TRACEPARENT), so that an
// instrumented agent joins the caller's trace; under a recording span,
// Exec is a span of its own ("sandbox.exec"), as Provision and Fork are.
func (s *Sandbox) Exec(ctx context.Context, cmd Cmd) (Result, error) {
	name := ""
	if len(cmd.Args) > 0 {
		name = cmd.Args[0]
	}
	if err := s.begin(ctx, "exec", name); err != nil {
		return Result{}, err
	}
	s.mu.Lock()
	if s.env != nil {
		env := make(map[string]string, len(cmd.Env)+len(s.env))
		maps.Copy(env, cmd.Env)
		maps.Copy(env, s.env)
		cmd.Env = env
	}
	s.mu.Unlock()
	if err := checkCmd(&cmd); err != nil {
		return Result{}, &PathError{Op: "exec", Path: name, Err: err}
	}
	var span trace.Span
	if t := tracerFrom(ctx); t != nil {
		ctx, span = t.Start(ctx, "sandbox.exec", trace.WithAttributes(semconv.ProcessCommand.String(name)))
	}
	cmd.Env = withTraceContext(ctx, cmd.Env)
	stdout, stderr := &capped{max: s.limits.OutputBytes}, &capped{max: s.limits.OutputBytes}
	start := time.Now()
	var exit driver.Exit
	err := call(func() (err error) { exit, err = driver.Exec(ctx, s.d, cmd, stdout, stderr); return err })
	res := Result{ExitCode: exit.Code, TimedOut: exit.TimedOut, Duration: time.Since(start)}
	res.Stdout, res.Stderr = stdout.bytes(), stderr.bytes()
	res.Truncated = stdout.truncated || stderr.truncated
	if span != nil && err == nil {
		span.SetAttributes(semconv.ProcessExitCode.Int(res.ExitCode), semconv.TimedOut.Bool(res.TimedOut))
	}
	endSpan(span, err)
	if err != nil {
		if errors.Is(err, ErrOOM) {
			err = s.oomKilled(name, err)
		}
		return res, s.fail("exec", name, err)
	}
	return res, nil
}

// oomKilled names the memory limit in a driver's ErrOOM and remembers the
// first such error for OOMKilled.
func (s *Sandbox) oomKilled(name string, err error) error {
	if m := s.limits.MemoryBytes; m > 0 {
		err = fmt.Errorf("%w (memory limit %d MiB)", err, m>>20)
	}
	s.mu.Lock()
	if s.oom == nil {
		s.oom = &PathError{Op: "exec", Path: name, Err: err}
	}
	s.mu.Unlock()
	return err
}

// capped keeps the first max bytes written to it (all of them when max is
// negative) and discards the rest; it never fails, so that a driver keeps
// draining the command.
type capped struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int64
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := p
	if c.max >= 0 {
		room := c.max - int64(c.buf.Len())
		if int64(len(keep)) > room {
			keep = keep[:max(room, 0)]
			c.truncated = true
		}
	}
	c.buf.Write(keep)
	return len(p), nil
}

func (c *capped) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf.Len() == 0 {
		return nil
	}
	return c.buf.Bytes()
}

// ReadFile returns the content of the named regular file, refusing one
// larger than Limits.ReadBytes with [ErrTooLarge].
func (s *Sandbox) ReadFile(ctx context.Context, name string) ([]byte, error) {
	if err := s.begin(ctx, "read", name); err != nil {
		return nil, err
	}
	n, err := clean(name)
	if err != nil {
		return nil, &PathError{Op: "read", Path: name, Err: err}
	}
	limit := s.limits.ReadBytes
	if limit < 0 {
		limit = 1<<63 - 1
	}
	var data []byte
	if err := call(func() (err error) { data, err = s.d.ReadFile(ctx, n, limit); return err }); err != nil {
		return nil, s.fail("read", name, err)
	}
	if int64(len(data)) > limit {
		return nil, &PathError{Op: "read", Path: name, Err: ErrTooLarge}
	}
	return data, nil
}

// WriteFile writes data to the named file, creating it (and missing parent
// directories) or truncating it.
func (s *Sandbox) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	if err := s.begin(ctx, "write", name); err != nil {
		return err
	}
	n, err := clean(name)
	if err == nil && n == "." {
		err = fmt.Errorf("%w: the workspace root is a directory", fs.ErrInvalid)
	}
	if err != nil {
		return &PathError{Op: "write", Path: name, Err: err}
	}
	if err := call(func() error { return s.d.WriteFile(ctx, n, data, perm.Perm()) }); err != nil {
		return s.fail("write", name, err)
	}
	return nil
}

// ReadDir lists the named directory ("" or "." is the workspace root),
// sorted by name.
func (s *Sandbox) ReadDir(ctx context.Context, name string) ([]FileInfo, error) {
	if err := s.begin(ctx, "readdir", name); err != nil {
		return nil, err
	}
	n, err := clean(name)
	if err != nil {
		return nil, &PathError{Op: "readdir", Path: name, Err: err}
	}
	var list []FileInfo
	if err := call(func() (err error) { list, err = s.d.ReadDir(ctx, n); return err }); err != nil {
		return nil, s.fail("readdir", name, err)
	}
	slices.SortFunc(list, func(a, b FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

// Close stops whatever runs in the sandbox and releases it. It is
// idempotent: a second call returns nil.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	var errs []error
	if err := call(s.d.Close); err != nil {
		errs = append(errs, &PathError{Op: "close", Err: err})
	}
	errs = append(errs, s.done())
	if s.after != nil {
		errs = append(errs, s.after())
	}
	return errors.Join(errs...)
}
