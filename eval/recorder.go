package eval

// The recorder: the single writer of a run. It owns the log, the transcript
// store, the sinks, the exactly-once index and the aggregator. Workers do
// the expensive part of recording in parallel (the transcript, encoding
// the record's line); the recorder's goroutine only appends lines, marks
// keys and folds records into the report, so that the work every record
// passes through serially stays well under a microsecond.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

type recorder struct {
	log         *jsonl.Writer // nil without a log
	transcripts *jsonl.Writer
	sinks       []sink.Sink
	done        *doneSet     // exactly once: a key already marked is dropped
	epochs      int64        // slots per sample (variants × epochs)
	plan        *variantPlan // a record's slot
	elim        *eliminator  // fed every record; nil without elimination
	agg         *report.Aggregator
	fail        func(error) // stops the run when results cannot be recorded

	queue   commitQueue
	batch   []*finished   // the recorder's, reused
	mu      sync.Mutex    // guards notFull's waits
	notFull *sync.Cond    // workers wait on it while maxQueued records wait
	waiting atomic.Int32  // workers waiting on notFull
	wake    chan struct{} // a batch is waiting (cap 1)
	closing atomic.Bool
	stopped chan struct{} // the goroutine has drained everything

	ingested chan struct{} // closed once a resumed log's records are folded in
	// window, for a sequential gate, learns how far the claim order's
	// finished prefix reaches (sequential.go); nil without one.
	window *claimWindow
	gates  *variantGates // a sequential gate per variant; nil otherwise
	// left counts, per variant, its episodes without a record, with gates
	// per variant or elimination (the recorder's goroutine's, from its
	// start): the run is complete once every variant is retired or has
	// none left.
	left []int64

	err        error // the first write error; later records are dropped
	duplicates int   // records of keys already committed, dropped

	// complete is closed once every episode of the run is done; committed
	// counts what this run recorded (not what a resumed log held).
	complete     chan struct{}
	completeOnce sync.Once
	committed    committedStats

	// For progress (progress.go): tally is folded by the recorder's
	// goroutine alone, in plain fields; shared hands out copies on request.
	tally  tally
	shared tallyBox
}

// committedStats are the records a run committed, for stops decided from
// them (a coordinator's budget and error rate).
type committedStats struct {
	records, errors atomic.Int64
	costNanoUSD     atomic.Int64
	tokens          atomic.Int64
}

func newRecorder(done *doneSet, plan *variantPlan, agg *report.Aggregator, fail func(error)) *recorder {
	r := &recorder{done: done, epochs: int64(plan.slots()), plan: plan, agg: agg, fail: fail,
		wake: make(chan struct{}, 1), stopped: make(chan struct{}), complete: make(chan struct{}), ingested: make(chan struct{})}
	r.notFull = sync.NewCond(&r.mu)
	return r
}

// finishedPool recycles finished episodes and their buffers once the
// recorder has written them: four allocations less per episode. A new
// one's buffers share one allocation (the pool drops what it holds at
// every other GC cycle, so new ones are made all through a run); one that
// outgrows its part gets one of its own.
var finishedPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 768)
	return &finished{line: b[0:0:512], input: b[512:512:640], output: b[640:640:768]}
}}

func getFinished() *finished { return finishedPool.Get().(*finished) }

// maxKeptBuffer bounds the buffers kept for reuse: one larger is dropped.
const maxKeptBuffer = 64 << 10

// putFinished recycles f. It drops only what may be large: every other
// field is overwritten before f is used again (buildRecord writes a whole
// record), so clearing them here would only cost the recorder's goroutine
// time.
func putFinished(f *finished) {
	if cap(f.line) > maxKeptBuffer {
		f.line = nil // a huge record's buffer is not worth keeping
	}
	if cap(f.input) > maxKeptBuffer {
		f.input = nil
	}
	if cap(f.output) > maxKeptBuffer {
		f.output = nil
	}
	f.line, f.events = f.line[:0], nil
	finishedPool.Put(f)
}

// maxQueued bounds the records waiting for the recorder: workers that
// outrun it wait, so memory does not grow with the episodes of a run.
const maxQueued = 4096

// start runs the recorder's goroutine; ingest, when set, first folds the
// records a resumed log already held into the report, while new episodes
// already run.
func (r *recorder) start(ingest func()) {
	go func() {
		defer close(r.stopped)
		r.countLeft()
		if ingest != nil {
			ingest()
		}
		r.advanceWindow()
		r.checkComplete() // a resumed log may hold every episode
		close(r.ingested)
		r.loop()
	}()
}

// commitQueue is a ring of maxQueued slots: a worker reserves the next
// free slot with one compare-and-swap and fills it; the recorder reads the
// slots in order. No lock on the path of every record (a mutex there cost
// two contended atomics per record), and no linked list: the recorder
// reads consecutive slots without waiting for one load to learn the next
// address (a list's walk was a cache miss per record, in the one goroutine
// every record passes through). A slot's seq says which reservation filled it,
// so slots are never cleared. Padding keeps the workers' counter, the
// recorder's position and each slot on cache lines of their own.
type commitQueue struct {
	_        [64]byte
	tail     atomic.Uint64 // slots reserved by workers
	_        [56]byte
	head     atomic.Uint64 // slots read by the recorder, published after each batch
	sleeping atomic.Bool   // the recorder waits on wake for the slot at head
	_        [48]byte
	slots    [maxQueued]commitSlot
}

type commitSlot struct {
	seq atomic.Uint64 // reservation + 1 of the finished episode in f
	f   *finished
	_   [48]byte
}

// ready reports whether the slot at head is filled.
func (q *commitQueue) ready(head uint64) bool {
	return q.slots[head%maxQueued].seq.Load() == head+1
}

// commit is called by workers, concurrently: it stores the transcript,
// encodes the record and queues it for the recorder's goroutine.
func (r *recorder) commit(f *finished) {
	if r.transcripts != nil && len(f.events) > 0 {
		line, err := json.Marshal(harness.Transcript{RunID: f.rec.RunID, SampleID: f.rec.SampleID, Epoch: f.rec.Epoch, Attempt: f.rec.Attempt, Events: f.events})
		if err == nil {
			var off int64
			off, err = r.transcripts.WriteLine(line)
			f.rec.Transcript = transcriptLink(r.transcripts.Path(), off)
		}
		if err != nil {
			r.fail(fmt.Errorf("eval: recording a transcript: %w", err))
			return
		}
	}
	f.events = nil
	if r.log != nil {
		f.line = f.rec.AppendJSON(f.line[:0])
	}
	// Reserve a slot only when the ring has room, so that no worker holds
	// a slot it cannot fill yet: the recorder reads slots in order, and a
	// waiting worker's slot would hold back everyone's after it.
	q := &r.queue
	var i uint64
	for {
		i = q.tail.Load()
		if i >= q.head.Load()+maxQueued {
			r.waitNotFull()
			continue
		}
		if q.tail.CompareAndSwap(i, i+1) {
			break
		}
	}
	slot := &q.slots[i%maxQueued]
	slot.f = f
	slot.seq.Store(i + 1) // publishes f
	if q.sleeping.Load() && q.sleeping.CompareAndSwap(true, false) {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// waitNotFull waits until the ring has room. A worker counts itself
// waiting before it looks at the recorder's position again, so the
// recorder, which publishes its position before it looks for waiters,
// either sees it or was seen to have moved on.
func (r *recorder) waitNotFull() {
	r.mu.Lock()
	r.waiting.Add(1)
	for q := &r.queue; q.tail.Load() >= q.head.Load()+maxQueued; {
		r.notFull.Wait()
	}
	r.waiting.Add(-1)
	r.mu.Unlock()
}

// take returns the records filled in order from the recorder's position,
// up to the first slot reserved but not filled yet.
func (r *recorder) take() []*finished {
	q := &r.queue
	batch := r.batch[:0]
	head := q.head.Load()
	for ; q.ready(head); head++ {
		batch = append(batch, q.slots[head%maxQueued].f)
	}
	q.head.Store(head) // the slots are free again: after the reads above
	if r.waiting.Load() > 0 {
		r.mu.Lock()
		r.notFull.Broadcast()
		r.mu.Unlock()
	}
	r.batch = batch
	return batch
}

func (r *recorder) loop() {
	ctx := context.Background() // sinks flush what they were given, whatever happened to the run
	for {
		closing := r.closing.Load() // before take: nothing is queued after closing
		batch := r.take()
		for _, f := range batch {
			r.write(ctx, f)
			putFinished(f)
		}
		if r.shared.want.Load() {
			r.shared.publish(&r.tally)
		}
		clear(batch)
		if len(batch) > 0 {
			continue
		}
		if closing {
			return
		}
		// Sleep until a worker fills the slot at head (or close or
		// progress wakes us): say so first, then look again, so that a
		// worker filling it now either is seen or sees that we sleep.
		r.queue.sleeping.Store(true)
		if r.queue.ready(r.queue.head.Load()) || r.closing.Load() {
			r.queue.sleeping.Store(false)
			continue
		}
		<-r.wake
		r.queue.sleeping.Store(false)
	}
}

func (r *recorder) write(ctx context.Context, f *finished) {
	if r.err != nil {
		return // stopping: results that cannot be recorded are not kept
	}
	slot := f.slot // checked by whoever made f
	if !r.done.add(int64(f.sample)*r.epochs + int64(slot)) {
		r.duplicates++
		return
	}
	if r.log != nil {
		if _, err := r.log.WriteLine(f.line); err != nil {
			r.setErr(err)
			return
		}
	}
	for _, s := range r.sinks {
		if err := s.Write(ctx, f.rec); err != nil {
			r.setErr(err)
			return
		}
	}
	r.agg.AddAt(f.sample, &f.rec)
	if r.elim != nil {
		r.elim.add(f.sample, slot, &f.rec)
	}
	if r.left != nil {
		r.left[slot/r.plan.epochs]--
	}
	r.advanceWindow()
	r.tally.add(&f.rec)
	r.committed.records.Add(1)
	if f.rec.Status == sink.Error {
		r.committed.errors.Add(1)
	}
	if f.rec.CostUSD > 0 {
		r.committed.costNanoUSD.Add(int64(f.rec.CostUSD * 1e9))
	}
	if n := f.rec.InputTokens + f.rec.OutputTokens; n > 0 {
		r.committed.tokens.Add(n)
	}
	r.checkComplete()
}

// advanceWindow moves the claim window to the finished prefix of the
// claim order its tests have folded: elimination's (claims that outran
// its tests would run the episodes an elimination is about to save), the
// shortest of the variants' gates still undecided, the shorter of the two
// with both, or the run's sequential gate's.
func (r *recorder) advanceWindow() {
	switch {
	case r.elim != nil:
		p := r.elim.prefix
		if r.gates != nil {
			p = min(p, r.gates.prefix())
		}
		r.window.advanceTo(int64(p) * r.epochs)
	case r.gates != nil:
		r.window.advanceTo(int64(r.gates.prefix()) * r.epochs)
	default:
		r.window.advance(r.agg, r.epochs)
	}
}

// checkComplete closes complete once every episode is done, or, with
// gates per variant or elimination, once every variant has decided, was
// eliminated or has no episode left (a coordinator then ends its run as
// one process's runs out of claims).
func (r *recorder) checkComplete() {
	if r.done.count() >= r.done.total || r.nothingLeft() {
		r.completeOnce.Do(func() { close(r.complete) })
	}
}

// countLeft counts each variant's episodes without a record, with gates
// per variant or elimination: before the recorder folds anything in.
func (r *recorder) countLeft() {
	if r.gates == nil && r.elim == nil {
		return
	}
	r.left = make([]int64, len(r.plan.names))
	for i := range r.done.total {
		if !r.done.has(i) {
			r.left[int(i%r.epochs)/r.plan.epochs]++
		}
	}
}

// nothingLeft reports whether every variant is retired (its gate decided,
// or eliminated) or fully recorded. Once every variant's gate decided,
// the run is decided (run.decided), not complete.
func (r *recorder) nothingLeft() bool {
	if r.left == nil || r.gates != nil && r.gates.pending == 0 {
		return false
	}
	for v, n := range r.left {
		if n > 0 && !r.gates.outVariant(v) && !r.elim.outVariant(v) {
			return false
		}
	}
	return true
}

func (r *recorder) setErr(err error) {
	r.err = err
	r.fail(fmt.Errorf("eval: recording results: %w", err))
}

// drain waits for every queued record to be taken: folded into the
// report and written (not yet synced).
func (r *recorder) drain() {
	r.closing.Store(true)
	select {
	case r.wake <- struct{}{}:
	default:
	}
	<-r.stopped
}

// close drains the recorder, then flushes and closes the log, the
// transcript store and the sinks.
func (r *recorder) close(ctx context.Context) error {
	r.drain()
	errs := []error{r.err}
	if r.log != nil {
		errs = append(errs, r.log.Close(ctx), r.transcripts.Close(ctx))
	}
	for _, s := range r.sinks {
		errs = append(errs, s.Close(ctx))
	}
	return errors.Join(errs...)
}

// ingestLog folds the first size bytes of the log at path — the records a
// resumed run already held — into the report. Records of samples or
// epochs this run does not have stay in the log and are counted apart.
func (r *recorder) ingestLog(path string, size int64, index func(id string) (int, bool)) (resumed, excluded int, err error) {
	f, err := safeopen.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	for rec, err := range jsonl.Read(io.LimitReader(f, size), path) {
		if err != nil {
			return resumed, excluded, err
		}
		i, ok := index(rec.SampleID)
		slot, known := r.plan.recordSlot(&rec)
		if !ok || !known {
			excluded++
			continue
		}
		r.agg.AddAt(i, &rec)
		r.elim.add(i, slot, &rec)
		r.tally.add(&rec)
		resumed++
	}
	return resumed, excluded, nil
}
