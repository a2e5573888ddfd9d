package eval

// The run's samples as the engine holds them. A dataset.Slice is in
// memory already: the engine indexes it where it is. Any other dataset is
// streamed: read once to check and index its IDs, keeping only each
// sample's ID and tags, then read again, in order, as the workers claim
// its samples, each input held from its sample's first claim to its last
// episode. A million-sample dataset then costs the engine its IDs (~11
// bytes a sample for short ones) beside the index and report state every
// run has, not the whole of its inputs.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"iter"
	"maps"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/proctor-evals/proctor/dataset"
)

// sampleTable is a run's dataset: every sample's ID and tags, its index
// by ID, and the inputs: all in memory, or read again from src.
type sampleTable[T any] struct {
	all   []dataset.Sample[T] // in memory; nil when streamed
	index *sampleIndex        // ID → position

	// Streamed: src, read again; the IDs in one string, ends[i] the end of
	// the i-th; tags nil until some sample has tags.
	src  dataset.Dataset[T]
	ids  string
	ends []uint32
	tags []map[string]string

	// resources are the distinct sandbox resources its samples' specs ask
	// for (sandbox.Resources.String), sorted; nil without a sandbox.
	resources []string
	// digests are what their images resolved to, as provisioned.
	digests imageDigests
}

func (t *sampleTable[T]) len() int {
	if t.src != nil {
		return len(t.ends)
	}
	return len(t.all)
}

func (t *sampleTable[T]) streamed() bool { return t.src != nil }

func (t *sampleTable[T]) id(i int) string {
	if t.src == nil {
		return t.all[i].ID
	}
	start := uint32(0)
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.ids[start:t.ends[i]]
}

func (t *sampleTable[T]) tagsOf(i int) map[string]string {
	if t.src == nil {
		return t.all[i].Tags
	}
	if i < len(t.tags) {
		return t.tags[i]
	}
	return nil
}

// each calls f with every sample in order (a streamed dataset is read
// again) until f returns false.
func (t *sampleTable[T]) each(ctx context.Context, f func(i int, s *dataset.Sample[T]) bool) (err error) {
	if t.src == nil {
		for i := range t.all {
			if !f(i, &t.all[i]) {
				break
			}
		}
		return nil
	}
	defer recoverDataset(&err, rereadError)
	i := 0
	for s, err := range t.src.Samples(ctx) {
		if err = cmp.Or(err, t.same(i, &s)); err != nil {
			return rereadError(err)
		}
		if !f(i, &s) {
			return nil
		}
		if i++; i == t.len() {
			return nil // samples appended since (a growing file) are not this run's
		}
	}
	if i != t.len() {
		return rereadError(fmt.Errorf("it ended after %d samples, %d the first time", i, t.len()))
	}
	return nil
}

// same checks that sample i, read again, is the one read first.
func (t *sampleTable[T]) same(i int, s *dataset.Sample[T]) error {
	if s.ID != t.id(i) {
		return fmt.Errorf("sample %d is %q, %q the first time", i+1, s.ID, t.id(i))
	}
	return nil
}

// recoverDataset turns a panic of the dataset's iterator into *err: a
// dataset that panics costs the run, as any bad dataset does, not the
// process.
func recoverDataset(err *error, wrap func(error) error) {
	if p := recover(); p != nil {
		*err = wrap(fmt.Errorf("it panicked: %v", p))
	}
}

func readError(err error) error { return fmt.Errorf("eval: reading dataset: %w", err) }

func rereadError(err error) error {
	return fmt.Errorf("eval: reading the dataset again: %w (a dataset must yield the same samples each time it is read; dataset.Collect reads one into memory)", err)
}

// loadSamples reads the dataset and checks it before anything runs: a
// dataset.Slice, or any dataset unless stream, into memory; any other
// streamed (its IDs and tags kept).
//
// resources, when set, names the sandbox resources a sample's spec asks
// for: the table keeps the distinct ones, found in the same pass.
func loadSamples[T any](ctx context.Context, d dataset.Dataset[T], stream bool, resources func(*dataset.Sample[T]) string) (*sampleTable[T], error) {
	var seen map[string]bool
	var visit func(*dataset.Sample[T])
	if resources != nil {
		seen = map[string]bool{}
		visit = func(s *dataset.Sample[T]) { seen[resources(s)] = true }
	}
	t, err := readSamples(ctx, d, stream, visit)
	if err != nil {
		return nil, err
	}
	if seen != nil {
		t.resources = slices.Sorted(maps.Keys(seen))
	}
	return t, nil
}

// readSamples is loadSamples, calling visit (when set) with every sample.
func readSamples[T any](ctx context.Context, d dataset.Dataset[T], stream bool, visit func(*dataset.Sample[T])) (_ *sampleTable[T], err error) {
	defer recoverDataset(&err, readError)
	visitAll := func(t *sampleTable[T], err error) (*sampleTable[T], error) {
		if err == nil && visit != nil {
			for i := range t.all {
				visit(&t.all[i])
			}
		}
		return t, err
	}
	if s, ok := d.(dataset.Slice[T]); ok {
		return visitAll(checkSamples(s))
	}
	if !stream {
		var samples []dataset.Sample[T]
		for s, err := range d.Samples(ctx) {
			if err != nil {
				return nil, readError(err)
			}
			samples = append(samples, s)
		}
		return visitAll(checkSamples(samples))
	}
	t := &sampleTable[T]{src: d}
	var ids []byte
	var tags tagInterner
	for s, err := range d.Samples(ctx) {
		if err != nil {
			return nil, readError(err)
		}
		if len(ids)+len(s.ID) > math.MaxUint32 {
			return nil, errors.New("eval: the dataset's sample IDs add up to more than 4 GiB")
		}
		if len(s.Tags) > 0 {
			if t.tags == nil {
				t.tags = make([]map[string]string, len(t.ends), cap(t.ends))
			}
			t.tags = append(t.tags, tags.intern(s.Tags))
		} else if t.tags != nil {
			t.tags = append(t.tags, nil)
		}
		if visit != nil {
			visit(&s)
		}
		ids = append(ids, s.ID...)
		t.ends = append(t.ends, uint32(len(ids)))
	}
	t.ids = string(ids)
	return t, t.check()
}

// tagInterner keeps one map per distinct set of tags: a million samples
// tagged from a few values hold a few maps, not a million.
type tagInterner struct {
	seen map[string]map[string]string
	keys []string
	buf  []byte
}

func (in *tagInterner) intern(tags map[string]string) map[string]string {
	in.keys = in.keys[:0]
	for k := range tags {
		in.keys = append(in.keys, k)
	}
	slices.Sort(in.keys)
	in.buf = in.buf[:0]
	for _, k := range in.keys {
		in.buf = strconv.AppendQuote(in.buf, k)
		in.buf = strconv.AppendQuote(in.buf, tags[k])
	}
	if m, ok := in.seen[string(in.buf)]; ok {
		return m
	}
	if in.seen == nil {
		in.seen = map[string]map[string]string{}
	}
	in.seen[string(in.buf)] = tags
	return tags
}

// checkSamples checks and indexes samples held in memory.
func checkSamples[T any](samples []dataset.Sample[T]) (*sampleTable[T], error) {
	t := &sampleTable[T]{all: samples}
	return t, t.check()
}

// check rejects an empty dataset, bad IDs and duplicate IDs, and indexes
// the samples by ID. A large dataset is checked and indexed on every core;
// when that finds a bad sample, the serial scan names the first one, as it
// always has.
func (t *sampleTable[T]) check() error {
	n := t.len()
	if n == 0 {
		return errors.New("eval: the dataset is empty")
	}
	if x, ok := indexInParallel(n, t.id); ok {
		t.index = x
		return nil
	}
	seen := newSampleIndex(n, 0, t.id)
	for i := range n {
		id := t.id(i)
		if err := dataset.CheckID(id); err != nil {
			return fmt.Errorf("eval: dataset sample %d: %w", i+1, err)
		}
		if prev, dup := seen.add(i); dup {
			return fmt.Errorf("eval: duplicate sample ID %q (samples %d and %d): IDs key the log and resume", id, prev+1, i+1)
		}
	}
	t.index = seen
	return nil
}

// parallelIndexMin is the dataset size from which indexInParallel uses
// more than one goroutine.
const parallelIndexMin = 1 << 16

// indexInParallel checks and indexes n samples on every core; ok is false
// for a small dataset or one with a bad sample. First each goroutine
// checks and hashes a range of samples; then each inserts, from the hashes
// read in order, the samples of the parts of the index it owns (plain
// stores, no lock or CAS: each insertion is a cache miss, and the misses of
// one goroutine overlap).
func indexInParallel(n int, id func(int) string) (x *sampleIndex, ok bool) {
	workers := min(runtime.GOMAXPROCS(0), n/parallelIndexMin, 16)
	if workers < 2 {
		return nil, false
	}
	x = newSampleIndex(n, uint(bits.Len(uint(workers-1))), id)
	hashes := make([]uint64, n)
	var bad atomic.Bool
	inParallel := func(f func(w int)) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() { f(w) })
		}
		wg.Wait()
	}
	chunk := (n + workers - 1) / workers
	inParallel(func(w int) {
		for i := w * chunk; i < min((w+1)*chunk, n); i++ {
			id := id(i)
			if dataset.CheckID(id) != nil {
				bad.Store(true)
				return
			}
			hashes[i] = maphash.String(x.seed, id)
		}
	})
	if bad.Load() {
		return nil, false
	}
	inParallel(func(w int) {
		for i, h := range hashes {
			part, s := x.part(h)
			if int(part)%workers != w {
				continue
			}
			if _, dup := x.addOwned(i, part, s); dup || i&1023 == 0 && bad.Load() {
				bad.Store(true)
				return
			}
		}
	})
	return x, !bad.Load()
}

// sampleStream reads a streamed dataset again as the workers claim its
// samples, which they do in order. One worker at a time reads, a few
// samples past the one it needs; every sample read is held, with the count
// of its episodes left to settle, until the last of them settles. Held
// samples sit in a ring indexed by position, found and let go of without
// a lock; one still held when its slot comes round again (an episode that
// outlives the ring's turn) goes to an overflow map instead.
type sampleStream[T any] struct {
	t       *sampleTable[T]
	pending func(i int) int // the episodes of sample i the run will settle
	ring    []atomic.Pointer[heldSample[T]]
	readTo  atomic.Int64 // samples read and placed so far
	ctx     context.Context
	fed     bool // a worker's (Work): samples are held by hold, in the order work arrives

	// A worker's: how often its work went behind the reading, and, past
	// fedRereads, the whole dataset in memory (work in a random order: a
	// sequential gate's).
	rereads int
	all     []dataset.Sample[T]

	mu       sync.Mutex // reading; overflow
	next     func() (dataset.Sample[T], error, bool)
	stop     func()
	read     int
	overflow map[int]*heldSample[T]
	err      error // sticky
}

type heldSample[T any] struct {
	s    dataset.Sample[T]
	pos  int
	left atomic.Int64 // episodes not settled yet
}

// readAhead is how far the reading goes past the latest claim: the next
// workers' claims find their samples read, without taking the lock. A
// worker whose claim finds the lead below half of it reads the next
// stretch, if no other worker is reading, before it runs its own
// episode, so that reading (serial: one iterator) overlaps the episodes
// and claims seldom wait for it.
const readAhead = 64

func newSampleStream[T any](ctx context.Context, t *sampleTable[T], pending func(i int) int, concurrency int) *sampleStream[T] {
	next, stop := iter.Pull2(t.src.Samples(ctx))
	size := 1 << bits.Len(uint(2*(concurrency+readAhead)))
	return &sampleStream[T]{t: t, pending: pending, next: next, stop: stop, ctx: ctx,
		ring: make([]atomic.Pointer[heldSample[T]], size), overflow: map[int]*heldSample[T]{}}
}

// newFedStream is a worker's stream: its work arrives as a coordinator
// queued it, in dataset order but for the samples other workers take, so
// a sample is read when its work arrives (hold), the samples between
// skipped, and held until its episodes settle. Work for a sample behind
// the reading (queued again, redelivered) reads the dataset again from
// its start; past fedRereads such readings, the worker reads it into
// memory once (its work comes in another order).
func newFedStream[T any](ctx context.Context, t *sampleTable[T], concurrency int) *sampleStream[T] {
	st := newSampleStream(ctx, t, func(int) int { return 0 }, concurrency)
	st.fed = true
	return st
}

// hold reads sample i, if it is not held, and holds it for n more
// episodes; a worker's feeder calls it before it hands them out.
func (st *sampleStream[T]) hold(i, n int) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if h := st.find(i); h != nil {
		for l := h.left.Load(); l > 0; l = h.left.Load() {
			if h.left.CompareAndSwap(l, l+int64(n)) {
				return nil
			}
		}
		// Its last episode settled meanwhile: it is let go of; read it again.
	}
	if st.err != nil {
		return st.err
	}
	if st.all == nil && i < st.read {
		st.stop()
		st.next, st.stop = iter.Pull2(st.t.src.Samples(st.ctx))
		st.read = 0
		if st.rereads++; st.rereads > fedRereads {
			st.all = make([]dataset.Sample[T], 0, st.t.len())
		}
	}
	if st.all != nil {
		for st.read < st.t.len() && st.err == nil { // once
			s, err := st.readNext()
			if err != nil {
				return err
			}
			st.all = append(st.all, s)
		}
		st.place(i, st.all[i], n)
		return nil
	}
	for st.read <= i {
		s, err := st.readNext()
		if err != nil {
			return err
		}
		if st.read-1 == i {
			st.place(i, s, n)
		}
	}
	return nil
}

// fedRereads is how often a worker reads its dataset again for work behind
// its reading before it reads it into memory.
const fedRereads = 2

// readNext reads the sample at st.read; st.mu is held.
func (st *sampleStream[T]) readNext() (dataset.Sample[T], error) {
	s, err, ok := st.pull()
	if !ok {
		err = fmt.Errorf("it ended after %d samples, %d the first time", st.read, st.t.len())
	}
	if err = cmp.Or(err, st.t.same(st.read, &s)); err != nil {
		st.err = rereadError(err)
		return s, st.err
	}
	st.read++
	return s, nil
}

// place holds s, sample i, for n episodes; st.mu is held.
func (st *sampleStream[T]) place(i int, s dataset.Sample[T], n int) {
	h := &heldSample[T]{s: s, pos: i}
	h.left.Store(int64(n))
	if !st.ring[i&(len(st.ring)-1)].CompareAndSwap(nil, h) {
		st.overflow[i] = h
	}
}

// find returns the held sample i, or nil; st.mu is held.
func (st *sampleStream[T]) find(i int) *heldSample[T] {
	if h := st.ring[i&(len(st.ring)-1)].Load(); h != nil && h.pos == i {
		return h
	}
	return st.overflow[i]
}

// get returns sample i, reading the dataset up to it if need be. An error
// means the dataset does not read the same again: the run cannot go on.
func (st *sampleStream[T]) get(i int) (*heldSample[T], error) {
	if st.fed {
		st.mu.Lock()
		defer st.mu.Unlock()
		if h := st.find(i); h != nil {
			return h, nil
		}
		return nil, cmp.Or(st.err, fmt.Errorf("eval: internal error: sample %d claimed before it was held", i+1))
	}
	if readTo := int(st.readTo.Load()); i < readTo {
		if readTo-i < readAhead/2 && readTo < st.t.len() && st.mu.TryLock() {
			st.readThrough(min(i+readAhead, st.t.len()-1))
			st.mu.Unlock()
		}
		if h := st.ring[i&(len(st.ring)-1)].Load(); h != nil && h.pos == i {
			return h, nil
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.read <= i {
		st.readThrough(min(i+readAhead, st.t.len()-1))
	}
	if h := st.ring[i&(len(st.ring)-1)].Load(); h != nil && h.pos == i {
		return h, nil
	}
	if h := st.overflow[i]; h != nil {
		return h, nil
	}
	if st.err == nil {
		st.err = fmt.Errorf("eval: internal error: sample %d claimed with no episode pending", i+1)
	}
	return nil, st.err
}

// readThrough reads the samples up to position last, under st.mu.
func (st *sampleStream[T]) readThrough(last int) {
	for st.err == nil && st.read <= last {
		s, err, ok := st.pull()
		if !ok {
			err = fmt.Errorf("it ended after %d samples, %d the first time", st.read, st.t.len())
		}
		if err = cmp.Or(err, st.t.same(st.read, &s)); err != nil {
			st.err = rereadError(err)
			break
		}
		if n := st.pending(st.read); n > 0 {
			h := &heldSample[T]{s: s, pos: st.read}
			h.left.Store(int64(n))
			if !st.ring[st.read&(len(st.ring)-1)].CompareAndSwap(nil, h) {
				st.overflow[st.read] = h
			}
		}
		st.read++
	}
	st.readTo.Store(int64(st.read))
}

// pull reads the next sample; a dataset that panics ends the run with an
// error, as it would have ended its first reading, not the process.
func (st *sampleStream[T]) pull() (s dataset.Sample[T], err error, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			err, ok = fmt.Errorf("it panicked: %v", p), true
		}
	}()
	return st.next()
}

// settled lets go of h once the last of its episodes has settled.
func (st *sampleStream[T]) settled(h *heldSample[T]) {
	if h.left.Add(-1) != 0 {
		return
	}
	if !st.ring[h.pos&(len(st.ring)-1)].CompareAndSwap(h, nil) {
		st.mu.Lock()
		if st.overflow[h.pos] == h { // a worker's sample may be held again since
			delete(st.overflow, h.pos)
		}
		st.mu.Unlock()
	}
}

func (st *sampleStream[T]) close() {
	st.mu.Lock()
	st.stop()
	st.mu.Unlock()
}
