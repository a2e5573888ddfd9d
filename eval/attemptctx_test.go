package eval

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

type ctxKey struct{}

// An attempt's context behaves as context.WithCancelCause's whenever it
// is first looked at: before its cancellation or after, with its cause,
// values and deadline, and a context derived from it is canceled with it
// without a goroutine of its own.
func TestAttemptContextIsACancelContext(t *testing.T) {
	base := context.WithValue(context.Background(), ctxKey{}, "v")
	over := errors.New("over the cap")
	for _, lookFirst := range []bool{true, false} {
		c := &attemptCtx{base: base}
		if lookFirst {
			select {
			case <-c.Done():
				t.Fatal("done before it was canceled")
			default:
			}
		}
		if _, ok := c.Deadline(); ok {
			t.Error("a deadline without one")
		}
		var child context.Context
		var stopChild context.CancelFunc
		goroutines := runtime.NumGoroutine()
		if lookFirst {
			child, stopChild = context.WithCancel(c)
			defer stopChild()
			if n := runtime.NumGoroutine(); n != goroutines {
				t.Errorf("deriving a context started %d goroutines", n-goroutines)
			}
		}
		c.cancel(over)
		c.cancel(errTimeout) // the first cause stays
		<-c.Done()
		if err := c.Err(); err != context.Canceled {
			t.Errorf("look first %v: Err %v", lookFirst, err)
		}
		if got := context.Cause(c); got != over {
			t.Errorf("look first %v: Cause %v, want %v", lookFirst, got, over)
		}
		if lookFirst {
			<-child.Done()
			if got := context.Cause(child); got != over {
				t.Errorf("the derived context's cause %v", got)
			}
		}
		if c.Value(ctxKey{}) != "v" {
			t.Error("the run's values are lost")
		}
	}
}

// A timed-out attempt reports its deadline and DeadlineExceeded, and
// errTimeout as its cause; canceled with nil, its cause is Canceled.
func TestAttemptContextTimeout(t *testing.T) {
	d := time.Now().Add(time.Hour)
	c := &attemptCtx{base: context.Background(), deadline: d}
	if got, ok := c.Deadline(); !ok || !got.Equal(d) {
		t.Errorf("Deadline %v %v", got, ok)
	}
	c.cancel(errTimeout)
	if err := c.Err(); err != context.DeadlineExceeded {
		t.Errorf("Err %v", err)
	}
	if context.Cause(c) != errTimeout {
		t.Errorf("Cause %v", context.Cause(c))
	}
	n := &attemptCtx{base: context.Background()}
	n.cancel(nil)
	if context.Cause(n) != context.Canceled || n.Err() != context.Canceled {
		t.Errorf("canceled with nil: %v %v", context.Cause(n), n.Err())
	}
}

// Looked at and canceled at once from many goroutines (run with -race),
// every caller sees one Done channel, closed.
func TestAttemptContextConcurrent(t *testing.T) {
	for range 100 {
		c := &attemptCtx{base: context.Background()}
		var wg sync.WaitGroup
		chans := make([]<-chan struct{}, 8)
		for i := range chans {
			wg.Go(func() { chans[i] = c.Done() })
		}
		wg.Go(func() { c.cancel(errTimeout) })
		wg.Wait()
		for _, ch := range chans {
			if ch != chans[0] {
				t.Fatal("two Done channels")
			}
			<-ch
		}
	}
}
