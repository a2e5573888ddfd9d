package eval

// Workers, attempts and the watchdog: how one episode runs, is retried,
// times out or is abandoned.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sink"
)

// worker runs jobs until none is left. A worker that replaces an abandoned
// one starts by settling the abandoned job's outcome.
func (r *runner[T, O]) worker(abandonedJob *job) {
	w := &workerState[T]{}
	r.register(w)
	defer r.unregister(w)
	// Attempts' contexts keep the run context's values but not its
	// cancellation: the watchdog cancels them when the run is canceled.
	// Their parent is never done, so creating and canceling one touches no
	// shared state: thousands of workers do not contend on a lock.
	ctx := context.WithoutCancel(r.ctx)
	j := abandonedJob
	if j != nil {
		j = r.settle(j)
	}
	for {
		if j == nil {
			if j = r.claim(&w.job); j == nil {
				r.wg.Done()
				return
			}
		}
		if !r.attempt(ctx, w, j) {
			return // abandoned: a replacement owns j and this worker's place
		}
		j = r.settle(j)
	}
}

// workerState is a worker's attempt in flight, as the watchdog sees it.
// The worker writes the fields, then publishes them by setting phase to
// running; the watchdog reads them only after winning the phase from
// running to abandoned, after which the worker no longer touches them.
type workerState[T any] struct {
	job      job           // reused from episode to episode
	phase    atomic.Uint64 // attempt sequence << 2 | running, returned or abandoned
	deadline atomic.Int64  // Unix ns when the running attempt times out; 0 for none
	index    int           // in runner.workers

	cur    *job
	ep     *harness.Episode[T]
	start  time.Time
	cancel context.CancelCauseFunc
}

const (
	idle uint64 = iota // a new worker, before its first attempt
	running
	returned
	abandoned
)

// errTimeout is the cancellation cause of an attempt that timed out.
var errTimeout = errors.New("episode timed out")

// attemptCtx is an attempt's context: a plain cancel context that reports
// its deadline and DeadlineExceeded like a timer context, without a timer
// per attempt (the watchdog enforces deadlines).
type attemptCtx struct {
	context.Context
	deadline time.Time
}

func (c *attemptCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *attemptCtx) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == errTimeout {
		return context.DeadlineExceeded
	}
	return err
}

func (r *runner[T, O]) register(w *workerState[T]) {
	r.workersMu.Lock()
	w.index = len(r.workers)
	r.workers = append(r.workers, w)
	r.workersMu.Unlock()
}

func (r *runner[T, O]) unregister(w *workerState[T]) {
	r.workersMu.Lock()
	last := r.workers[len(r.workers)-1]
	r.workers[w.index], last.index = last, w.index
	r.workers = r.workers[:len(r.workers)-1]
	r.workersMu.Unlock()
}

// watchdog abandons the attempts that outlive their deadline, and all
// running attempts once the run is canceled: one goroutine scanning the
// workers, instead of a timer per attempt. Deadlines are enforced within
// a twentieth of the timeout (at least 1 ms, at most 250 ms).
func (r *runner[T, O]) watchdog(stop <-chan struct{}) {
	tick := 250 * time.Millisecond
	if r.cfg.Timeout > 0 {
		tick = min(max(r.cfg.Timeout/20, time.Millisecond), tick)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var expired []*workerState[T]
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-r.ctx.Done():
		}
		now, canceled := time.Now().UnixNano(), r.ctx.Err() != nil
		expired = expired[:0]
		r.workersMu.Lock()
		for _, w := range r.workers {
			if d := w.deadline.Load(); canceled || d != 0 && now >= d {
				expired = append(expired, w)
			}
		}
		r.workersMu.Unlock()
		for _, w := range expired {
			kind := sink.KindTimeout
			if canceled {
				kind = sink.KindCancelled
			}
			r.abandon(w, kind)
		}
		if canceled {
			t.Reset(tick) // keep sweeping: a worker may start one last attempt
		}
	}
}

// abandon gives up on the attempt w runs, if it is still running: the
// attempt is recorded as a timeout (or cancellation), its sandbox closed,
// and a new worker takes over its job and its place.
func (r *runner[T, O]) abandon(w *workerState[T], kind sink.ErrorKind) {
	p := w.phase.Load()
	if p&3 != running {
		return
	}
	// The watchdog saw an expired deadline, but that attempt may have
	// returned and the next one begun since: the worker stores a deadline
	// before it publishes the phase, so this reads the running attempt's.
	if d := w.deadline.Load(); kind == sink.KindTimeout && (d == 0 || time.Now().UnixNano() < d) {
		return
	}
	if !w.phase.CompareAndSwap(p, p&^3|abandoned) {
		return
	}
	j := w.cur
	msg := fmt.Sprintf("timed out after %v (abandoned: it did not return when its context expired)", r.cfg.Timeout)
	cause := errTimeout
	if kind == sink.KindCancelled {
		msg = fmt.Sprintf("run canceled: %v", context.Cause(r.ctx))
		cause = context.Canceled
	}
	w.cancel(cause)
	r.record(&j.rec, w.ep, w.start, sink.Error, kind, msg, &judge.Verdict{}, nil)
	j.events = w.ep.Events()
	j.freeSandbox() // may unblock the abandoned harness; the engine won't wait for it
	go r.worker(j)
}

// claim returns the next episode that has no final record yet.
func (r *runner[T, O]) claim(j *job) *job {
	epochs := int64(r.cfg.Epochs)
	for r.ctx.Err() == nil && !r.budgetHit.Load() {
		i := r.next.Add(1) - 1
		if i >= r.total {
			return nil
		}
		if r.isDone(i) {
			continue
		}
		s, ep := int(i/epochs), int(i%epochs)
		*j = job{sample: s, epoch: ep}
		return j
	}
	return nil
}

// settle decides what follows an attempt: a retry (returns j again, after
// backoff) or the end of the episode (records it and returns nil).
func (r *runner[T, O]) settle(j *job) *job {
	rec := &j.rec
	if rec.Status == sink.Error && rec.ErrorKind != sink.KindCancelled && j.attempt < r.cfg.Retries && r.ctx.Err() == nil {
		d := min(r.cfg.Backoff<<j.attempt, maxBackoff)
		t := time.NewTimer(rand.N(d) + 1)
		select {
		case <-t.C:
			j.attempt++
			return j
		case <-r.ctx.Done():
			t.Stop()
		}
	}
	if rec.ErrorKind == sink.KindCancelled || (rec.Status == sink.Error && r.ctx.Err() != nil) {
		// Not finished: the episode runs on resume. Records are rows of
		// finished episodes only.
		r.cancelled.Add(1)
	} else {
		if r.cfg.MaxCostUSD > 0 && rec.CostUSD > 0 {
			// Counted here, not by the consumer, so that scheduling stops
			// as soon as the budget is spent, whatever the backlog.
			spent := r.spentNanoUSD.Add(int64(rec.CostUSD * 1e9))
			if float64(spent)/1e9 >= r.cfg.MaxCostUSD {
				r.budgetHit.Store(true)
			}
		}
		r.out <- finished{sample: j.sample, rec: *rec, events: j.events}
	}
	if r.left != nil && r.left[j.sample].Add(-1) == 0 {
		r.closeEnv(j.sample)
	}
	return nil
}

// attempt runs one attempt of j and stores its outcome in j.rec. It returns
// false when the attempt was abandoned (its harness or judge ignored the
// expiry of its context): then another goroutine has taken over j.
func (r *runner[T, O]) attempt(parent context.Context, w *workerState[T], j *job) bool {
	s := &r.samples[j.sample]
	ep := &harness.Episode[T]{RunID: r.runID, Sample: *s, Epoch: j.epoch, Attempt: j.attempt,
		Seed: episodeSeed(r.cfg.Seed, s.ID, j.epoch)}
	if r.cfg.Sandbox != nil {
		opened := time.Now()
		sb, kind, err := r.openSandbox(j)
		if err != nil {
			r.record(&j.rec, ep, opened, sink.Error, kind, err.Error(), &judge.Verdict{}, nil)
			j.events = nil
			return true
		}
		ep.Sandbox = sb
	}
	start := time.Now()
	base, cancel := context.WithCancelCause(parent)
	ctx := context.Context(base)
	w.cur, w.ep, w.start, w.cancel = j, ep, start, cancel
	if r.cfg.Timeout > 0 {
		deadline := start.Add(r.cfg.Timeout)
		ctx = &attemptCtx{Context: base, deadline: deadline}
		w.deadline.Store(deadline.UnixNano())
	}
	phase := (w.phase.Load()>>2+1)<<2 | running
	w.phase.Store(phase)
	var res outcome[O]
	r.call(ctx, j, ep, &res)
	if !w.phase.CompareAndSwap(phase, phase&^3|returned) {
		return false // the watchdog abandoned it
	}
	w.deadline.Store(0)
	cancel(nil)
	j.freeSandbox()
	r.conclude(j, ep, start, &res)
	return true
}

// outcome is what the harness and the judge returned for an attempt.
type outcome[O any] struct {
	out   O
	v     judge.Verdict
	fault sink.ErrorKind
	err   error
}

// conclude records an attempt's outcome in j. It is kept out of attempt
// (and out of line) so that its temporaries are not on the stack of every
// worker while its harness waits: with thousands of workers, a smaller
// frame lets goroutines start with the smallest stack.
//
//go:noinline
func (r *runner[T, O]) conclude(j *job, ep *harness.Episode[T], start time.Time, res *outcome[O]) {
	v, err := &res.v, res.err
	switch {
	case err == nil:
		status := sink.Fail
		if v.Pass {
			status = sink.Pass
		}
		r.record(&j.rec, ep, start, status, "", "", v, res.out)
	case errors.Is(err, judge.ErrUnscored):
		var ue *judge.UnscoredError
		v.Reason = err.Error()
		if errors.As(err, &ue) {
			v.Reason = ue.Reason
		}
		var kind sink.ErrorKind
		if errors.Is(err, judge.ErrNotSampled) {
			kind = sink.KindNotSampled
		}
		r.record(&j.rec, ep, start, sink.Unscored, kind, "", v, res.out)
	default:
		var got any // an output is recorded only when the harness produced one
		if res.fault == sink.KindJudge {
			got = res.out
		}
		r.record(&j.rec, ep, start, sink.Error, res.fault, err.Error(), v, got)
	}
	j.events = ep.Events()
}

// call runs the harness and the judge for one attempt, inside the
// episode's sandbox, turning a panic into an error of kind panic.
func (r *runner[T, O]) call(ctx context.Context, j *job, ep *harness.Episode[T], res *outcome[O]) {
	stage := "harness"
	defer func() {
		if p := recover(); p != nil {
			res.fault, res.err = sink.KindPanic, panicError(stage, p)
		}
	}()
	var err error
	if res.out, err = r.e.Harness.Run(ctx, ep); err != nil {
		res.fault, res.err = r.classify(ctx, err, sink.KindHarness), err
		return
	}
	stage = "judge"
	v := &res.v
	if *v, err = r.e.Judge.Judge(ctx, ep, res.out); err != nil {
		res.fault, res.err = r.classify(ctx, err, sink.KindJudge), err
		return
	}
	if v.Pass && v.Score == 0 {
		v.Score = 1 // a judge that only says pass
	}
	if !(v.Score >= 0 && v.Score <= 1) {
		res.fault, res.err = sink.KindJudge, fmt.Errorf("judge returned score %v, want a number in [0,1]", v.Score)
	}
}

// panicError turns a recovered panic into an error carrying the stack.
func panicError(stage string, p any) error {
	return fmt.Errorf("%s panicked: %v\n%s", stage, p, debug.Stack())
}

func (r *runner[T, O]) classify(ctx context.Context, err error, def sink.ErrorKind) sink.ErrorKind {
	if ctx.Err() != nil {
		if r.ctx.Err() != nil {
			return sink.KindCancelled
		}
		return sink.KindTimeout
	}
	if errors.Is(err, sandbox.ErrUnavailable) {
		return sink.KindSandbox
	}
	return def
}
