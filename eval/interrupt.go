package eval

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// InterruptContext returns a context that the first interrupt (SIGINT,
// Ctrl-C, or SIGTERM) cancels: a Run given it stops gracefully — episodes
// in flight end as cancelled and run again on resume, and every sink
// flushes. A second interrupt is no longer caught and ends the process at
// once; the log stays resumable (a torn tail is cut on resume). Call stop
// to release the signal handler early.
func InterruptContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, stop = signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // restores the default action: the next interrupt is fatal
	}()
	return ctx, stop
}
