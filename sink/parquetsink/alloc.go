package parquetsink

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// recycler is an Arrow allocator that keeps freed buffers for reuse, by
// power-of-two size class. A writer fills and releases buffers of the same
// sizes row group after row group; recycling them saves the garbage
// collector most of its work and the zeroing of fresh memory. Like
// memory.GoAllocator it returns 64-byte-aligned, zeroed buffers. Arrow frees
// a buffer only when no array refers to it any more (memory.Mallocator,
// which returns memory to C, relies on the same), so reuse is safe.
//
// It keeps at most maxFreeBytes of free buffers; the rest is left to the
// garbage collector.
type recycler struct {
	mu        sync.Mutex
	free      [64][][]byte // by class: cap(b) >= 1<<class
	freeBytes int
}

const (
	alignment    = 64
	minClass     = 6        // 64 bytes
	maxFreeBytes = 64 << 20 // never keep more than this idle
)

var _ memory.Allocator = (*recycler)(nil)

func sizeClass(size int) int {
	if size <= 1<<minClass {
		return minClass
	}
	return bits.Len(uint(size - 1))
}

func (a *recycler) Allocate(size int) []byte {
	c := sizeClass(size)
	a.mu.Lock()
	if n := len(a.free[c]); n > 0 {
		b := a.free[c][n-1]
		a.free[c][n-1] = nil
		a.free[c] = a.free[c][:n-1]
		a.freeBytes -= cap(b)
		a.mu.Unlock()
		b = b[:size]
		clear(b)
		return b
	}
	a.mu.Unlock()
	buf := make([]byte, 1<<c+alignment)
	shift := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf))) & (alignment - 1))
	return buf[shift : shift+size : shift+1<<c]
}

func (a *recycler) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		old := len(b)
		b = b[:size]
		if size > old {
			clear(b[old:])
		}
		return b
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

func (a *recycler) Free(b []byte) {
	if cap(b) < 1<<minClass {
		return
	}
	c := bits.Len(uint(cap(b))) - 1 // the largest class b can serve
	a.mu.Lock()
	if a.freeBytes+cap(b) <= maxFreeBytes {
		a.free[c] = append(a.free[c], b[:0])
		a.freeBytes += cap(b)
	}
	a.mu.Unlock()
}
