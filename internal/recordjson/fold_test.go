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
	if n := unsafe.Sizeof(sampleSlot{}); n != 8 {
		t.Errorf("a slot is %d bytes, want 8", n)
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
		_, ok, m := tab.find(&k, id)
		if ok {
			t.Fatalf("%q found before it was added", id)
		}
		if i%3 == 0 {
			m = miss{} // a miss unknown: add probes
		}
		tab.add(&k, id, i, m)
	}
	for i, id := range ids {
		k := tab.key(id)
		if got, ok, _ := tab.find(&k, id); !ok || got != i {
			t.Fatalf("find(%q) = %d, %v; want %d", id, got, ok, i)
		}
		absent := id + "!"
		k = tab.key(absent)
		if got, ok, _ := tab.find(&k, absent); ok {
			t.Fatalf("find(%q) = %d, an ID never added", absent, got)
		}
	}
}

// TestSampleTableFindAgain: as Fold does with a chunk, IDs are all looked
// up first, then added in turn, each looked up again from where its first
// lookup missed: an ID added since (a sample's later record in the chunk)
// is found, an absent one is still absent, whatever was added on its probe
// since and however the table grew.
func TestSampleTableFindAgain(t *testing.T) {
	tab := sampleTable{seed: maphash.MakeSeed()}
	want := map[string]int{}
	for batch := range 40 {
		var ids []string
		for i := range 500 {
			ids = append(ids, strconv.Itoa((batch*500+i)/3)) // each ID three times, some across batches
		}
		keys := make([]sampleKey, len(ids))
		misses := make([]miss, len(ids))
		for i, id := range ids {
			keys[i] = tab.key(id)
			_, _, misses[i] = tab.find(&keys[i], id)
		}
		for i, id := range ids {
			got, ok, m := tab.findAgain(&keys[i], id, misses[i])
			w, added := want[id]
			if ok != added || ok && got != w {
				t.Fatalf("batch %d: findAgain(%q) = %d, %v; want %d, %v", batch, id, got, ok, w, added)
			}
			if !ok {
				want[id] = len(want)
				tab.add(&keys[i], id, want[id], m)
			}
		}
	}
	for id, w := range want {
		k := tab.key(id)
		if got, ok, _ := tab.find(&k, id); !ok || got != w {
			t.Fatalf("find(%q) = %d, %v; want %d", id, got, ok, w)
		}
	}
}
