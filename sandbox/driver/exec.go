package driver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// Execer runs commands as [Sandbox].Exec does: a Sandbox, or whatever a
// driver runs Spec.Setup in while it provisions.
type Execer interface {
	Exec(ctx context.Context, cmd Cmd, stdout, stderr io.Writer) (Exit, error)
}

// errTimeout is the cause of the ctx that [Exec] derives from Cmd.Timeout,
// telling its deadline from the caller's.
var errTimeout = errors.New("command timeout")

// Exec runs cmd on x with cmd.Timeout enforced: x gets a ctx that is also
// done when the timeout expires, and so kills the command's tree then. An
// error x returns once that deadline has passed, ctx itself still live,
// is the timeout's: Exec returns Exit{Code: -1, TimedOut: true} and a nil
// error. Package sandbox runs every command through it; a driver that
// runs a command with a Timeout of its own accord uses it too.
func Exec(ctx context.Context, x Execer, cmd Cmd, stdout, stderr io.Writer) (Exit, error) {
	if cmd.Timeout <= 0 {
		return x.Exec(ctx, cmd, stdout, stderr)
	}
	runCtx, cancel := context.WithTimeoutCause(ctx, cmd.Timeout, errTimeout)
	defer cancel()
	exit, err := x.Exec(runCtx, cmd, stdout, stderr)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(runCtx), errTimeout) {
		return Exit{Code: -1, TimedOut: true}, nil
	}
	return exit, err
}

// setupTail is how much of a failed Setup command's stderr its error
// keeps: the end, where the reason usually is.
const setupTail = 4 << 10

// Setup runs a Spec's Setup commands in order on x (the environment a
// driver is provisioning, before any fork), each through [Exec], so that
// its Timeout holds. A command that exits non-zero or times out is an
// error wrapping [ErrUnavailable] that names it and ends with the last
// 4 KiB of its stderr; an error of x is returned wrapped, naming the
// command. Standard output is discarded.
func Setup(ctx context.Context, x Execer, cmds []Cmd) error {
	for _, c := range cmds {
		var stderr tail
		exit, err := Exec(ctx, x, c, io.Discard, &stderr)
		switch {
		case err != nil:
			return fmt.Errorf("setup %q: %w", c.Args, err)
		case exit.TimedOut:
			return fmt.Errorf("setup %q timed out after %v: %s: %w", c.Args, c.Timeout, stderr.trimmed(), ErrUnavailable)
		case exit.Code != 0:
			return fmt.Errorf("setup %q exited %d: %s: %w", c.Args, exit.Code, stderr.trimmed(), ErrUnavailable)
		}
	}
	return nil
}

// tail keeps the last setupTail bytes written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > setupTail {
		t.b = append(t.b[:0], t.b[len(t.b)-setupTail:]...)
	}
	return len(p), nil
}

func (t *tail) trimmed() string { return string(bytes.TrimSpace(t.b)) }
