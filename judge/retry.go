package judge

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/proctor-evals/proctor/internal/permanent"
)

// Defaults of [RetryOptions].
const (
	DefaultMaxAttempts   = 4
	DefaultBackoff       = 500 * time.Millisecond
	DefaultMaxBackoff    = 30 * time.Second
	DefaultMaxRetryAfter = 2 * time.Minute
	DefaultTimeout       = 2 * time.Minute
)

// RetryOptions configures [Retry]. The zero value (and nil) means the
// defaults.
type RetryOptions struct {
	// MaxAttempts bounds the tries per call, the first included; 0: 4.
	MaxAttempts int
	// Backoff is the base of the exponential backoff; 0: 500ms.
	Backoff time.Duration
	// MaxBackoff caps one backoff; 0: 30s.
	MaxBackoff time.Duration
	// MaxRetryAfter caps how long a Retry-After hint is honoured; a longer
	// hint ends the retries with the error; 0: 2 minutes.
	MaxRetryAfter time.Duration
	// Timeout bounds each attempt; an attempt that hits it is retried.
	// 0: 2 minutes; negative: no bound but ctx.
	Timeout time.Duration

	sleep func(ctx context.Context, d time.Duration) error // tests
}

// Retry returns a Model that calls m again after a transient fault, with
// exponential backoff and full jitter (a uniform wait in (0, min(Backoff·2ⁱ,
// MaxBackoff)]), at most MaxAttempts times in all.
//
// An error is transient unless one of these holds, in which case it is
// returned at once:
//   - it is permanent: errors.As finds in it a value with a method
//     Permanent() bool that returns true ([*APIError] for a 4xx status
//     other than 408, 409 and 429; any error wrapped by [Permanent]);
//   - it is unscored (errors.Is(err, [ErrUnscored])): the model answered
//     and asking again would pay for the same unusable answer;
//   - ctx is done.
//
// So 429, 5xx, connection faults and an attempt's timeout are retried. A
// Retry-After hint carried by an [*APIError] replaces the backoff; a hint
// over MaxRetryAfter, or a wait that would outlast ctx's deadline, ends the
// retries with the last error rather than sleeping in vain. The error after
// the last attempt is the last error, which errors.As still finds.
//
// Put [Limit] inside Retry, Retry(Limit(m, n), nil), so that a call waiting
// out its backoff does not hold one of the n slots.
func Retry(m Model, opts *RetryOptions) Model {
	var o RetryOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.sleep == nil {
		o.sleep = sleep
	}
	return &retry{m: m, o: o}
}

type retry struct {
	m Model
	o RetryOptions
}

func (r *retry) Complete(ctx context.Context, req Request) (Response, error) {
	var last error
	for i := range r.o.MaxAttempts {
		if i > 0 {
			wait := r.backoff(i)
			var ae *APIError
			if errors.As(last, &ae) && ae.RetryAfter > 0 {
				if ae.RetryAfter > r.o.MaxRetryAfter {
					return Response{}, last
				}
				wait = ae.RetryAfter
			}
			if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
				return Response{}, last
			}
			if err := r.o.sleep(ctx, wait); err != nil {
				return Response{}, fmt.Errorf("judge: retry: %w (last error: %w)", err, last)
			}
		}
		resp, err := r.attempt(ctx, req)
		if err == nil {
			return resp, nil
		}
		last = err
		if ctx.Err() != nil || permanent.Is(err) || errors.Is(err, ErrUnscored) {
			break
		}
	}
	return Response{}, last
}

func (r *retry) attempt(ctx context.Context, req Request) (Response, error) {
	if r.o.Timeout < 0 {
		return r.m.Complete(ctx, req)
	}
	actx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	resp, err := r.m.Complete(actx, req)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		// The attempt's own deadline, not the caller's: transient.
		err = fmt.Errorf("judge: attempt timed out after %v: %w", r.o.Timeout, err)
	}
	return resp, err
}

// backoff is the full-jitter exponential backoff before retry i (1-based).
func (r *retry) backoff(i int) time.Duration {
	d := r.o.Backoff << (i - 1)
	if d <= 0 || d > r.o.MaxBackoff {
		d = r.o.MaxBackoff
	}
	return time.Duration(rand.Int64N(int64(d)) + 1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Permanent wraps err to say that trying again cannot succeed (a bad
// request, a missing key): [Retry] and the eval engine give up at once.
// The result has a method Permanent() bool returning true, which is the
// whole contract: any error type may implement it instead, as [*APIError]
// does. Permanent(nil) is nil.
func Permanent(err error) error { return permanent.Wrap(err) }

// Limit returns a Model that lets at most n calls of m run at once; a call
// waits for a slot while ctx allows. Share the returned Model between the
// judges that should share the limit. Limit panics if n < 1.
func Limit(m Model, n int) Model {
	if n < 1 {
		panic(fmt.Sprintf("judge: Limit(%d): the limit must be at least 1", n))
	}
	return &limit{m: m, sem: make(chan struct{}, n)}
}

type limit struct {
	m   Model
	sem chan struct{}
}

func (l *limit) Complete(ctx context.Context, req Request) (Response, error) {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return Response{}, fmt.Errorf("judge: waiting for a model slot: %w", ctx.Err())
	}
	defer func() { <-l.sem }()
	return l.m.Complete(ctx, req)
}
