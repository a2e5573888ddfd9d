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
// is empty) whose keys are the samples' own IDs: it stores no string. It
// is made of parts, each probed on its own, picked by the top bits of an
// ID's hash: a million-sample index is built by one goroutine per part
// group (addOwned, plain stores: each insertion is a cache miss, and
// locked instructions would serialize them). add, by compare-and-swap, is
// safe for concurrent use everywhere.
type sampleIndex struct {
	seed     maphash.Seed
	slots    []atomic.Uint32
	partBits uint   // 2^partBits parts
	partMask uint64 // slots per part - 1
	id       func(i int) string
}

// newSampleIndex returns an empty index for n samples in 2^partBits parts.
func newSampleIndex(n int, partBits uint, id func(i int) string) *sampleIndex {
	size := uint64(1) << max(bits.Len64(uint64(max(n, 1))*2-1), int(partBits)) // load factor ≤ 1/2
	return &sampleIndex{seed: maphash.MakeSeed(), slots: make([]atomic.Uint32, size), partBits: partBits,
		partMask: size>>partBits - 1, id: id}
}

// part returns the part of hash h and the first slot to probe for it.
func (x *sampleIndex) part(h uint64) (part, slot uint64) {
	part = h >> (64 - x.partBits) // with one part, a shift by 64: 0 in Go
	return part, part*(x.partMask+1) + h&x.partMask
}

// next is the slot probed after s, wrapping within the part.
func (x *sampleIndex) next(part, s uint64) uint64 {
	return part*(x.partMask+1) + (s+1)&x.partMask
}

// add inserts position i under its ID and returns the position already
// there when the ID is a duplicate. It is safe for concurrent use.
func (x *sampleIndex) add(i int) (prev int, dup bool) {
	id := x.id(i)
	part, s := x.part(maphash.String(x.seed, id))
	for ; ; s = x.next(part, s) {
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

// addOwned is add for a caller that alone writes the part of sample i's
// ID, which it hashed already: part and s are x.part of that hash. The ID
// is read only if another one is in the way.
func (x *sampleIndex) addOwned(i int, part, s uint64) (prev int, dup bool) {
	var id string
	for ; ; s = x.next(part, s) {
		v := x.slots[s].Load()
		if v == 0 {
			x.slots[s].Store(uint32(i) + 1)
			return 0, false
		}
		if id == "" {
			id = x.id(i)
		}
		if x.id(int(v-1)) == id {
			return int(v - 1), true
		}
	}
}

// get returns the position of the sample with this ID.
func (x *sampleIndex) get(id string) (int, bool) {
	part, s := x.part(maphash.String(x.seed, id))
	for ; ; s = x.next(part, s) {
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
	part, s := x.part(maphash.Bytes(x.seed, id))
	for ; ; s = x.next(part, s) {
		v := x.slots[s].Load()
		if v == 0 {
			return 0, false
		}
		if x.id(int(v-1)) == string(id) {
			return int(v - 1), true
		}
	}
}
