package eval

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errTimeout is the cancellation cause of an attempt that timed out.
var errTimeout = errors.New("episode timed out")

// attemptCtx is an attempt's context. Its cancel context is made only
// when something asks for it (Done, Err, Value: a harness that selects on
// it, derives from it, reads a value or context.Cause), so an attempt
// whose harness never looks costs no context and no cancel function (the
// engine's last two allocations an episode). A cancellation before then
// is kept and applied as it is made, so every caller sees one context:
// the same Done channel, cause and values as context.WithCancelCause's.
// It reports its deadline and DeadlineExceeded like a timer context,
// without a timer per attempt (the watchdog enforces deadlines).
type attemptCtx struct {
	base     context.Context // the worker's: its values, never done
	deadline time.Time       // zero without Config.Timeout

	inner atomic.Value // the context.Context made from base, once asked for
	mu    sync.Mutex   // makes inner once, orders it with cancel
	stop  context.CancelCauseFunc
	cause error // the cancellation's, once canceled (context.Canceled for nil)
}

func (c *attemptCtx) Deadline() (time.Time, bool) {
	if c.deadline.IsZero() {
		return c.base.Deadline()
	}
	return c.deadline, true
}

func (c *attemptCtx) Done() <-chan struct{} { return c.context().Done() }

func (c *attemptCtx) Err() error {
	inner := c.context()
	err := inner.Err()
	if err != nil && context.Cause(inner) == errTimeout {
		return context.DeadlineExceeded
	}
	return err
}

func (c *attemptCtx) Value(key any) any { return c.context().Value(key) }

// context returns the cancel context, made on the first call.
func (c *attemptCtx) context() context.Context {
	if inner, ok := c.inner.Load().(context.Context); ok {
		return inner
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if inner, ok := c.inner.Load().(context.Context); ok {
		return inner
	}
	inner, stop := context.WithCancelCause(c.base)
	if c.cause != nil {
		stop(c.cause)
	}
	c.stop = stop
	c.inner.Store(inner)
	return inner
}

// cancel cancels the attempt with cause (context.Canceled for nil), as
// a context.CancelCauseFunc: the first cause stays.
func (c *attemptCtx) cancel(cause error) {
	if cause == nil {
		cause = context.Canceled
	}
	c.mu.Lock()
	if c.cause == nil {
		c.cause = cause
	}
	stop := c.stop
	c.mu.Unlock()
	if stop != nil {
		stop(cause)
	}
}
