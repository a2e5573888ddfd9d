package recordjson

import (
	"hash/maphash"
	"io"
	"math"
	"slices"
	"unsafe"

	"github.com/proctor-evals/proctor/sink"
)

// Folder is what Fold adds records to: a report.Aggregator. It keeps none
// of a record's strings (they share a chunk that is reused), only copies.
type Folder interface {
	Index(id string) (int, bool)
	AddAt(i int, r *sink.Record)
	Add(r *sink.Record)
}

// EmptyFolder is a Folder that holds no sample when Fold starts (the
// aggregator of report.FromLog): Fold's own table of IDs is then its
// index, and a sample the table does not hold is new, added by AddNew
// (Add without the lookup by ID), which returns its index.
type EmptyFolder interface {
	Folder
	AddNew(r *sink.Record) int
}

// FoldLine is a record of a chunk Fold decoded, and where its line starts
// in the chunk's Data.
type FoldLine struct {
	Light
	Start int

	id     sampleKey // the sample ID's, taken while the line is in the cache
	sample int       // the aggregator's index of the sample, when known
	known  bool
	miss   miss // where the lookup of an unknown sample ended
}

// FoldChunk is a chunk of a log as Fold decodes it.
type FoldChunk = Chunk[FoldLine]

// Fold is the one reader of a log that `proctor report` and `compare`
// and the viewer share: it reads f from where it stands in chunks of whole
// lines, decodes them on every core (DecodeLight) up to the first line
// that is not a committed record, and adds the records to agg in file
// order, each sample's tags decoded once per tag set. It returns where it
// stopped, as ScanChunks does: the end of the last record folded, or of
// the last whole line; whoever reads on from there knows a torn tail from
// a corrupt line.
//
// work, if not nil, runs on the chunk's goroutine once it is decoded, and
// done, if not nil, after its records are folded, in file order: a caller
// that gathers more than agg does per chunk keeps it in Chunk.Aux.
func Fold(f io.Reader, agg Folder, work, done func(*FoldChunk)) (off int64, lines int, err error) {
	var (
		tags    TagSets
		samples = sampleTable{seed: maphash.MakeSeed()}
	)
	// empty while every sample agg holds is in the table: a sample the
	// table lacks is then new to agg, added without looking it up.
	ef, empty := agg.(EmptyFolder)
	return ScanChunks(f, func(c *FoldChunk) {
		c.EachLine(func(line []byte, i, _ int) bool {
			// DecodeLight zeroes the record: grown, not appended, Out's
			// 500-byte elements are not zeroed twice.
			c.Out = slices.Grow(c.Out, 1)[:len(c.Out)+1]
			l := &c.Out[len(c.Out)-1]
			l.Start = i
			if err := DecodeLight(line, &l.Light); err != nil || l.Schema != sink.SchemaVersion {
				c.Out = c.Out[:len(c.Out)-1]
				return false
			}
			l.id = samples.key(l.SampleID)
			return true
		})
		if work != nil {
			work(c)
		}
	}, func(c *FoldChunk) error {
		// The lookups first, all of them: independent of each other, their
		// cache misses overlap, where one at a time each would wait.
		for i := range c.Out {
			l := &c.Out[i]
			if n := len(l.SampleID); n > 0 && n <= len(l.id.head) {
				// The ID's bytes in the chunk have left the cache since
				// its goroutine read them; their copy in the key has
				// not (a failure compares them, a new sample copies them).
				l.SampleID = unsafe.String(&l.id.head[0], n)
			}
			l.sample, l.known, l.miss = samples.find(&l.id, l.SampleID)
		}
		for i := range c.Out {
			l := &c.Out[i]
			r := &l.Light
			s, known := l.sample, l.known
			if !known {
				// A sample new to the table, or seen earlier in this chunk.
				if s, known, l.miss = samples.findAgain(&l.id, r.SampleID, l.miss); !known {
					if empty {
						r.Tags = tags.Of(r) // a sample's first record: AddNew keeps its tags
						empty = samples.add(&l.id, r.SampleID, ef.AddNew(&r.Record), l.miss)
						continue
					}
					if s, known = agg.Index(r.SampleID); !known {
						r.Tags = tags.Of(r) // a sample's first record: Add keeps its tags
						agg.Add(&r.Record)
						if s, known = agg.Index(r.SampleID); known {
							samples.add(&l.id, r.SampleID, s, l.miss)
						}
						continue
					}
					samples.add(&l.id, r.SampleID, s, l.miss)
				}
			}
			agg.AddAt(s, &r.Record)
		}
		if done != nil {
			done(c)
		}
		return nil
	})
}

// sampleTable finds the aggregator's index of a sample ID in front of
// agg.Index, which it saves a fold's serial part: the ID's hash is taken
// on the chunk's goroutine while the line is in the cache, and a lookup
// then reads a slot of 8 bytes, which tells an absent ID at once (a
// sample's first record) and names the entry whose bytes a present one is
// compared with. The entries and their bytes are in the order samples
// were first met, the order a log's later epochs meet them again: read
// in sequence, they stay in the cache. A million samples take 16 MB of
// slots and 8 bytes each of entries, besides their IDs.
type sampleTable struct {
	seed  maphash.Seed
	slots []sampleSlot // a power of two of them, at most half full
	ids   []tableID    // the IDs added, in order
	bytes []byte       // their bytes, one after another
	size  int          // times the table grew: a miss of an earlier size says nothing
}

// miss is where a lookup that did not find its ID ended: the free slot
// the ID's probe reached, in the table as it was then. IDs are never
// removed, so while that slot stays free and the table keeps its size,
// the ID is still absent and belongs in it: a sample's first record
// looks it up and adds it without probing the table again (a cache miss
// each, in a table of a million samples).
type miss struct {
	slot uint64
	size int // the table's: size+1, so that a zero miss is none
}

// sampleKey is what a lookup needs of an ID besides the ID itself.
type sampleKey struct {
	hash uint64
	head [12]byte // the ID's first bytes, a copy that stays in the cache
	n    uint32   // its length
}

// tag is the half of the key's hash a slot keeps: it also picks the ID's
// first slot (a table has at most 2^32).
func (k *sampleKey) tag() uint32 { return uint32(k.hash >> 32) }

type sampleSlot struct {
	tag uint32 // of the ID's key
	id  uint32 // its entry in ids, plus one: 0 is an empty slot
}

type tableID struct {
	index int32  // the aggregator's
	end   uint32 // where the ID's bytes end in bytes; the previous entry's end is where they start
}

func (t *sampleTable) key(id string) (k sampleKey) {
	k.hash = maphash.String(t.seed, id)
	copy(k.head[:], id)
	k.n = uint32(min(len(id), math.MaxUint32))
	return k
}

// find returns the aggregator's index of the ID, or where the lookup
// missed it.
func (t *sampleTable) find(k *sampleKey, id string) (int, bool, miss) {
	if len(t.slots) == 0 {
		return 0, false, miss{}
	}
	return t.probe(k, id, uint64(k.tag())&uint64(len(t.slots)-1))
}

// findAgain is find for an ID an earlier lookup m missed: when m's slot
// is still free, it is missed again at once.
func (t *sampleTable) findAgain(k *sampleKey, id string, m miss) (int, bool, miss) {
	if m.size != t.size+1 {
		return t.find(k, id)
	}
	if t.slots[m.slot].id == 0 {
		return 0, false, m
	}
	return t.probe(k, id, m.slot) // others were added on the ID's probe since
}

// probe looks for the ID from slot i on, i on its probe and every slot
// before it on the probe holding another ID.
func (t *sampleTable) probe(k *sampleKey, id string, i uint64) (int, bool, miss) {
	mask := uint64(len(t.slots) - 1)
	tag := k.tag()
	for ; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s.id == 0 {
			return 0, false, miss{slot: i, size: t.size + 1}
		}
		if s.tag == tag {
			e := s.id - 1
			start := uint32(0)
			if e > 0 {
				start = t.ids[e-1].end
			}
			if string(t.bytes[start:t.ids[e].end]) == id {
				return int(t.ids[e].index), true, miss{}
			}
		}
	}
}

// add adds the ID at aggregator index i; it must not be in t, and m is
// where the latest lookup missed it. What does not fit (an index beyond
// int32, IDs of 4 GB) is left to agg.Index: add reports whether it added
// the ID.
func (t *sampleTable) add(k *sampleKey, id string, i int, m miss) bool {
	if i >= math.MaxInt32 || len(t.bytes)+len(id) >= math.MaxUint32 || len(t.ids) >= math.MaxInt32 {
		return false
	}
	if 2*(len(t.ids)+1) > len(t.slots) {
		t.grow()
	}
	t.bytes = append(t.bytes, id...)
	t.ids = append(t.ids, tableID{index: int32(i), end: uint32(len(t.bytes))})
	s := sampleSlot{tag: k.tag(), id: uint32(len(t.ids))}
	if m.size == t.size+1 && t.slots[m.slot].id == 0 {
		t.slots[m.slot] = s // the first free slot on its probe
	} else {
		t.put(s)
	}
	return true
}

func (t *sampleTable) put(s sampleSlot) {
	mask := uint64(len(t.slots) - 1)
	i := uint64(s.tag) & mask
	for t.slots[i].id != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

func (t *sampleTable) grow() {
	t.size++
	old := t.slots
	t.slots = make([]sampleSlot, max(1024, 2*len(old)))
	for _, s := range old {
		if s.id != 0 {
			t.put(s)
		}
	}
}
