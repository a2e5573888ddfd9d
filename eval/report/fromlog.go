package report

import (
	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// FromLog builds the report of the log at path: FromRecords(
// jsonl.Records(path), opts), the same report, made faster. Every core
// decodes whole lines, leaving out what a report never reads (input,
// output, scores, and the tags of a sample already seen), and the records
// are folded in file order. A log that is not whole (a torn tail, a
// corrupt line, not a log at all) is read by FromRecords, which says what
// it is.
func FromLog(path string, opts *Options) (*Report, error) {
	f, err := safeopen.Open(path)
	if err != nil {
		return FromRecords(jsonl.Records(path), opts) // which says why
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return FromRecords(jsonl.Records(path), opts)
	}
	a := NewAggregator(opts)
	end, _, err := recordjson.ScanChunks(f, decodeForReport, func(c *recordjson.Chunk[reportLine]) error {
		for i := range c.Out {
			l := &c.Out[i]
			if s, known := a.Index(l.rec.SampleID); known {
				a.AddAt(s, &l.rec)
				continue
			}
			// A sample's first record: Add keeps its tags.
			var tagged sink.Record
			if recordjson.DecodeLine(c.Data[l.start:l.end], &tagged, &tagsOnly) == nil {
				l.rec.Tags = tagged.Tags
			}
			a.Add(&l.rec)
		}
		return nil
	})
	if err != nil || end != st.Size() {
		return FromRecords(jsonl.Records(path), opts)
	}
	return a.Report(), nil
}

// reportLine is a record decoded as a report reads it, and where its line
// is in its chunk.
type reportLine struct {
	rec        sink.Record
	start, end int
}

var (
	// reportDecode leaves out of a record what Aggregator.Add never reads
	// (and the tags, which it reads once a sample).
	reportDecode = recordjson.DecodeOptions{NoRaw: true, NoMaps: true}
	tagsOnly     = recordjson.DecodeOptions{NoRaw: true}
)

// decodeForReport decodes the records of a chunk, up to the first line that
// is not a committed record.
func decodeForReport(c *recordjson.Chunk[reportLine]) {
	c.EachLine(func(l []byte, i, _ int) bool {
		c.Out = append(c.Out, reportLine{start: i, end: i + len(l)})
		r := &c.Out[len(c.Out)-1].rec
		if err := recordjson.DecodeLine(l, r, &reportDecode); err != nil || r.Schema != sink.SchemaVersion {
			c.Out = c.Out[:len(c.Out)-1]
			return false
		}
		return true
	})
}
