package eval

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// runner is one execution of Run. Workers (at most Concurrency, plus the
// replacements of abandoned ones) claim episodes from an atomic counter, so
// no goroutine or channel entry exists per pending episode; finished
// episodes go through one channel to a single consumer that writes the
// traces, the log and the sinks, and folds the report.
type runner[T, O any] struct {
	e       *Eval[T, O]
	cfg     Config
	ctx     context.Context
	cancel  context.CancelCauseFunc
	runID   string
	start   time.Time
	samples []dataset.Sample[T]
	index   map[string]int // sample ID → position in samples

	// Episodes the log already holds, by index sample*Epochs + epoch: a
	// bitset, so that resuming a million-record log needs no map of keys.
	done      []uint64
	doneCount int64

	next  atomic.Int64 // the next episode index to claim: sample*Epochs + epoch
	total int64
	wg    sync.WaitGroup

	// Sandboxes: one environment per sample, closed after its last episode.
	envs      []envSlot
	left      []atomic.Int32 // episodes of each sample not yet settled
	sandboxes chan struct{}  // capacity tokens; nil when unbounded

	workersMu sync.Mutex
	workers   []*workerState[T]

	out          chan finished
	log          *jsonl.Writer
	traces       *jsonl.Writer
	logSize      int64 // committed bytes of the log when the run started
	sinks        []sink.Sink
	sinkErr      error
	agg          *aggregator
	warnings     []string
	resumed      int
	parentRunID  string // set when rejudging
	budgetHit    atomic.Bool
	spentNanoUSD atomic.Int64 // cost of the episodes this run finished
	cancelled    atomic.Int64
}

type envSlot struct {
	mu  sync.Mutex
	env sandbox.Environment
}

// job is one episode on its way through its attempts.
type job struct {
	sample, epoch, attempt int
	rec                    sink.Record // the outcome of the latest attempt
	events                 []harness.Event

	mu      sync.Mutex
	sb      sandbox.Sandbox // the open sandbox of the attempt in flight
	release func()          // gives back its capacity slot
}

// freeSandbox closes the attempt's sandbox and gives back its capacity
// slot, once: when the attempt returns or when it is abandoned, whichever
// comes first, so that a hung harness holds no slot.
func (j *job) freeSandbox() {
	j.mu.Lock()
	sb, release := j.sb, j.release
	j.sb, j.release = nil, nil
	j.mu.Unlock()
	if sb != nil {
		sb.Close()
	}
	if release != nil {
		release()
	}
}

type finished struct {
	sample int // index in runner.samples
	rec    sink.Record
	events []harness.Event
}

// newRunner prepares a run of samples, which index maps by ID to their
// positions (as checkSamples returns them).
func newRunner[T, O any](ctx context.Context, e *Eval[T, O], cfg Config, samples []dataset.Sample[T], index map[string]int) (*runner[T, O], error) {
	r := &runner[T, O]{e: e, cfg: cfg, samples: samples, index: index, start: time.Now(),
		total: int64(len(samples)) * int64(cfg.Epochs), agg: newAggregator(cfg.Report)}
	// The report indexes samples as the engine does, so that folding a
	// record in needs no lookup by ID.
	r.agg.index = index
	r.agg.samples = make([]sampleStats, len(samples))
	r.agg.meta = func(i int) (string, map[string]string) { return samples[i].ID, samples[i].Tags }
	r.runID = cfg.RunID
	if cfg.Log != "" {
		if err := r.openLog(); err != nil {
			return nil, err
		}
	}
	if r.runID == "" {
		r.runID = newRunID()
	}
	if r.logSize == 0 {
		// Only resuming needs to find samples by ID; a million-sample run
		// need not keep the map.
		r.index, r.agg.index = nil, nil
	}
	r.sinks = cfg.Sinks
	if p := cfg.Sandbox; p != nil {
		r.envs = make([]envSlot, len(samples))
		r.left = make([]atomic.Int32, len(samples))
		for i := range samples {
			for ep := range cfg.Epochs {
				if !r.isDone(int64(i)*int64(cfg.Epochs) + int64(ep)) {
					r.left[i].Add(1)
				}
			}
		}
		if n := p.Capacity(); n > 0 {
			r.sandboxes = make(chan struct{}, n)
		}
	}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	return r, nil
}

// openLog recovers the log and adopts (or checks) the run it holds.
func (r *runner[T, O]) openLog() error {
	foreign := 0 // records of samples or epochs this run does not have
	w, rec, err := jsonl.Open(r.cfg.Log, &jsonl.OpenOptions{DropErrors: true, Visit: func(id []byte, epoch int) {
		if i, ok := r.index[string(id)]; ok && epoch < r.cfg.Epochs {
			r.markDone(int64(i)*int64(r.cfg.Epochs) + int64(epoch))
		} else {
			foreign++
		}
	}})
	if err != nil {
		return fmt.Errorf("eval: opening the log: %w", err)
	}
	if rec.RunID != "" {
		if r.runID != "" && r.runID != rec.RunID {
			w.Close(context.Background())
			return &ConfigError{fmt.Sprintf("the log %s holds run %q, not %q: resume with its run ID or use a new log", r.cfg.Log, rec.RunID, r.runID)}
		}
		r.runID = rec.RunID
	}
	if rec.Torn != nil {
		msg := fmt.Sprintf("%v: cut off; those episodes run again", rec.Torn)
		r.warnings = append(r.warnings, msg)
		r.cfg.Logger.Warn("proctor: torn log tail cut", "log", r.cfg.Log, "line", rec.Torn.Line, "bytes", rec.Torn.Bytes)
	}
	if rec.Dropped > 0 {
		r.cfg.Logger.Info("proctor: retrying errored episodes from the log", "log", r.cfg.Log, "episodes", rec.Dropped)
	}
	if foreign > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("the log holds %d records of samples or epochs this run does not have: they stay in the log and the report", foreign))
	}
	r.log = w
	r.logSize = w.Size()
	traces, err := jsonl.Append(tracePath(r.cfg.Log), nil)
	if err != nil {
		w.Close(context.Background())
		return fmt.Errorf("eval: opening the trace store: %w", err)
	}
	r.traces = traces
	w.FlushFirst(traces)
	return nil
}

// tracePath is where the transcripts of the run logged at log go: one
// append-only file beside the log, not one file per episode.
func tracePath(log string) string {
	return strings.TrimSuffix(log, filepath.Ext(log)) + ".traces.jsonl"
}

func newRunID() string {
	var b [4]byte
	crand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

func (r *runner[T, O]) run() (*Report, error) {
	r.out = make(chan finished, 1024)
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		r.consume()
	}()

	pending := r.total - r.doneCount
	workers := min(int64(r.cfg.Concurrency), max(pending, 0))
	r.wg.Add(int(workers))
	for range workers {
		go r.worker(nil)
	}
	stopWatchdog := make(chan struct{})
	go r.watchdog(stopWatchdog)
	r.wg.Wait()
	close(stopWatchdog)
	close(r.out)
	<-consumed

	// Cleanup runs even when the run was canceled, with a context that is
	// not, so that every sink flushes what it was given.
	cleanup := context.WithoutCancel(r.ctx)
	for i := range r.envs {
		if env := r.envs[i].env; env != nil {
			env.Close()
		}
	}
	errs := []error{r.sinkErr}
	if r.log != nil {
		errs = append(errs, r.log.Close(cleanup), r.traces.Close(cleanup))
	}
	for _, s := range r.sinks {
		errs = append(errs, s.Close(cleanup))
	}
	rep := r.agg.report()
	rep.Eval, rep.RunID = r.e.Name, r.runID
	rep.StartedAt, rep.Wall = r.start, time.Since(r.start)
	rep.Cancelled = int(r.cancelled.Load())
	rep.Resumed = r.resumed
	rep.BudgetExhausted = r.budgetHit.Load()
	rep.Warnings = append(r.warnings, rep.Warnings...)
	if err := errors.Join(errs...); err != nil {
		return rep, fmt.Errorf("eval: %w", err)
	}
	if cause := context.Cause(r.ctx); cause != nil && r.ctx.Err() != nil {
		return rep, cause
	}
	r.cancel(nil)
	return rep, nil
}

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

func (r *runner[T, O]) markDone(i int64) {
	if r.done == nil {
		r.done = make([]uint64, (r.total+63)/64)
	}
	if r.done[i/64]&(1<<(i%64)) == 0 {
		r.done[i/64] |= 1 << (i % 64)
		r.doneCount++
	}
}

func (r *runner[T, O]) isDone(i int64) bool {
	return r.done != nil && r.done[i/64]&(1<<(i%64)) != 0
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

// openSandbox gives the attempt its own sandbox, forked from the sample's
// environment, before the attempt's clock starts: waiting for a capacity
// slot or for provisioning is not the agent's time. Provisioning and
// forking have a bound of their own, the episode timeout.
func (r *runner[T, O]) openSandbox(j *job) (sb sandbox.Sandbox, fault sink.ErrorKind, err error) {
	fault = sink.KindSandbox
	defer func() {
		if p := recover(); p != nil {
			fault, err = sink.KindPanic, fmt.Errorf("sandbox provider panicked: %v\n%s", p, debug.Stack())
		}
		if r.ctx.Err() != nil {
			fault = sink.KindCancelled
		}
	}()
	if r.sandboxes != nil {
		select {
		case r.sandboxes <- struct{}{}:
		case <-r.ctx.Done():
			return nil, fault, r.ctx.Err()
		}
	}
	ctx, cancel := r.ctx, context.CancelFunc(func() {})
	if r.cfg.Timeout > 0 {
		ctx, cancel = context.WithTimeout(r.ctx, r.cfg.Timeout)
	}
	defer cancel()
	env, err := r.environment(ctx, j.sample)
	if err == nil {
		sb, err = env.Fork(ctx)
		if err != nil {
			err = fmt.Errorf("forking the sandbox: %w", err)
		}
	}
	if err != nil {
		if r.sandboxes != nil {
			<-r.sandboxes
		}
		return nil, fault, err
	}
	j.mu.Lock()
	j.sb = sb
	if r.sandboxes != nil {
		j.release = func() { <-r.sandboxes }
	}
	j.mu.Unlock()
	return sb, "", nil
}

// environment provisions a sample's environment once; a failed provision
// is tried again by the next attempt.
func (r *runner[T, O]) environment(ctx context.Context, i int) (sandbox.Environment, error) {
	slot := &r.envs[i]
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.env != nil {
		return slot.env, nil
	}
	var spec sandbox.Spec
	if r.e.Sandbox != nil {
		spec = r.e.Sandbox(r.samples[i])
	}
	env, err := r.cfg.Sandbox.Provision(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("provisioning the sandbox: %w", err)
	}
	slot.env = env
	return env, nil
}

func (r *runner[T, O]) closeEnv(i int) {
	slot := &r.envs[i]
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.env != nil {
		slot.env.Close()
		slot.env = nil
	}
}

// record fills rec with an attempt's outcome.
func (r *runner[T, O]) record(rec *sink.Record, ep *harness.Episode[T], start time.Time, status sink.Status, kind sink.ErrorKind, errMsg string, v *judge.Verdict, out any) {
	u := ep.Usage()
	*rec = sink.Record{
		Schema: sink.SchemaVersion, RunID: r.runID, Eval: r.e.Name,
		SampleID: ep.Sample.ID, Epoch: ep.Epoch, Attempt: ep.Attempt,
		Status: status, Score: v.Score, Scores: v.Scores, Weight: v.Weight, Reason: v.Reason,
		Error: errMsg, ErrorKind: kind,
		Input: encodeJSON(ep.Sample.Input),
		Tags:  ep.Sample.Tags, StartedAt: start.UTC(),
		DurationMS:  float64(time.Since(start).Microseconds()) / 1000,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD,
		Seed: ep.Seed, ParentRunID: r.parentRunID,
	}
	if status != sink.Error || out != nil {
		rec.Output = encodeJSON(out)
	}
	if status != sink.Pass && status != sink.Fail {
		rec.Score = 0
	}
}

// encodeJSON encodes v for a record, with a fast path for the common
// string case. A value encoding/json rejects is kept as its error message.
func encodeJSON(v any) json.RawMessage {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return sink.AppendString(nil, x)
	case json.RawMessage:
		if json.Valid(x) {
			return x
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return sink.AppendString(nil, "unencodable: "+err.Error())
	}
	return b
}

// episodeSeed derives an episode's seed from the run seed, the sample ID
// and the epoch (FNV-1a, then a SplitMix64 finaliser), so that it depends on
// nothing else: not on order, concurrency or resume.
func episodeSeed(run uint64, sampleID string, epoch int) uint64 {
	h := fnv.New64a()
	io.WriteString(h, sampleID)
	x := h.Sum64() ^ run*0x9e3779b97f4a7c15 ^ uint64(epoch)*0xbf58476d1ce4e5b9
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// consume writes each finished episode's trace, record and sinks, and folds
// it into the report. A sink that fails stops the run: results that cannot
// be recorded must not be computed.
func (r *runner[T, O]) consume() {
	if r.log != nil && r.logSize > 0 {
		r.ingestLog()
	}
	ctx := context.WithoutCancel(r.ctx)
	for f := range r.out {
		if r.sinkErr != nil {
			continue // draining: the run is stopping
		}
		if err := r.write(ctx, &f); err != nil {
			r.sinkErr = err
			r.cancel(fmt.Errorf("eval: recording results: %w", err))
			continue
		}
		r.agg.addAt(f.sample, &f.rec)
		if r.cfg.MaxCostUSD > 0 && r.agg.usage.CostUSD >= r.cfg.MaxCostUSD {
			r.budgetHit.Store(true)
		}
	}
}

func (r *runner[T, O]) write(ctx context.Context, f *finished) error {
	if r.traces != nil && len(f.events) > 0 {
		line, err := json.Marshal(traceLine{RunID: r.runID, SampleID: f.rec.SampleID, Epoch: f.rec.Epoch, Attempt: f.rec.Attempt, Events: f.events})
		if err != nil {
			return err
		}
		off, err := r.traces.WriteLine(line)
		if err != nil {
			return err
		}
		f.rec.Trace = traceLink(r.traces.Path(), off)
	}
	if r.log != nil {
		if err := r.log.Write(ctx, f.rec); err != nil {
			return err
		}
	}
	for _, s := range r.sinks {
		if err := s.Write(ctx, f.rec); err != nil {
			return err
		}
	}
	return nil
}

// ingestLog folds the records a resumed log already held into the report,
// while new episodes already run.
func (r *runner[T, O]) ingestLog() {
	f, err := os.Open(r.cfg.Log)
	if err != nil {
		r.warnings = append(r.warnings, fmt.Sprintf("reading earlier records: %v", err))
		return
	}
	defer f.Close()
	for rec, err := range jsonl.Read(io.LimitReader(f, r.logSize), r.cfg.Log) {
		if err != nil {
			r.warnings = append(r.warnings, fmt.Sprintf("reading earlier records: %v", err))
			return
		}
		r.agg.add(&rec)
		r.resumed++
	}
}
