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

// FoldLine is a record of a chunk Fold decoded, and where its line starts
// in the chunk's Data.
type FoldLine struct {
	Light
	Start int

	id     sampleKey // the sample ID's, taken while the line is in the cache
	sample int       // the aggregator's index of the sample, when known
	known  bool
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
			l.sample, l.known = samples.find(&l.id, l.SampleID)
		}
		for i := range c.Out {
			l := &c.Out[i]
			r := &l.Light
			s, known := l.sample, l.known
			if !known {
				// A sample new to the table, or seen earlier in this chunk.
				if s, known = samples.find(&l.id, r.SampleID); !known {
					if s, known = agg.Index(r.SampleID); !known {
						r.Tags = tags.Of(r) // a sample's first record: Add keeps its tags
						agg.Add(&r.Record)
						if s, known = agg.Index(r.SampleID); known {
							samples.add(&l.id, r.SampleID, s)
						}
						continue
					}
					samples.add(&l.id, r.SampleID, s)
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
// agg.Index, which it saves a fold's serial part: the ID's hash and head
// are taken on the chunk's goroutine while the line is in the cache, and
// a lookup then reads one slot of 32 bytes, where an ID of up to 12 bytes
// is whole.
type sampleTable struct {
	seed  maphash.Seed
	slots []sampleSlot // a power of two of them, at most half full
	n     int
	tails []byte // the bytes of each ID after its head
}

// sampleKey is what a lookup needs of an ID besides the ID itself.
type sampleKey struct {
	hash uint64
	head [12]byte // the ID's first bytes
	n    uint32   // its length
}

type sampleSlot struct {
	sampleKey
	index int32  // the aggregator's, plus one: 0 is an empty slot
	tail  uint32 // where the ID's bytes after its head are in tails
}

func (t *sampleTable) key(id string) (k sampleKey) {
	k.hash = maphash.String(t.seed, id)
	copy(k.head[:], id)
	k.n = uint32(min(len(id), math.MaxUint32))
	return k
}

func (t *sampleTable) find(k *sampleKey, id string) (int, bool) {
	if len(t.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := k.hash & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.index == 0 {
			return 0, false
		}
		if s.sampleKey == *k && (len(id) <= len(k.head) || string(t.tails[s.tail:int(s.tail)+len(id)-len(k.head)]) == id[len(k.head):]) {
			return int(s.index - 1), true
		}
	}
}

// add adds the ID at aggregator index i; it must not be in t. What does
// not fit a slot (an index beyond int32, IDs of 4 GB) is left to
// agg.Index.
func (t *sampleTable) add(k *sampleKey, id string, i int) {
	if i >= math.MaxInt32 || len(t.tails)+len(id) >= math.MaxUint32 {
		return
	}
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	s := sampleSlot{sampleKey: *k, index: int32(i + 1)}
	if len(id) > len(k.head) {
		s.tail = uint32(len(t.tails))
		t.tails = append(t.tails, id[len(k.head):]...)
	}
	t.put(s)
	t.n++
}

func (t *sampleTable) put(s sampleSlot) {
	mask := uint64(len(t.slots) - 1)
	i := s.hash & mask
	for t.slots[i].index != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

func (t *sampleTable) grow() {
	old := t.slots
	t.slots = make([]sampleSlot, max(1024, 2*len(old)))
	for _, s := range old {
		if s.index != 0 {
			t.put(s)
		}
	}
}
