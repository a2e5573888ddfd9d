package eval

// The dataset's identity, added up while a run goes. It is the sum of a
// hash of each sample's ID and input JSON (manifest.IdentitySum), so each
// sample is hashed once by whoever claims it first: a worker, from the
// input it encoded for its record anyway, or the run, for the samples no
// worker ran (those the log already held, those of other shards, those
// cancelled). A million-sample run then encodes its inputs once, not twice.

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval/manifest"
)

type identityTracker struct {
	inputs  *inputDigests // kept when a coordinator checks its workers' records
	n       int
	claimed []atomic.Uint64 // one bit per sample: hashed, or being hashed
	mu      sync.Mutex
	sum     manifest.IdentitySum
}

func newIdentityTracker(n int) *identityTracker {
	return &identityTracker{n: n, claimed: make([]atomic.Uint64, (n+63)/64)}
}

// claim reports whether the caller is the first to claim sample i: it then
// hashes it.
func (t *identityTracker) claim(i int) bool {
	bit := uint64(1) << (i % 64)
	w := &t.claimed[i/64]
	// A plain load first: most claims of a sample claimed already (later
	// epochs, the final pass over every sample) need no locked instruction.
	return w.Load()&bit == 0 && w.Or(bit)&bit == 0
}

func (t *identityTracker) add(s manifest.IdentitySum) {
	t.mu.Lock()
	t.sum.Merge(s)
	t.mu.Unlock()
}

// inputDigests are a 64-bit digest of each sample's input, as records
// hold it, under a seed of this process: a coordinator checks that a
// worker's record carries its sample's input (8 bytes a sample).
type inputDigests struct {
	seed    maphash.Seed
	digests []uint64
}

func newInputDigests(n int) *inputDigests {
	return &inputDigests{seed: maphash.MakeSeed(), digests: make([]uint64, n)}
}

func (d *inputDigests) of(input []byte) uint64 { return maphash.Bytes(d.seed, input) }

// hashSamples hashes the samples that want(i) and nobody claimed yet. A
// streamed dataset is read again only if there are any.
func hashSamples[T any](ctx context.Context, t *identityTracker, samples *sampleTable[T], want func(i int) bool) error {
	if samples.streamed() && t.allClaimed() {
		return nil
	}
	var enc inputEncoder
	var sum manifest.IdentitySum
	var scratch []byte
	err := samples.each(ctx, func(i int, s *dataset.Sample[T]) bool {
		if want(i) && t.claim(i) {
			in := enc.encode(s.Input)
			scratch = sum.Add(s.ID, in, scratch)
			if t.inputs != nil {
				t.inputs.digests[i] = t.inputs.of(in)
			}
		}
		return true
	})
	t.add(sum)
	return err
}

// allClaimed reports whether every sample is claimed.
func (t *identityTracker) allClaimed() bool {
	for i := range t.claimed {
		all := ^uint64(0)
		if rest := t.n - i*64; rest < 64 {
			all = 1<<rest - 1
		}
		if t.claimed[i].Load() != all {
			return false
		}
	}
	return true
}

// workerIdentity is a worker's part of the identity: the samples it hashed.
type workerIdentity struct {
	sum     manifest.IdentitySum
	scratch []byte
}

// hashSettled adds the sample of a record a worker commits, if nobody has.
func (s *scheduler[T, O]) hashSettled(w *workerState[T], sample int, input []byte) {
	if s.ident != nil && s.ident.claim(sample) {
		w.ident.scratch = w.ident.sum.Add(s.samples.id(sample), input, w.ident.scratch)
	}
}

// mergeIdentity adds up the parts of the workers still registered once the
// run's workers are done (an abandoned one may never return); those that
// return later add nothing.
func (s *scheduler[T, O]) mergeIdentity() {
	if s.ident == nil {
		return
	}
	s.workersMu.Lock()
	defer s.workersMu.Unlock()
	for _, w := range s.workers {
		s.ident.add(w.ident.sum)
	}
	s.identMerged = true
}
