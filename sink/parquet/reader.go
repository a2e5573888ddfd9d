package parquet

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/proctor-evals/proctor/sink"
)

// readBatchRows is the number of rows the reader decodes at a time.
const readBatchRows = 8192

// Files returns the finished part files of the directory dir, in order
// (part-00000.parquet, part-00001.parquet…). Unfinished .tmp files, left by
// a crash, are not part of the set.
func Files(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "part-*.parquet"))
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	slices.Sort(files)
	return files, nil
}

// Records returns the records stored at path: a directory written by a
// [Writer] (its finished part files, in order) or a single Parquet file. It
// yields the records in the order they were written. An error (a missing
// path, a file that is not a proctor record file, a newer schema version,
// a corrupt file) is yielded as the last item.
//
// Columns are found by name, so a file whose columns are reordered, or
// that lacks optional ones, still reads; a missing column reads as the
// zero value. StartedAt is returned in UTC.
func Records(path string) iter.Seq2[sink.Record, error] {
	return func(yield func(sink.Record, error) bool) {
		st, err := os.Stat(path)
		if err != nil {
			yield(sink.Record{}, fmt.Errorf("parquet: %w", err))
			return
		}
		files := []string{path}
		if st.IsDir() {
			if files, err = Files(path); err != nil {
				yield(sink.Record{}, err)
				return
			}
		}
		for _, f := range files {
			if !readFile(f, yield) {
				return
			}
		}
	}
}

// readFile yields the records of one file; it returns false when the
// iteration must stop.
func readFile(name string, yield func(sink.Record, error) bool) bool {
	fail := func(err error) bool {
		yield(sink.Record{}, fmt.Errorf("parquet: %s: %w", name, err))
		return false
	}
	pf, err := file.OpenParquetFile(name, false)
	if err != nil {
		return fail(err)
	}
	defer pf.Close()
	version := pf.MetaData().KeyValueMetadata().FindValue(MetadataKey)
	if version == nil {
		return fail(errNotProctor)
	}
	if v, err := strconv.Atoi(*version); err != nil || v < 1 || v > sink.SchemaVersion {
		return fail(fmt.Errorf("unsupported record schema %q (this reader knows %d)", *version, sink.SchemaVersion))
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: readBatchRows}, memory.DefaultAllocator)
	if err != nil {
		return fail(err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return fail(err)
	}
	defer rr.Release()
	for rr.Next() {
		batch := rr.RecordBatch()
		d, err := newDecoder(batch)
		if err != nil {
			return fail(err)
		}
		for i := range int(batch.NumRows()) {
			if !yield(d.record(i), nil) {
				return false
			}
		}
	}
	if err := rr.Err(); err != nil {
		return fail(err)
	}
	return true
}

// decoder turns the rows of one record batch back into records.
type decoder struct {
	cols   [numCols]arrow.Array
	toTime func(arrow.Timestamp) time.Time
}

func newDecoder(batch arrow.RecordBatch) (*decoder, error) {
	d := &decoder{}
	sc := batch.Schema()
	for i, f := range schema.Fields() {
		idx := sc.FieldIndices(f.Name)
		if len(idx) == 0 {
			continue
		}
		col := batch.Column(idx[0])
		if !arrow.TypeEqual(col.DataType(), f.Type) && !compatible(col.DataType(), f.Type) {
			return nil, fmt.Errorf("column %s: type %s, want %s", f.Name, col.DataType(), f.Type)
		}
		d.cols[i] = col
	}
	if ts, ok := d.cols[colStartedAt].(*array.Timestamp); ok {
		toTime, err := ts.DataType().(*arrow.TimestampType).GetToTimeFunc()
		if err != nil {
			return nil, fmt.Errorf("column started_at: %w", err)
		}
		d.toTime = toTime
	}
	return d, nil
}

// compatible accepts the types a reader may hand back for a column written
// with type want: another timestamp unit or zone, maps with unsorted keys.
func compatible(got, want arrow.DataType) bool {
	switch want := want.(type) {
	case *arrow.TimestampType:
		_, ok := got.(*arrow.TimestampType)
		return ok
	case *arrow.MapType:
		g, ok := got.(*arrow.MapType)
		return ok && arrow.TypeEqual(g.KeyType(), want.KeyType()) && arrow.TypeEqual(g.ItemType(), want.ItemType())
	}
	return false
}

func (d *decoder) record(i int) sink.Record {
	r := sink.Record{
		Schema:       int(d.int64(colSchema, i)),
		RunID:        d.string(colRunID, i),
		Eval:         d.string(colEval, i),
		SampleID:     d.string(colSampleID, i),
		Epoch:        int(d.int64(colEpoch, i)),
		Attempt:      int(d.int64(colAttempt, i)),
		Status:       sink.Status(d.string(colStatus, i)),
		Score:        d.float64(colScore, i),
		Weight:       d.float64(colWeight, i),
		Reason:       d.string(colReason, i),
		Error:        d.string(colError, i),
		ErrorKind:    sink.ErrorKind(d.string(colErrorKind, i)),
		Input:        d.json(colInput, i),
		Output:       d.json(colOutput, i),
		DurationMS:   d.float64(colDurationMS, i),
		InputTokens:  d.int64(colInputTokens, i),
		OutputTokens: d.int64(colOutputTokens, i),
		CostUSD:      d.float64(colCostUSD, i),
		Trace:        d.string(colTrace, i),
		ParentRunID:  d.string(colParentRunID, i),
	}
	if a, ok := d.cols[colSeed].(*array.Uint64); ok && a.IsValid(i) {
		r.Seed = a.Value(i)
	}
	if a, ok := d.cols[colStartedAt].(*array.Timestamp); ok && a.IsValid(i) {
		r.StartedAt = d.toTime(a.Value(i)).UTC()
	}
	if m, ok := d.cols[colScores].(*array.Map); ok && m.IsValid(i) {
		keys, items := m.Keys().(*array.String), m.Items().(*array.Float64)
		start, end := m.ValueOffsets(i)
		r.Scores = make(map[string]float64, end-start)
		for j := int(start); j < int(end); j++ {
			r.Scores[strings.Clone(keys.Value(j))] = items.Value(j)
		}
	}
	if m, ok := d.cols[colTags].(*array.Map); ok && m.IsValid(i) {
		keys, items := m.Keys().(*array.String), m.Items().(*array.String)
		start, end := m.ValueOffsets(i)
		r.Tags = make(map[string]string, end-start)
		for j := int(start); j < int(end); j++ {
			r.Tags[strings.Clone(keys.Value(j))] = strings.Clone(items.Value(j))
		}
	}
	return r
}

func (d *decoder) string(c, i int) string {
	if a, ok := d.cols[c].(*array.String); ok && a.IsValid(i) {
		// Clone: the batch's buffers are reused or released after it.
		return strings.Clone(a.Value(i))
	}
	return ""
}

func (d *decoder) json(c, i int) json.RawMessage {
	if a, ok := d.cols[c].(*array.String); ok && a.IsValid(i) {
		return json.RawMessage(a.Value(i)) // a copy
	}
	return nil
}

func (d *decoder) int64(c, i int) int64 {
	if a, ok := d.cols[c].(*array.Int64); ok && a.IsValid(i) {
		return a.Value(i)
	}
	return 0
}

func (d *decoder) float64(c, i int) float64 {
	if a, ok := d.cols[c].(*array.Float64); ok && a.IsValid(i) {
		return a.Value(i)
	}
	return 0
}
