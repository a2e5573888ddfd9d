package recordjson

import (
	"io"

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
	var tags TagSets
	return ScanChunks(f, func(c *FoldChunk) {
		c.EachLine(func(line []byte, i, _ int) bool {
			c.Out = append(c.Out, FoldLine{Start: i})
			l := &c.Out[len(c.Out)-1]
			if err := DecodeLight(line, &l.Light); err != nil || l.Schema != sink.SchemaVersion {
				c.Out = c.Out[:len(c.Out)-1]
				return false
			}
			return true
		})
		if work != nil {
			work(c)
		}
	}, func(c *FoldChunk) error {
		for i := range c.Out {
			r := &c.Out[i].Light
			if s, known := agg.Index(r.SampleID); known {
				agg.AddAt(s, &r.Record)
				continue
			}
			r.Tags = tags.Of(r) // a sample's first record: Add keeps its tags
			agg.Add(&r.Record)
		}
		if done != nil {
			done(c)
		}
		return nil
	})
}
