package eval

// Progress: how far a run is, for people (a line on stderr) and for code
// (Config.OnProgress, Recording.Progress). The numbers come from three
// places, each read only when a snapshot is taken:
//
//   - the done set: episodes with a final record (a count kept anyway);
//   - the recorder's tally: statuses, tokens, cost and a histogram of
//     durations, folded by the recorder's goroutine into plain fields (a
//     few ns per record, nothing allocated) and copied out on request, so
//     the serial path pays no atomic or lock per record;
//   - the workers: what each runs and since when, published by two atomic
//     stores per attempt only while progress is on (stamped with a coarse
//     clock, not a time.Now each), scanned under workersMu when a
//     snapshot is taken.
//
// The ETA is honest about long, uneven episodes: it comes from the
// durations of completed episodes (median and p90, so a range), divided
// by the concurrency the run actually had, and is not shown until enough
// episodes have finished to mean something (etaAfter).

import (
	"cmp"
	"flag"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proctor-evals/proctor/sink"
)

// Progress is a snapshot of a run. Counts are of the run's own episodes:
// those of other shards, or that a rejudge keeps, are in neither Total nor
// Done. Statuses, tokens and cost include what a resumed log held, as the
// report does; PerMinute counts only what this run finished.
type Progress struct {
	Eval string
	// Total is the run's episodes; Done those with a final record, of
	// which Resumed were in the log when the run started.
	Total, Done, Resumed int64
	// Running is the episodes in flight (an episode waiting to retry
	// counts); Longest the longest-running of them, longest first, at
	// most five: a stuck agent shows here.
	Running int
	Longest []RunningEpisode
	// Statuses of the final records.
	Pass, Fail, Error, Unscored int64
	// Elapsed is the time since the run started.
	Elapsed time.Duration
	// PerMinute is the recent rate of episodes finished (over the last
	// minute; the whole run in the final snapshot).
	PerMinute float64
	// Tokens and cost of the final records (every attempt of each).
	InputTokens, OutputTokens int64
	CostUSD                   float64
	// Budget is the run's budgets and what is spent of them; nil when it
	// has none (Config.MaxCostUSD, MaxTokens).
	Budget *Budget
	// ProjectedCostUSD is the run's total cost projected from the cost
	// per finished episode so far (see [CostRange]); zero until known.
	ProjectedCostUSD CostRange
	// Median and P90 are of the completed episodes' durations (their last
	// attempt), ±12 %; zero until ETA is known.
	Median, P90 time.Duration
	// ETA is the time left as a range; zero until enough episodes have
	// finished to estimate it (see [ETA]).
	ETA ETA
	// RateLimits are the lanes of the model gateway's rate governor
	// (Config.Models, when it governs its calls); nil without one.
	RateLimits []RateLimit
	// Final is set on the snapshot taken as the run ends.
	Final bool
}

// ETA is the estimated time left: Low from the median duration of the
// completed episodes, High from their 90th percentile, each times the
// episodes left, divided by the concurrency the run had over the last
// minute (never more than the episodes left, so the last ones take at
// least one duration). It is zero until max(20, 2 × concurrency)
// episodes have finished (or half of a smaller run): the first to finish
// in a run are its quickest, so an estimate from them alone is too
// hopeful.
type ETA struct{ Low, High time.Duration }

// Known reports whether the ETA was estimated.
func (e ETA) Known() bool { return e.High > 0 }

// RunningEpisode is an episode in flight.
type RunningEpisode struct {
	SampleID       string
	Variant        string // "" without variants
	Epoch, Attempt int
	// Elapsed is the time since its current attempt started (on this
	// machine, to within one Config.ProgressEvery, rounded up).
	Elapsed time.Duration
}

// progressLongest is how many running episodes a snapshot lists.
const progressLongest = 5

// DefaultProgressEvery is how often progress is taken by default.
const DefaultProgressEvery = time.Second

// plainProgressEvery is how often a progress line is written where it
// cannot update in place (a file, a CI log, `go test -v`): every 10 s a
// log keeps 6 lines a minute, short enough to read back and frequent
// enough that a CI job that kills silent steps, and a person tailing the
// log, see the run move. A variable for tests.
var plainProgressEvery = 10 * time.Second

// progressLongestShown is how long the longest running episode must have
// run before the line names it: below it, it is ordinary.
const progressLongestShown = 10 * time.Second

// ---- counting: the recorder's tally ----

// The duration histogram: log-linear buckets (the HDR histogram's layout,
// from a float's exponent and top mantissa bits, no math.Log), 4 per
// octave (≤ 25 % wide, so a quantile is within ±12 % of its bucket's
// midpoint), from 2^-4 ms (shorter episodes share bucket 0) to 2^28 ms
// (75 h; longer ones share the last).
const (
	durPerOctave = 4
	durMinExp    = -4
	durBuckets   = 128
)

func durationBucket(ms float64) int {
	b := math.Float64bits(ms)
	i := (int(b>>52&0x7ff)-1023-durMinExp)*durPerOctave + int(b>>50&(durPerOctave-1))
	return min(max(i, 0), durBuckets-1)
}

// bucketMidMS is the middle of bucket i, in ms.
func bucketMidMS(i int) float64 {
	base := math.Ldexp(1, i/durPerOctave+durMinExp)
	return base * (1 + (float64(i%durPerOctave)+0.5)/durPerOctave)
}

// tally is what the final records add up to. The recorder's goroutine
// alone folds records in; others read copies.
type tally struct {
	pass, fail, errored, unscored int64
	inputTokens, outputTokens     int64
	costUSD                       float64
	costSq                        float64 // sum of squared costs, for the projection's spread
	durationMS                    float64 // sum, for the mean
	durations                     [durBuckets]int64
}

func (t *tally) add(rec *sink.Record) {
	switch rec.Status {
	case sink.Pass:
		t.pass++
	case sink.Fail:
		t.fail++
	case sink.Error:
		t.errored++
	case sink.Unscored:
		t.unscored++
	}
	t.inputTokens += rec.InputTokens
	t.outputTokens += rec.OutputTokens
	t.costUSD += rec.CostUSD
	t.costSq += rec.CostUSD * rec.CostUSD
	t.durationMS += rec.DurationMS
	t.durations[durationBucket(rec.DurationMS)]++
}

func (t *tally) timed() int64 {
	var n int64
	for _, c := range t.durations {
		n += c
	}
	return n
}

// quantile returns the q-quantile of the durations, in ms; n is t.timed().
func (t *tally) quantile(q float64, n int64) float64 {
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i, c := range t.durations {
		if seen += c; seen >= max(rank, 1) {
			return bucketMidMS(i)
		}
	}
	return 0
}

// tallyBox hands copies of the recorder's tally to readers: a reader sets
// want and wakes the recorder, which copies its tally at the end of its
// batch. The zero value is ready.
type tallyBox struct {
	want atomic.Bool
	mu   sync.Mutex
	copy tally
	pub  chan struct{} // signalled after each copy; made by the first reader
}

// publish is called by the recorder's goroutine.
func (b *tallyBox) publish(t *tally) {
	b.want.Store(false)
	b.mu.Lock()
	b.copy = *t
	pub := b.pub
	b.mu.Unlock()
	if pub != nil {
		select {
		case pub <- struct{}{}:
		default:
		}
	}
}

// progressWait bounds how long a snapshot waits for a busy recorder (a
// slow sink, a long log being ingested) before using its latest copy.
const progressWait = 50 * time.Millisecond

// tallyNow returns the recorder's tally: exact once it has stopped, else a
// copy it publishes on request, or the latest copy if it is busy.
func (r *recorder) tallyNow() tally {
	select {
	case <-r.stopped:
		return r.tally
	default:
	}
	b := &r.shared
	b.mu.Lock()
	if b.pub == nil {
		b.pub = make(chan struct{}, 1)
	}
	pub := b.pub
	b.mu.Unlock()
	select {
	case <-pub: // a stale signal
	default:
	}
	b.want.Store(true)
	select {
	case r.wake <- struct{}{}: // an idle recorder publishes at once
	default:
	}
	t := time.NewTimer(progressWait)
	defer t.Stop()
	select {
	case <-pub:
	case <-r.stopped:
		return r.tally
	case <-t.C:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.copy
}

// ---- running episodes: the workers ----

// show publishes the episode w is about to attempt: two atomic stores,
// stamped with the coarse clock the snapshots set (an atomic load, not a
// time.Now per attempt), so an elapsed time is within one ProgressEvery.
// shown packs the attempt (top 16 bits) and the episode index + 1; 0 is
// a worker yet to start. A worker shows its latest episode until it
// attempts the next one or exits: claiming the next is immediate (a
// counter), and an exiting worker unregisters.
func (s *scheduler[T, O]) show(w *workerState[T], j *job) {
	w.since.Store(s.progressClock.Load())
	idx := uint64(j.sample)*uint64(s.cfg.Epochs) + uint64(j.epoch) + 1
	w.shown.Store(uint64(min(j.attempt, 0xffff))<<48 | idx&(1<<48-1))
}

// running returns the episodes in flight and the longest-running of them.
// An abandoned attempt is not in flight: its episode was settled (and
// runs again on a new worker, if it is retried).
func (s *scheduler[T, O]) running() (int, []RunningEpisode) {
	type entry struct {
		shown uint64
		since int64
	}
	var top []entry
	n := 0
	s.workersMu.Lock()
	for _, w := range s.workers {
		e := entry{w.shown.Load(), w.since.Load()}
		if e.shown == 0 || w.phase.Load()&3 == abandoned {
			continue
		}
		n++
		// Keep the progressLongest oldest, oldest first.
		i, _ := slices.BinarySearchFunc(top, e.since, func(x entry, since int64) int { return cmp.Compare(x.since, since) })
		if i < progressLongest {
			top = slices.Insert(top, i, e)
			if len(top) > progressLongest {
				top = top[:progressLongest]
			}
		}
	}
	s.workersMu.Unlock()
	now := time.Now().UnixNano()
	epochs := uint64(s.cfg.Epochs)
	out := make([]RunningEpisode, len(top))
	for k, e := range top {
		idx := e.shown&(1<<48-1) - 1
		slot := int(idx % epochs)
		out[k] = RunningEpisode{SampleID: s.samples.id(int(idx / epochs)), Variant: s.plan.name(slot), Epoch: s.plan.epoch(slot),
			Attempt: int(e.shown >> 48), Elapsed: time.Duration(max(now-e.since, 0))}
	}
	return n, out
}

// ---- snapshots ----

// progressTracker takes snapshots of an open run.
type progressTracker struct {
	eval        string
	start       time.Time
	total       int64 // the run's own episodes
	notOwned    int64 // marked done in the done set without being the run's
	resumed     int64
	done        *doneSet
	rec         *recorder
	concurrency int
	budget      Budget                             // the maxima; spent is read at each snapshot
	spent       func() (usd float64, tokens int64) // what the run's attempts spent
	rateLimits  func() []RateLimit                 // nil: no governed gateway

	// clock is the time of the latest snapshot (Unix ns): the coarse
	// clock that workers stamp attempts with.
	clock atomic.Int64

	mu      sync.Mutex
	running func() (int, []RunningEpisode) // nil: unknown
	peak    int                            // the most episodes seen in flight
	window  [32]progressSample             // a ring, one sample per 2 s at most
	head, n int                            // the next slot; the samples held
}

type progressSample struct {
	at      time.Time
	done    int64 // finished by this run
	running int
}

// progressWindow is what "recent" means for the rate and the concurrency.
const progressWindow = time.Minute

func newProgressTracker(r *run, cfg *Config) *progressTracker {
	notOwned := r.total - r.owned
	t := &progressTracker{eval: r.evalName, start: r.start, total: r.owned, notOwned: notOwned,
		resumed: r.done.count() - notOwned, done: r.done, rec: r.rec, concurrency: cfg.Concurrency,
		budget: Budget{MaxCostUSD: cfg.MaxCostUSD, MaxTokens: cfg.MaxTokens}, rateLimits: rateLimitsOf(cfg.Models)}
	t.spent = func() (float64, int64) { // a coordinator's: its committed records
		c := &r.rec.committed
		return float64(c.costNanoUSD.Load()) / 1e9, c.tokens.Load()
	}
	t.clock.Store(time.Now().UnixNano())
	return t
}

func (t *progressTracker) setRunning(f func() (int, []RunningEpisode)) {
	t.mu.Lock()
	t.running = f
	t.mu.Unlock()
}

// snapshot returns the run's progress at now.
func (t *progressTracker) snapshot(now time.Time, final bool) Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	tl := t.rec.tallyNow()
	p := Progress{Eval: t.eval, Total: t.total, Resumed: t.resumed, Final: final,
		Done: min(t.done.count()-t.notOwned, t.total),
		Pass: tl.pass, Fail: tl.fail, Error: tl.errored, Unscored: tl.unscored,
		InputTokens: tl.inputTokens, OutputTokens: tl.outputTokens, CostUSD: tl.costUSD,
		Elapsed: now.Sub(t.start),
	}
	t.clock.Store(now.UnixNano())
	if t.budget.MaxCostUSD > 0 || t.budget.MaxTokens > 0 {
		b := t.budget
		b.SpentUSD, b.SpentTokens = t.spent()
		p.Budget = &b
	}
	p.ProjectedCostUSD = projectCost(&tl, p.Total-p.Done)
	if t.rateLimits != nil {
		p.RateLimits = t.rateLimits()
	}
	if t.running != nil {
		p.Running, p.Longest = t.running()
		t.peak = max(t.peak, p.Running)
	}
	finished := p.Done - p.Resumed // by this run

	// The recent rate and concurrency: over the samples of the last
	// minute, or since the start when there are none yet.
	from, sumRunning, nRunning := progressSample{at: t.start}, p.Running, 1
	L := len(t.window)
	for k := range t.n {
		s := t.window[(t.head-1-k+L)%L]
		if now.Sub(s.at) > progressWindow {
			break
		}
		from = s
		sumRunning += s.running
		nRunning++
	}
	if final {
		from = progressSample{at: t.start}
	}
	if dt := now.Sub(from.at); dt > 0 {
		p.PerMinute = float64(finished-from.done) / dt.Minutes()
	}
	if t.n == 0 || now.Sub(t.window[(t.head-1+L)%L].at) >= progressWindow/30 {
		t.window[t.head] = progressSample{at: now, done: finished, running: p.Running}
		t.head = (t.head + 1) % L
		t.n = min(t.n+1, L)
	}

	if final {
		return p
	}
	// The concurrency the run had: the mean of what was in flight; when no
	// one says (a Recording without SetRunning), Little's law: the rate
	// times the mean duration.
	concurrency := float64(sumRunning) / float64(nRunning)
	timed := tl.timed()
	if t.running == nil && timed > 0 {
		concurrency = p.PerMinute / float64(time.Minute.Milliseconds()) * tl.durationMS / float64(timed)
	}
	p.ETA, p.Median, p.P90 = estimateETA(&tl, timed, p.Total-p.Done, concurrency, etaAfter(max(t.concurrency, t.peak), t.total))
	return p
}

// etaAfter is how many episodes must have finished before an ETA is
// shown: max(20, 2 × concurrency), so that the first wave has finished
// and its quickest episodes do not stand for all; at most half the run
// (or 20) when the run is smaller than that.
func etaAfter(concurrency int, total int64) int64 {
	need := max(20, 2*min(int64(concurrency), total))
	return min(need, max(20, total/2))
}

// estimateETA estimates the time left for remaining episodes at the given
// concurrency from the durations in t (timed of them), once need have
// finished. It returns the range and the median and p90 it used.
func estimateETA(t *tally, timed, remaining int64, concurrency float64, need int64) (eta ETA, median, p90 time.Duration) {
	if remaining <= 0 || timed < need || timed == 0 {
		return ETA{}, 0, 0
	}
	med, hi := t.quantile(0.5, timed), t.quantile(0.9, timed)
	c := min(max(concurrency, 1), float64(remaining))
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	return ETA{Low: ms(float64(remaining) * med / c), High: ms(float64(remaining) * hi / c)}, ms(med), ms(hi)
}

// ---- the reporter: the callback and the line ----

// progressReporter takes a snapshot every interval and gives it to the
// callback and the printer, from one goroutine; finish takes the last.
type progressReporter struct {
	tr      *progressTracker
	every   time.Duration
	on      func(Progress)
	printer *progressPrinter // nil: no line
	stop    chan struct{}
	stopped chan struct{}
}

// newProgressReporter returns the reporter of tr's progress that cfg asks
// for, not started; nil when nothing would see it.
func newProgressReporter(tr *progressTracker, cfg *Config) *progressReporter {
	var printer *progressPrinter
	if !cfg.Quiet && !goTestQuiet(flag.Lookup) {
		printer = newProgressPrinter(os.Stderr, isTerminal(os.Stderr), terminalWidth(os.Stderr), tr.start)
	}
	if printer == nil && cfg.OnProgress == nil {
		return nil
	}
	every := cfg.ProgressEvery
	if every <= 0 {
		every = DefaultProgressEvery
	}
	return &progressReporter{tr: tr, every: every, on: cfg.OnProgress, printer: printer,
		stop: make(chan struct{}), stopped: make(chan struct{})}
}

// start starts taking snapshots and returns r; nil-safe.
func (r *progressReporter) start() *progressReporter {
	if r != nil {
		go r.loop()
	}
	return r
}

func (r *progressReporter) loop() {
	defer close(r.stopped)
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			r.emit(r.tr.snapshot(now, false), now)
		case <-r.stop:
			now := time.Now()
			r.emit(r.tr.snapshot(now, true), now)
			return
		}
	}
}

func (r *progressReporter) emit(p Progress, now time.Time) {
	if r.on != nil {
		r.on(p)
	}
	if r.printer != nil {
		r.printer.print(p, now)
	}
}

// finish takes the final snapshot, once the run's records are all
// written, and stops. A nil reporter does nothing.
func (r *progressReporter) finish() {
	if r == nil {
		return
	}
	close(r.stop)
	<-r.stopped
}
