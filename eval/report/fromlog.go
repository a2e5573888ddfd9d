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
// output, scores, and the tags of a sample already seen) and copying no
// string the fold does not keep, and the records are folded in file order. A log that is not whole (a torn tail, a
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
	var tags recordjson.TagSets
	end, _, err := recordjson.ScanChunks(f, decodeLight, func(c *recordjson.Chunk[recordjson.Light]) error {
		for i := range c.Out {
			l := &c.Out[i]
			if s, known := a.Index(l.SampleID); known {
				a.AddAt(s, &l.Record)
				continue
			}
			l.Tags = tags.Of(l) // a sample's first record: Add keeps its tags
			a.Add(&l.Record)
		}
		return nil
	})
	if err != nil || end != st.Size() {
		return FromRecords(jsonl.Records(path), opts)
	}
	return a.Report(), nil
}

// decodeLight decodes the records of a chunk, up to the first line that
// is not a committed record.
func decodeLight(c *recordjson.Chunk[recordjson.Light]) {
	c.EachLine(func(line []byte, _, _ int) bool {
		c.Out = append(c.Out, recordjson.Light{})
		l := &c.Out[len(c.Out)-1]
		if err := recordjson.DecodeLight(line, l); err != nil || l.Schema != sink.SchemaVersion {
			c.Out = c.Out[:len(c.Out)-1]
			return false
		}
		return true
	})
}
