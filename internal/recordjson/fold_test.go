package recordjson

import (
	"hash/maphash"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestSampleTable: every ID added is found at its index, whatever its
// length (whole in the slot's head, or with a tail) and however many share
// a head; an ID not added is not found.
func TestSampleTable(t *testing.T) {
	if n := unsafe.Sizeof(sampleSlot{}); n != 32 {
		t.Errorf("a slot is %d bytes, want 32 (two a cache line)", n)
	}
	var ids []string
	for i := range 5000 {
		n := strconv.Itoa(i)
		ids = append(ids, n, "sample-"+n, strings.Repeat("x", 12)+n, strings.Repeat("y", 1+i%40)+n, "\x00"+n, n+"\x00")
	}
	ids = append(ids, "", "\x00", "abcdefghijkl", "abcdefghijklm")
	tab := sampleTable{seed: maphash.MakeSeed()}
	for i, id := range ids {
		k := tab.key(id)
		if _, ok := tab.find(&k, id); ok {
			t.Fatalf("%q found before it was added", id)
		}
		tab.add(&k, id, i)
	}
	for i, id := range ids {
		k := tab.key(id)
		if got, ok := tab.find(&k, id); !ok || got != i {
			t.Fatalf("find(%q) = %d, %v; want %d", id, got, ok, i)
		}
		absent := id + "!"
		k = tab.key(absent)
		if got, ok := tab.find(&k, absent); ok {
			t.Fatalf("find(%q) = %d, an ID never added", absent, got)
		}
	}
}
