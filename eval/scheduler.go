package eval

// The scheduler: which episode runs next, workers and their attempts,
// timeouts (one watchdog, no timer per attempt), retries with backoff, and
// the stops (budget, error rate, cancel). It hands every finished episode
// to a committer and knows nothing of logs or reports, so that a
// distributed worker is this scheduler with another committer.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/judging"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sink"
)

// committer receives finished episodes from many workers at once.
type committer interface {
	commit(f *finished)
}

// finished is an episode with its final record.
type finished struct {
	sample int // index in the scheduler's samples
	slot   int // the episode's slot of its sample (variants.go)
	rec    sink.Record
	events []harness.Event
	line   []byte // rec encoded, with its transcript link, by the worker
	// The buffers rec.Input and rec.Output are encoded into when no sink
	// may keep the record (scheduler.ownBuffers): reused from episode to
	// episode, as line is.
	input, output []byte
}

// scheduler runs the episodes of one run. Workers (at most Concurrency,
// plus the replacements of abandoned ones) claim episodes from an atomic
// counter, so no goroutine or channel entry exists per pending episode.
type scheduler[T, O any] struct {
	e           *Eval[T, O]
	harnesses   []harness.Harness[T, O] // per variant: e's, or ones around them (schedule)
	plan        *variantPlan            // cfg.plan: the slots of a sample
	cfg         Config
	runID       string
	parentRunID string // set when rejudging
	samples     *sampleTable[T]
	stream      *sampleStream[T] // reads a streamed dataset again, while the workers run
	out         committer
	cancel      context.CancelCauseFunc // cancels the run (the ctx workers get)

	// done marks the episodes the log already holds (index sample*Epochs +
	// epoch); claim skips them. The recorder marks what it commits.
	done  *doneSet
	next  atomic.Int64 // the next episode index to claim
	total int64
	wg    sync.WaitGroup
	// feed, when set, hands out the episodes instead of the counter: a
	// worker of a distributed run claims what its coordinator assigns.
	feed <-chan episode
	// A sequential gate's (sequential.go): the samples in claim order, and
	// closed once the gate is decided; nil without one.
	order   []int32
	decided <-chan struct{}
	window  *claimWindow
	// elim, when variants are eliminated: the slots of an eliminated
	// variant are not claimed.
	elim *eliminator
	// gates, with a sequential gate per variant: the slots of a variant
	// whose gate decided are skipped as they come up.
	gates *variantGates
	// block, with variants, is how many samples' episodes are claimed
	// interleaved (claimAt): 0 claims a sample's episodes one after the
	// other.
	block int64

	// Sandboxes: one environment per sample, closed after its last episode.
	pool *sandbox.Pool

	workersMu sync.Mutex
	workers   []*workerState[T]
	// progressClock is set while progress is on: workers then publish what
	// they run, stamped with this coarse clock (progress.go).
	progressClock *atomic.Int64

	// Stops. stopped ends scheduling; the counters feed the budget and the
	// error-rate check, and count what the report cannot see in records.
	stopped      atomic.Bool
	budgetHit    atomic.Bool
	budgetSpent  string       // "cost" or "tokens", set once before budgetHit; read after the workers end
	spentNanoUSD atomic.Int64 // cost of every attempt this run made
	spentTokens  atomic.Int64 // and its tokens
	settled      atomic.Int64 // episodes finished this run
	errored      atomic.Int64 // of which ended in error
	cancelled    atomic.Int64 // started but not finished: they run on resume

	tel telemetry // OpenTelemetry (otel.go): nil fields when off

	// The model gateway's (models.go): where sandboxes reach it, and what
	// attempts in flight spent through it.
	modelsURL string
	live      liveSpend
	fleet     *fleetBudget // a worker's share of the run's budgets (fleet.go); nil elsewhere

	clock time.Time // when the scheduler was made; see now

	// The dataset's identity, hashed by workers as they commit (identity.go);
	// nil when the run does not add it up. identMerged is set, under
	// workersMu, once the workers' parts are added.
	ident       *identityTracker
	identMerged bool

	// Whether every input, and every output, encodes within
	// sink.MaxJSONDepth by its type alone (depth.go): conclude then need
	// not measure it; and whether one encodes through its pointer as it
	// encodes itself.
	inputsShallow, outputsShallow bool
	inputsByPointer               bool
	// ownBuffers: no sink is given the records, so nothing holds a
	// record's input or output once the recorder wrote it, and they are
	// encoded into reused buffers (job.inbuf, then finished.input;
	// finished.output).
	ownBuffers bool
	// inputStrings writes an input that is a struct of strings, as
	// encoding/json would (stringstruct.go); nil for any other type.
	inputStrings *stringStruct
}

// job is one episode on its way through its attempts.
type job struct {
	sample, epoch, attempt int
	// fin holds the record of the latest attempt: the finished episode
	// the recorder will get, filled in place rather than copied into it.
	fin    *finished
	events []harness.Event
	input  json.RawMessage // the sample's input, encoded once for the records of all attempts
	// inbuf is the buffer input is encoded into (ownBuffers), reused from
	// episode to episode: an episode in flight holds its input, not yet
	// a record (finished, with its three buffers), which takes a copy at
	// the episode's end (buildRecord).
	inbuf []byte
	held  any           // a streamed sample's *heldSample, from its first attempt
	usage harness.Usage // of the attempts before the latest, named by the agent's model
	// judgeUsage and simUsage are the judge's and a simulated user's
	// parts of usage.
	judgeUsage, simUsage harness.Usage
	// kept is the harness output of an attempt whose judge failed: the
	// retry judges it again instead of running the agent again.
	kept      *kept
	permanent bool // the latest attempt's error must not be retried
	// notRun is set when the latest attempt ended before the agent ran
	// (its sandbox could not be had): under a sequential gate, the only
	// error retried, since retrying it draws nothing again.
	notRun bool
	// oomKills counts the attempts the out-of-memory killer ended: with
	// Config.OOMRetryMemory, the next attempt's memory limit is scaled
	// that many times.
	oomKills uint8
	// models is the latest attempt's opening of the model gateway, until
	// its record (models.go).
	models *modelMeter
	replay replayCounts // the calls the gateway's call store answered

	spans episodeSpans // OpenTelemetry (otel.go)

	mu sync.Mutex
	sb *sandbox.Sandbox // the open sandbox of the attempt in flight; closing it frees its capacity slot
}

// keptInput is a job's input buffer as the next episode reuses it: a
// huge one is dropped.
func keptInput(b []byte) []byte {
	if cap(b) > maxKeptBuffer {
		return nil
	}
	return b[:0]
}

// rec is the record of the latest attempt.
func (j *job) rec() *sink.Record {
	if j.fin == nil {
		j.fin = getFinished()
	}
	return &j.fin.rec
}

type kept struct {
	out any
	sb  *sandbox.Sandbox // the sandbox the harness left, for the judge
}

// schedule is what a scheduler is given besides the eval, its config and
// samples: what it runs them with and where their results go.
type schedule[T, O any] struct {
	harnesses   []harness.Harness[T, O] // per variant: the eval's, or the rejudge plan's around them (reuse.go)
	runID       string
	parentRunID string // set when rejudging
	done        *doneSet
	out         committer
	cancel      context.CancelCauseFunc // cancels the run
	// feed, when set, hands out the episodes instead of the counter (a
	// distributed worker's assignments).
	feed  <-chan episode
	ident *identityTracker // nil when the run does not add up its dataset's identity
	// progressClock is set when progress is shown: workers then publish
	// what they run, stamped with this coarse clock (progress.go).
	progressClock *atomic.Int64
	// A sequential gate's samples in claim order, and closed once it is
	// decided; nil without one.
	order   []int32
	decided <-chan struct{}
	window  *claimWindow  // bounds the claims beyond the finished prefix
	elim    *eliminator   // skips the eliminated variants' episodes
	gates   *variantGates // skips the episodes of variants whose gate decided
	// stream, when set, reads a streamed dataset for a worker's feed
	// (work.go); Run's scheduler makes its own.
	stream *sampleStream[T]
}

func newScheduler[T, O any](e *Eval[T, O], cfg Config, samples *sampleTable[T], sc schedule[T, O]) *scheduler[T, O] {
	s := &scheduler[T, O]{e: e, cfg: cfg, samples: samples, clock: time.Now(),
		total: int64(samples.len()) * int64(cfg.Epochs), tel: newTelemetry(&cfg),
		harnesses: sc.harnesses, plan: cfg.plan, runID: sc.runID, parentRunID: sc.parentRunID, done: sc.done, out: sc.out,
		cancel: sc.cancel, feed: sc.feed, ident: sc.ident, order: sc.order, decided: sc.decided, window: sc.window, elim: sc.elim, gates: sc.gates,
		progressClock: sc.progressClock, stream: sc.stream,
		inputsShallow:   nestsWithin(reflect.TypeFor[T](), sink.MaxJSONDepth),
		outputsShallow:  nestsWithin(reflect.TypeFor[O](), sink.MaxJSONDepth),
		inputsByPointer: encodesByPointer(reflect.TypeFor[T]()),
		ownBuffers:      len(cfg.Sinks) == 0,
		inputStrings:    newStringStruct(reflect.TypeFor[T]())}
	if cfg.Sandbox != nil {
		s.newPool()
	}
	if len(e.Variants) > 0 {
		s.block = int64(variantBlock(cfg.Concurrency))
	}
	return s
}

// now is the time: the scheduler's start plus the monotonic time since, one
// clock read where time.Now makes two (the wall clock too), which on some
// virtual machines costs 100 ns an attempt. A step of the wall clock during
// a run shifts no start time recorded after it.
// variantIndex returns the variant of a slot (its index in s.plan.names and
// s.harnesses): 0 without variants, with no division on the path of every
// episode.
func (s *scheduler[T, O]) variantIndex(slot int) int {
	if len(s.plan.names) == 1 {
		return 0
	}
	return slot / s.plan.epochs
}

func (s *scheduler[T, O]) now() time.Time { return s.clock.Add(time.Since(s.clock)) }

// run runs every episode not yet done and returns when all have settled
// or been given up. ctx is the run's context: canceling it (or s.cancel)
// stops scheduling and abandons the attempts in flight.
func (s *scheduler[T, O]) run(ctx context.Context) {
	pending := s.total - s.done.count()
	workers := min(int64(s.cfg.Concurrency), max(pending, 0))
	if s.feed != nil {
		workers = int64(s.cfg.Concurrency)
	}
	if s.samples.streamed() && s.feed == nil {
		s.stream = newSampleStream(ctx, s.samples, func(i int) int { return s.done.left(i, s.cfg.Epochs) }, s.cfg.Concurrency)
		defer s.stream.close()
	}
	s.wg.Add(int(workers))
	for range workers {
		go s.worker(ctx, nil)
	}
	stopWatchdog := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watchdog(ctx, stopWatchdog)
	}()
	s.wg.Wait()
	s.mergeIdentity()
	close(stopWatchdog)
	<-watched
	s.closePool()
}

// sample returns the sample of j. A streamed dataset that does not read
// the same again stops the run.
func (s *scheduler[T, O]) sample(j *job) (*dataset.Sample[T], error) {
	if s.stream == nil {
		return &s.samples.all[j.sample], nil
	}
	if h, ok := j.held.(*heldSample[T]); ok {
		return &h.s, nil // a retry
	}
	h, err := s.stream.get(j.sample)
	if err != nil {
		s.stop(err, true)
		return nil, err
	}
	j.held = h
	return &h.s, nil
}

// worker runs jobs until none is left. A worker that replaces an abandoned
// one starts by settling the abandoned job's outcome.
func (s *scheduler[T, O]) worker(ctx context.Context, abandonedJob *job) {
	w := &workerState[T]{}
	s.register(w)
	defer s.unregister(w)
	// Attempts' contexts keep the run context's values but not its
	// cancellation: the watchdog cancels them when the run is canceled.
	// Their parent is never done, so creating and canceling one touches no
	// shared state: thousands of workers do not contend on a lock.
	base := context.WithoutCancel(ctx)
	j := abandonedJob
	if j != nil {
		j = s.settle(ctx, w, j)
	}
	for {
		if j == nil {
			if j = s.claim(ctx, &w.job); j == nil {
				// Shows nothing before the run may count it gone: the run's
				// last progress snapshot can come before it unregisters.
				w.shown.Store(0)
				s.wg.Done()
				return
			}
		}
		if s.progressClock != nil {
			s.show(w, j)
		}
		smp, err := s.sample(j)
		if err != nil {
			s.unreadable(j, err)
		} else {
			if j.input == nil {
				// Here, at the worker's shallowest: encoding/json needs a
				// deep stack, and every worker's grows to its deepest call.
				j.input = s.encodeInput(w, j, &smp.Input)
			}
			if !s.attempt(ctx, base, w, j, smp) {
				return // abandoned: a replacement owns j and this worker's place
			}
		}
		j = s.settle(ctx, w, j)
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
	index    int           // in scheduler.workers

	cur   *job
	ep    *harness.Episode[T]
	start time.Time
	ctx   *attemptCtx
	// capped is the running attempt's, when a per-episode cap applies: the
	// watchdog stops an attempt whose episode passes its cap (cap.go).
	capped atomic.Pointer[cappedAttempt[T]]

	// For progress, while it is on (progress.go): the episode of the
	// latest attempt and when it started (Unix ns, coarse).
	shown atomic.Uint64
	since atomic.Int64

	ident workerIdentity // the samples this worker hashed (identity.go)
	enc   inputEncoder   // its episodes' inputs, with ownBuffers (record.go)
}

const (
	idle uint64 = iota // a new worker, before its first attempt
	running
	returned
	abandoned
)

func (s *scheduler[T, O]) register(w *workerState[T]) {
	s.workersMu.Lock()
	w.index = len(s.workers)
	s.workers = append(s.workers, w)
	s.workersMu.Unlock()
}

func (s *scheduler[T, O]) unregister(w *workerState[T]) {
	s.workersMu.Lock()
	if s.ident != nil && !s.identMerged {
		s.ident.add(w.ident.sum)
	}
	last := s.workers[len(s.workers)-1]
	s.workers[w.index], last.index = last, w.index
	s.workers = s.workers[:len(s.workers)-1]
	s.workersMu.Unlock()
}

// watchdog abandons the attempts that outlive their deadline, and all
// running attempts once the run is canceled: one goroutine scanning the
// workers, instead of a timer per attempt. Deadlines are enforced within
// a twentieth of the timeout (at least 1 ms, at most 250 ms).
func (s *scheduler[T, O]) watchdog(ctx context.Context, stop <-chan struct{}) {
	tick := 250 * time.Millisecond
	if s.cfg.Timeout > 0 {
		tick = min(max(s.cfg.Timeout/20, time.Millisecond), tick)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var expired []*workerState[T]
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-ctx.Done():
		}
		now, canceled := time.Now().UnixNano(), ctx.Err() != nil
		expired = expired[:0]
		s.workersMu.Lock()
		for _, w := range s.workers {
			if d := w.deadline.Load(); canceled || d != 0 && now >= d {
				expired = append(expired, w)
			}
			if c := w.capped.Load(); c != nil {
				s.stopOverCap(c)
			}
		}
		s.workersMu.Unlock()
		for _, w := range expired {
			s.abandon(ctx, w, canceled)
		}
		if canceled {
			t.Reset(tick) // keep sweeping: a worker may start one last attempt
		}
	}
}

// abandon gives up on the attempt w runs, if it is still running: the
// attempt is recorded as a timeout (or cancellation), its sandbox closed,
// and a new worker takes over its job and its place.
func (s *scheduler[T, O]) abandon(ctx context.Context, w *workerState[T], canceled bool) {
	p := w.phase.Load()
	if p&3 != running {
		return
	}
	// The watchdog saw an expired deadline, but that attempt may have
	// returned and the next one begun since: the worker stores a deadline
	// before it publishes the phase, so this reads the running attempt's.
	if d := w.deadline.Load(); !canceled && (d == 0 || time.Now().UnixNano() < d) {
		return
	}
	if !w.phase.CompareAndSwap(p, p&^3|abandoned) {
		return
	}
	w.capped.Store(nil)
	j := w.cur
	res := &outcome[O]{fault: sink.KindTimeout, err: fmt.Errorf("timed out after %v (abandoned: it did not return when its context expired)", s.cfg.Timeout),
		stage: "harness"}
	if judging.Started(w.ep) {
		res.stage = "judge"
	}
	cause := errTimeout
	if canceled {
		res.fault, res.err = sink.KindCancelled, fmt.Errorf("run canceled: %v", context.Cause(ctx))
		cause = context.Canceled
	}
	w.ctx.cancel(cause)
	s.conclude(j, w.ep, w.start, res)
	j.dropKept()
	j.freeSandbox() // may unblock the abandoned harness; the engine won't wait for it
	go s.worker(ctx, j)
}

// episode is an episode to run: a sample's index and an epoch.
type episode struct{ sample, epoch int }

// claim returns the next episode that has no final record yet.
func (s *scheduler[T, O]) claim(ctx context.Context, j *job) *job {
	if s.feed != nil {
		return s.claimFed(ctx, j)
	}
	epochs := int64(s.cfg.Epochs)
	for ctx.Err() == nil && !s.stopped.Load() && !s.isDecided() {
		i := s.next.Add(1) - 1
		if i >= s.total {
			return nil
		}
		if s.window != nil && (!s.window.wait(i, ctx.Done(), s.decided) || s.stopped.Load()) {
			return nil
		}
		i = s.claimAt(i)
		if s.done.has(i) {
			continue
		}
		if s.elim != nil && s.elim.outSlot(int(i%epochs)) || s.gates != nil && s.gates.outSlot(int(i%epochs)) {
			s.closeEnv(int(i / epochs)) // settled, unrun: the pool closes the environment after its last
			continue
		}
		*j = job{sample: int(i / epochs), epoch: int(i % epochs), inbuf: keptInput(j.inbuf)}
		return j
	}
	return nil
}

// claimAt returns the episode (sample × slots + slot) at claim position
// i. With variants, samples are claimed in blocks: the first slot of each
// of a block's samples, then the second of each, and so on. Every
// variant of a sample runs within its block (close together: pairs for
// elimination), and a block's environments are provisioned side by side,
// not one sample's at a time while the workers wait on it.
func (s *scheduler[T, O]) claimAt(i int64) int64 {
	if s.block <= 1 && s.order == nil {
		return i // no variants, in order: no arithmetic on the path of every claim
	}
	slots := int64(s.cfg.Epochs)
	pos, slot := i/slots, i%slots
	if s.block > 1 {
		first := i / (s.block * slots) * s.block
		width := min(s.block, s.total/slots-first)
		r := i - first*slots
		pos, slot = first+r%width, r/width
	}
	if s.order != nil {
		pos = int64(s.order[pos])
	}
	return pos*slots + slot
}

// variantBlock is the number of samples claimed interleaved with
// variants: enough for every worker to start on a sample of its own.
func variantBlock(concurrency int) int { return concurrency }

func (s *scheduler[T, O]) claimFed(ctx context.Context, j *job) *job {
	if s.stopped.Load() {
		return nil
	}
	select {
	case ep, ok := <-s.feed:
		if !ok || s.stopped.Load() || !s.fleet.allows(ctx) {
			return nil
		}
		*j = job{sample: ep.sample, epoch: ep.epoch, inbuf: keptInput(j.inbuf)}
		return j
	case <-ctx.Done():
		return nil
	}
}

// settle decides what follows an attempt: a retry (returns j again, after
// backoff) or the end of the episode (commits it and returns nil).
func (s *scheduler[T, O]) settle(ctx context.Context, w *workerState[T], j *job) *job {
	rec := j.rec()
	retry := rec.Status == sink.Error && rec.ErrorKind != sink.KindCancelled &&
		!j.permanent && j.attempt < s.cfg.Retries && ctx.Err() == nil && !s.stopped.Load() &&
		(s.cfg.Sequential == nil && s.cfg.EliminateVariants == 0 || j.notRun)
	if retry {
		d := min(s.cfg.Backoff<<j.attempt, maxBackoff)
		t := time.NewTimer(rand.N(d) + 1)
		select {
		case <-t.C:
			j.usage, j.judgeUsage, j.simUsage = usageOf(rec), judgeUsageOf(rec), simulatorUsageOf(rec)
			j.usage.Model = rec.Model
			j.replay.retry(rec)
			if rec.ErrorSource == "sandbox/oom" && j.oomKills < math.MaxUint8 {
				j.oomKills++
			}
			j.attempt++
			return j
		case <-ctx.Done():
			t.Stop()
		}
	}
	j.dropKept()
	s.endEpisode(j) // before the recorder may have the record
	f := j.fin
	j.fin = nil
	if rec.ErrorKind == sink.KindCancelled || (rec.Status == sink.Error && ctx.Err() != nil) {
		// Not finished: the episode runs on resume. Records are rows of
		// finished episodes only.
		s.cancelled.Add(1)
		putFinished(f)
	} else {
		s.countSettled(rec)
		s.hashSettled(w, j.sample, rec.Input)
		f.sample, f.slot, f.events = j.sample, j.epoch, j.events
		rec.Worker = s.cfg.Worker
		s.out.commit(f)
	}
	s.closeEnv(j.sample)
	if h, ok := j.held.(*heldSample[T]); ok {
		s.stream.settled(h)
	}
	return nil
}

// countSettled feeds the error-rate stop with a finished episode.
func (s *scheduler[T, O]) countSettled(rec *sink.Record) {
	n := s.settled.Add(1)
	errs := s.errored.Load()
	if rec.Status == sink.Error {
		errs = s.errored.Add(1)
	}
	if err := s.cfg.ErrorRateStop(errs, n, rec.Error); err != nil {
		s.stop(err, true)
	}
}

// spend counts an attempt's cost and tokens against the budgets, as soon
// as the attempt ends, so that scheduling stops once one is spent whatever
// the backlog and whatever is retried.
func (s *scheduler[T, O]) spend(u harness.Usage) {
	s.fleet.add(u)
	over := false
	// u is usable (checkUsage): each figure is far below what overflows a
	// counter, and a counter past it saturates, never wraps to negative.
	which := "cost"
	if u.CostUSD > 0 {
		spent := saturatingAdd(&s.spentNanoUSD, int64(u.CostUSD*1e9))
		over = s.cfg.MaxCostUSD > 0 && float64(spent)/1e9 >= s.cfg.MaxCostUSD
	}
	if n := u.Tokens(); n > 0 {
		spent := saturatingAdd(&s.spentTokens, n)
		if !over && s.cfg.MaxTokens > 0 && spent >= s.cfg.MaxTokens {
			over, which = true, "tokens"
		}
	}
	if over && s.budgetHit.CompareAndSwap(false, true) {
		s.budgetSpent = which
		s.stop(nil, false)
	}
}

// saturatingAdd adds n ≥ 0 to c, stopping at math.MaxInt64.
func saturatingAdd(c *atomic.Int64, n int64) int64 {
	v := c.Add(n)
	if v < 0 {
		c.Store(math.MaxInt64)
		return math.MaxInt64
	}
	return v
}

// spent returns what this run's attempts have spent, for progress.
func (s *scheduler[T, O]) spent() (usd float64, tokens int64) {
	return float64(s.spentNanoUSD.Load()) / 1e9, s.spentTokens.Load()
}

// LimitError ends an episode whose usage, over all its attempts, agent
// and judge together, passed Config.MaxEpisodeTokens or
// Config.MaxEpisodeCostUSD: its record is an error of kind limit, with
// what it spent. It is permanent: a retry would spend as much again.
type LimitError struct {
	Agent, Judge harness.Usage
	MaxTokens    int64
	MaxCostUSD   float64
	// Run: the cap is the run's budget (Config.MaxTokens, MaxCostUSD),
	// which the model gateway (Config.Models) found spent when the
	// episode's agent called a model.
	Run bool
}

func (e *LimitError) Error() string {
	total := e.Agent.Add(e.Judge)
	what, cap := fmt.Sprintf("%d tokens over Config.MaxEpisodeTokens %d", total.Tokens(), e.MaxTokens), "its cap"
	if e.MaxTokens <= 0 || total.Tokens() < e.MaxTokens {
		what = fmt.Sprintf("$%.4f over Config.MaxEpisodeCostUSD $%.4f", total.CostUSD, e.MaxCostUSD)
	}
	if e.Run {
		// What the run spent is the run's, not this episode's.
		var spent []string
		if e.MaxTokens > 0 {
			spent = append(spent, fmt.Sprintf("Config.MaxTokens %d", e.MaxTokens))
		}
		if e.MaxCostUSD > 0 {
			spent = append(spent, fmt.Sprintf("Config.MaxCostUSD $%.4f", e.MaxCostUSD))
		}
		what, cap = strings.Join(spent, " or ")+" is spent", "the run's budget"
	}
	return fmt.Sprintf("eval: episode stopped at %s: %s (agent %d tokens $%.4f, judge %d tokens $%.4f)",
		cap, what, e.Agent.Tokens(), e.Agent.CostUSD, e.Judge.Tokens(), e.Judge.CostUSD)
}

// Permanent reports true: an episode over its cap is not retried.
func (*LimitError) Permanent() bool { return true }

// stop ends scheduling. With abort, the run is canceled with cause:
// episodes in flight end as cancelled and run on resume. Without, they
// finish (the budget: what is paid for is recorded).
func (s *scheduler[T, O]) stop(cause error, abort bool) {
	s.stopped.Store(true)
	s.window.open()
	if abort {
		s.cancel(cause)
	}
}

// ErrorRateStop is the error-rate stop of a run under c: when more than
// c.MaxErrorRate (0: DefaultMaxErrorRate; negative: no stop) of n finished
// episodes, n at least c.ErrorRateAfter (0: DefaultErrorRateAfter), ended
// in error, the *ErrorRateError that stops the run, else nil. last is the
// latest error message. The engine's scheduler and package cluster's
// coordinator both stop by it.
func (c *Config) ErrorRateStop(errs, n int64, last string) *ErrorRateError {
	max, after := c.MaxErrorRate, int64(c.ErrorRateAfter)
	if max == 0 {
		max = DefaultMaxErrorRate
	}
	if after == 0 {
		after = DefaultErrorRateAfter
	}
	if max < 0 || n < after || float64(errs) <= max*float64(n) {
		return nil
	}
	return &ErrorRateError{Errors: int(errs), Episodes: int(n), Max: max, Last: last}
}

// ErrorRateError stops a run whose episodes mostly end in error (a bad API
// key, a broken sandbox image): continuing would burn the dataset. Fix the
// cause and run again with the same log: the run resumes.
type ErrorRateError struct {
	Errors, Episodes int
	Max              float64
	Last             string // the latest error message
}

func (e *ErrorRateError) Error() string {
	return fmt.Sprintf("eval: stopped: %d of the first %d finished episodes ended in error (more than Config.MaxErrorRate %.0f%%); the latest: %s",
		e.Errors, e.Episodes, e.Max*100, firstLine(e.Last))
}

// doneSet marks episodes by index: a bitset, so that resuming a
// million-record log needs no map of keys. add is safe for concurrent use
// with has; the recorder uses it as the exactly-once index.
type doneSet struct {
	words []atomic.Uint64
	n     atomic.Int64
	total int64
}

func newDoneSet(total int64) *doneSet {
	return &doneSet{words: make([]atomic.Uint64, (total+63)/64), total: total}
}

// add marks episode i and reports whether it was not marked before.
func (d *doneSet) add(i int64) bool {
	bit := uint64(1) << (i % 64)
	if d.words[i/64].Or(bit)&bit != 0 {
		return false
	}
	d.n.Add(1)
	return true
}

func (d *doneSet) has(i int64) bool { return d.words[i/64].Load()&(1<<(i%64)) != 0 }

// left counts the episodes of sample i, of epochs each, not marked.
func (d *doneSet) left(i, epochs int) int {
	n := 0
	for ep := range epochs {
		if !d.has(int64(i)*int64(epochs) + int64(ep)) {
			n++
		}
	}
	return n
}

func (d *doneSet) count() int64 { return d.n.Load() }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
