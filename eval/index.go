package eval

// The sample index: sample ID → position in the run's samples. A run of a
// million samples looks IDs up on resume and for every result a
// coordinator commits; a map[string]int of them holds 56 MB, this table 8.

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// sampleIndex is an open-addressing hash table of positions (plus one; 0
// is empty) whose keys are the samples' own IDs: it stores no string.
// Slots are set by compare-and-swap and never cleared, so several
// goroutines may add at once (a million-sample index is built on every
// core: each insertion is a cache miss or two).
type sampleIndex struct {
	seed  maphash.Seed
	slots []atomic.Uint32
	mask  uint64
	id    func(i int) string
}

func newSampleIndex(n int, id func(i int) string) *sampleIndex {
	size := uint64(1) << bits.Len64(uint64(max(n, 1))*2-1) // load factor ≤ 1/2
	return &sampleIndex{seed: maphash.MakeSeed(), slots: make([]atomic.Uint32, size), mask: size - 1, id: id}
}

// add inserts position i under its ID and returns the position already
// there when the ID is a duplicate. It is safe for concurrent use.
func (x *sampleIndex) add(i int) (prev int, dup bool) {
	id := x.id(i)
	for s := maphash.String(x.seed, id) & x.mask; ; s = (s + 1) & x.mask {
		v := x.slots[s].Load()
		if v == 0 {
			if x.slots[s].CompareAndSwap(0, uint32(i)+1) {
				return 0, false
			}
			v = x.slots[s].Load() // another goroutine took the slot: maybe for this ID
		}
		if x.id(int(v-1)) == id {
			return int(v - 1), true
		}
	}
}

// get returns the position of the sample with this ID.
func (x *sampleIndex) get(id string) (int, bool) {
	for s := maphash.String(x.seed, id) & x.mask; ; s = (s + 1) & x.mask {
		v := x.slots[s].Load()
		if v == 0 {
			return 0, false
		}
		if x.id(int(v-1)) == id {
			return int(v - 1), true
		}
	}
}

// getBytes is get for an ID held in a byte slice, without copying it.
func (x *sampleIndex) getBytes(id []byte) (int, bool) {
	for s := maphash.Bytes(x.seed, id) & x.mask; ; s = (s + 1) & x.mask {
		v := x.slots[s].Load()
		if v == 0 {
			return 0, false
		}
		if x.id(int(v-1)) == string(id) {
			return int(v - 1), true
		}
	}
}
