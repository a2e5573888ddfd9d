// Package driver defines the interfaces a sandbox driver implements, for
// package sandbox to wrap, as database/sql/driver is to database/sql.
//
// Users never call a driver directly: they use the portable types of
// package sandbox, which validate paths and commands, keep the closed
// state, check contexts, cap output and reads, count forks and wrap errors
// once. A driver does only its own I/O, and may rely on what the portable
// type guarantees before calling it:
//
//   - Names are clean, slash-separated and relative: [fs.ValidPath] holds
//     ("." is the workspace root); "..", "", absolute names, NUL bytes and
//     invalid UTF-8 never reach a driver. A symlink leading out of the workspace is the
//     driver's to refuse, with an error wrapping [ErrEscape].
//   - A Cmd has at least one argument, a valid Dir and no NUL bytes.
//   - Cmd.Timeout is enforced through ctx: the portable type runs every
//     command through the function [Exec], which gives the driver a ctx
//     that is done when the timeout expires. A driver's Exec never reads
//     Cmd.Timeout; its Provision runs Spec.Setup through [Setup], which
//     does the same.
//   - No method of a Sandbox is called after its Close has returned (one
//     may run concurrently with Close, which must then stop it), and
//     Close is called once.
//   - An Environment's Close is called once, after Close of every
//     Sandbox forked from it: what the environment holds (a base
//     directory, an image) need not outlive it.
//   - Spec.Limits has its defaults filled in.
//
// Timeouts are enforced once, by [Exec], and a driver only has to kill a
// command's tree when its ctx is done. Setup commands run inside the
// driver's Provision, on a workspace that is not yet an environment (the
// Docker driver commits its container to an image only after them), so
// the portable type cannot run them itself without a second, two-phase
// provisioning interface; instead every driver hands them to [Setup],
// which runs them through [Exec] and words their failures alike. A driver
// written to an older contract that still times commands out itself
// stays correct: whichever of its timer and ctx ends first, the result
// is the same.
//
// The data types (Spec, Cmd, Limits, FileInfo, Guarantees) and sentinel
// errors live here, not in package sandbox, so that the driver interfaces
// can name them without an import cycle; package sandbox re-exports them
// under the same names.
package driver

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"time"
)

// Provider provisions environments. Its methods may be called
// concurrently.
type Provider interface {
	// Provision builds the environment spec describes: the workspace from
	// Spec.Template, then Spec.Files, then Spec.Setup run there through
	// [Setup], so that each command's Timeout holds and a command that
	// exits non-zero or times out is an error wrapping [ErrUnavailable].
	Provision(ctx context.Context, spec Spec) (Environment, error)
}

// Environment is a provisioned world from which sandboxes fork. Fork may
// be called concurrently; every fork is isolated from the others and from
// the environment.
type Environment interface {
	Fork(ctx context.Context) (Sandbox, error)
	Close() error
}

// Sandbox is one fork. Its methods may be called concurrently.
type Sandbox interface {
	// Exec runs cmd, copying its standard output and error to stdout and
	// stderr as they come (the writers never fail and never block for
	// long: the portable type caps them), and waits for it. A command
	// that exits non-zero is an Exit with that code and a nil error. When
	// ctx is done before the command ends, its whole process tree is
	// killed and Exec returns an error wrapping ctx.Err(). Exec ignores
	// cmd.Timeout: [Exec] turns it into ctx's deadline. A driver that
	// claims [Guarantees].OOM returns an error wrapping [ErrOOM] (with the
	// Exit it saw) when the out-of-memory killer ended a process of the
	// sandbox while the command ran.
	Exec(ctx context.Context, cmd Cmd, stdout, stderr io.Writer) (Exit, error)
	// ReadFile returns the content of the named regular file. A file
	// larger than max bytes is an error wrapping [ErrTooLarge], found
	// without reading it; a FIFO, device, socket or directory is an error
	// wrapping [ErrNotRegular], found without opening it for reading (a
	// FIFO would block).
	ReadFile(ctx context.Context, name string, max int64) ([]byte, error)
	// WriteFile writes data to the named file, creating it (and missing
	// parent directories) or truncating it.
	WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error
	// ReadDir lists the named directory, in any order.
	ReadDir(ctx context.Context, name string) ([]FileInfo, error)
	// Close stops whatever runs and releases the sandbox.
	Close() error
}

// GuaranteeReporter is an optional interface of a [Provider]: what it
// enforces on this host. A provider that does not implement it guarantees
// nothing.
type GuaranteeReporter interface {
	Guarantees() Guarantees
}

// ImageDigester is an optional interface of an [Environment]: the digest
// of the image its Spec.Image named when it was provisioned (a registry
// digest, "name@sha256:…", when the image has one, else the image's ID),
// so that a run records what its environments ran on, not a tag that may
// move.
type ImageDigester interface {
	ImageDigest() string
}

// GatewayServer is an optional interface of a [Provider]: it serves an
// HTTP handler (a model gateway, package gateway) to its sandboxes. What
// the handler must listen on is the driver's to decide (a host loopback
// port, a port inside each sandbox's own network namespace, the worker
// pod's address), so the driver listens and serves h itself, on every
// sandbox it forks from then on, whatever Spec.Network says; url is where
// a command in any of them reaches it. stop stops serving. A provider
// that also claims [Guarantees].Gateway keeps, with Spec.Network false,
// the handler the only address a sandbox reaches.
type GatewayServer interface {
	ServeGateway(h http.Handler) (url string, stop func() error, err error)
}

// Spec describes the environment one sample needs. The zero Spec is an
// empty workspace with no network.
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

// Default caps of [Limits] that the portable type applies when a field is
// zero.
const (
	DefaultOutputBytes = 16 << 20 // per stream of one command
	DefaultReadBytes   = 64 << 20 // per ReadFile
)

// Limits bounds what one sandbox may use. Zero means the default: no limit
// for the resources a driver enforces (CPUs, MemoryBytes, Pids, DiskBytes;
// each driver says which it enforces, through [Guarantees]), and the
// documented caps for what comes back into the caller's process
// (OutputBytes, ReadBytes), which the portable type always enforces.
type Limits struct {
	CPUs        float64 // cores
	MemoryBytes int64
	Pids        int64 // processes and threads
	// DiskBytes bounds what a sandbox may write to its workspace.
	DiskBytes int64
	// OutputBytes caps each of a command's stdout and stderr as kept in
	// its Result (default [DefaultOutputBytes]); the rest is discarded and
	// the Result marked Truncated. Negative means no cap.
	OutputBytes int64
	// ReadBytes caps the size of a file ReadFile returns (default
	// [DefaultReadBytes]); a larger file is an error wrapping
	// [ErrTooLarge]. Negative means no cap.
	ReadBytes int64
}

// Cmd is one command to run in a sandbox.
type Cmd struct {
	Args    []string          // argv; Args[0] is looked up in PATH
	Dir     string            // working directory, relative to the workspace root; "" is the root
	Env     map[string]string // added to Spec.Env for this command
	Stdin   []byte
	Timeout time.Duration // kills the command's whole process tree; 0 means only ctx bounds it
}

// Exit is how a command ended.
type Exit struct {
	Code     int  // -1 when killed by a signal or timeout
	TimedOut bool // set by [Exec]; a driver need not
}

// FileInfo describes one entry of a directory listing.
type FileInfo struct {
	Name  string // base name
	Size  int64
	Mode  fs.FileMode
	IsDir bool
}

// Guarantees is what a provider enforces on this host, for callers (and
// the conformance suite) that must know rather than assume.
type Guarantees struct {
	// Network: with Spec.Network false, a sandbox can reach nothing
	// outside itself: no address of the host or beyond, and no host Unix
	// socket (such as the Docker daemon's).
	Network bool
	// IPNetwork: with Spec.Network false, a sandbox cannot reach the
	// host's IP addresses or beyond (implied by Network). Unix sockets on
	// the host's filesystem may still be reachable.
	IPNetwork bool
	// Gateway: with Spec.Network false, a sandbox reaches the handler the
	// provider serves ([GatewayServer]) and nothing else: no other
	// address of the host or beyond, no host Unix socket.
	Gateway bool
	// CPUs, Memory, Pids and Disk: the corresponding field of [Limits] is
	// enforced on every sandbox when set.
	CPUs, Memory, Pids, Disk bool
	// OOM: a command during which the out-of-memory killer ended a
	// process of the sandbox is reported as [ErrOOM], never as a plain
	// exit code.
	OOM bool
}

var (
	// ErrUnavailable marks an infrastructure fault of the sandbox itself.
	ErrUnavailable = errors.New("sandbox: unavailable")
	// ErrClosed is returned by calls on a closed sandbox or environment.
	ErrClosed = errors.New("sandbox: closed")
	// ErrEscape is returned for a path that leaves the workspace.
	ErrEscape = errors.New("sandbox: path escapes the workspace")
	// ErrTooLarge is returned by ReadFile for a file over its cap.
	ErrTooLarge = errors.New("sandbox: file too large")
	// ErrNotRegular is returned by ReadFile for what is not a regular
	// file (a directory, FIFO, device or socket).
	ErrNotRegular = errors.New("sandbox: not a regular file")
	// ErrOOM is returned by Exec for a command during which the kernel's
	// out-of-memory killer ended a process of the sandbox: the sandbox
	// reached its memory limit (or the host ran out). It is an
	// infrastructure fault, not the agent's, and wraps [ErrUnavailable].
	ErrOOM error = oomError{}
)

type oomError struct{}

func (oomError) Error() string { return "sandbox: killed by the out-of-memory killer" }
func (oomError) Unwrap() error { return ErrUnavailable }
