package jsonl

// The parallel half of every reader of a log is recordjson.ScanChunks:
// whole lines, cut into chunks, checked or decoded on every core, handed on
// in file order. At the first line that is not a committed record it
// stops, and the caller reads on one line at a time (scanLinesFrom,
// checkLine), which knows a torn tail from a corrupt line: rare, and short.

import (
	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/sink"
)

type numKey struct {
	recordjson.LineKey
	num int
}

// checkKeys runs recordjson.ScanLine on each line, up to the first one that
// is not a committed record, which it leaves to checkLine.
func checkKeys(c *recordjson.Chunk[numKey]) {
	c.EachLine(func(l []byte, _, num int) bool {
		k, err := recordjson.ScanLine(l)
		if err != nil || k.Schema != sink.SchemaVersion {
			return false
		}
		c.Out = append(c.Out, numKey{k, num})
		return true
	})
}

// decodeEntries decodes each line, up to the first one that is not a
// committed record, which it leaves to checkLine.
func decodeEntries(c *recordjson.Chunk[Entry]) {
	c.EachLine(func(l []byte, i, _ int) bool {
		c.Out = append(c.Out, Entry{Offset: c.Off + int64(i)})
		e := &c.Out[len(c.Out)-1]
		if err := recordjson.DecodeLine(l, &e.Record, nil); err != nil || e.Schema != sink.SchemaVersion {
			c.Out = c.Out[:len(c.Out)-1]
			return false
		}
		return true
	})
}
