// Package sandbox defines where an episode's agent acts: an isolated world
// with a filesystem and a way to run commands in it.
//
// A [Provider] provisions an [Environment] once per sample (the repository at
// its commit, installed dependencies…) and each episode of that sample gets a
// cheap, isolated [Sandbox] forked from it. Episodes of one sample run in
// parallel without seeing each other's writes, and no write ever reaches the
// environment they were forked from.
//
// Drivers live in subpackages (sandbox/local, sandbox/docker); the
// conformance suite every driver runs, and an in-memory fake for users' unit
// tests, live in sandbox/sandboxtest.
package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"time"
)

// Spec describes the environment one sample needs. The zero Spec is an empty
// workspace with no network.
type Spec struct {
	// Image names the base image (Docker). Drivers that have no images
	// ignore it.
	Image string
	// Template is a directory on the host whose tree is the initial
	// workspace. The local driver forks it copy-on-write; the Docker driver
	// copies it into the container's WorkDir.
	Template string
	// Files are written into the workspace (paths relative to WorkDir)
	// after Template and before Setup.
	Files map[string][]byte
	// Setup runs once per environment, when it is provisioned, before any
	// fork: installing dependencies, checking out a commit.
	Setup []Cmd
	// WorkDir is the workspace root inside the sandbox; relative paths in
	// Cmd.Dir, ReadFile and WriteFile are relative to it. Drivers choose a
	// default when empty.
	WorkDir string
	// Env is added to every command's environment.
	Env map[string]string
	// Network allows network access. Off by default.
	Network bool
	// Limits bounds the resources of each sandbox, where the driver can.
	Limits Limits
}

// Limits bounds what one sandbox may use. Zero means the driver's default
// (no limit unless documented). Each driver documents which limits it
// enforces; a driver must not claim a limit it does not enforce.
type Limits struct {
	CPUs        float64 // cores
	MemoryBytes int64
	Pids        int64 // processes and threads
}

// Cmd is one command to run in a sandbox.
type Cmd struct {
	Args    []string          // argv; Args[0] is looked up in PATH
	Dir     string            // working directory, relative to the workspace root; "" is the root
	Env     map[string]string // added to Spec.Env for this command
	Stdin   []byte
	Timeout time.Duration // kills the command's whole process tree; 0 means only ctx bounds it
}

// Result is what a finished command left. A command that ran and exited
// non-zero is a Result with ExitCode != 0 and a nil error: the command
// failed, the sandbox did not.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int // -1 when killed by a signal or timeout
	TimedOut bool
	Duration time.Duration
}

// FileInfo describes one entry of a directory listing.
type FileInfo struct {
	Name  string // base name
	Size  int64
	Mode  fs.FileMode
	IsDir bool
}

// Sandbox is one episode's isolated world.
//
// Paths are slash-separated and relative to the workspace root; a path that
// escapes it (through ".." or a symlink) is an error wrapping [ErrEscape].
// A missing file is an error satisfying errors.Is(err, fs.ErrNotExist).
// An error wrapping [ErrUnavailable] means the sandbox itself failed (died,
// was removed, the engine is unreachable): an infrastructure fault, not the
// agent's.
//
// Methods may be called concurrently. Close releases everything the sandbox
// holds; it is idempotent, and calls after it return [ErrClosed].
type Sandbox interface {
	// Exec runs cmd and waits for it. When cmd.Timeout expires the
	// command's whole process tree is killed and Exec returns a Result
	// with TimedOut set and a nil error. When ctx is done first, the tree
	// is killed too and Exec returns an error wrapping ctx.Err().
	Exec(ctx context.Context, cmd Cmd) (Result, error)
	// ReadFile returns the content of the named file.
	ReadFile(ctx context.Context, name string) ([]byte, error)
	// WriteFile writes data to the named file, creating it (and missing
	// parent directories) or truncating it.
	WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error
	// ReadDir lists the named directory ("" or "." is the workspace
	// root), sorted by name.
	ReadDir(ctx context.Context, name string) ([]FileInfo, error)
	Close() error
}

// Environment is a sample's provisioned world, from which episodes fork.
// Fork may be called concurrently; every fork is isolated from the others
// and from the environment. Close releases the environment; forks still
// open stay usable until they are closed.
type Environment interface {
	Fork(ctx context.Context) (Sandbox, error)
	Close() error
}

// Provider is a sandbox driver.
type Provider interface {
	// Provision builds the environment spec describes, running its Setup.
	// A Setup command that exits non-zero is an error wrapping
	// [ErrUnavailable].
	Provision(ctx context.Context, spec Spec) (Environment, error)
	// Capacity is how many sandboxes the provider can keep open at once;
	// 0 means no limit. The engine bounds open sandboxes by it, apart from
	// its bound on episodes.
	Capacity() int
}

// Guarantees is what a provider enforces on this host, for callers (and
// the conformance suite) that must know rather than assume. A provider
// reports them through the optional [GuaranteeReporter] interface; one that
// does not implement it guarantees none of them.
type Guarantees struct {
	// Network: with Spec.Network false, a sandbox cannot reach the host's
	// network or beyond.
	Network bool
	// CPUs, Memory and Pids: the corresponding field of [Limits] is
	// enforced on every sandbox when set.
	CPUs, Memory, Pids bool
}

// GuaranteeReporter is an optional interface of a [Provider].
type GuaranteeReporter interface {
	Guarantees() Guarantees
}

var (
	// ErrUnavailable marks an infrastructure fault of the sandbox itself.
	ErrUnavailable = errors.New("sandbox: unavailable")
	// ErrClosed is returned by calls on a closed sandbox or environment.
	ErrClosed = errors.New("sandbox: closed")
	// ErrEscape is returned for a path that leaves the workspace.
	ErrEscape = errors.New("sandbox: path escapes the workspace")
)

// Open provisions spec and forks one sandbox from it, for callers that need
// a single fresh sandbox. Closing the sandbox also releases the environment.
func Open(ctx context.Context, p Provider, spec Spec) (Sandbox, error) {
	env, err := p.Provision(ctx, spec)
	if err != nil {
		return nil, err
	}
	sb, err := env.Fork(ctx)
	if err != nil {
		env.Close()
		return nil, err
	}
	return &owning{Sandbox: sb, env: env}, nil
}

type owning struct {
	Sandbox
	env Environment
}

func (o *owning) Close() error {
	return errors.Join(o.Sandbox.Close(), o.env.Close())
}
