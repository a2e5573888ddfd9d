// Package parquetdataset loads datasets from Parquet files, the format of most
// published benchmarks (Hugging Face datasets files among them), with the
// Apache Arrow Go reader. It lives apart from package dataset so that
// programs that do not read Parquet do not link Arrow.
//
// Each row becomes a flat [dataset.Row] (column name → JSON value) mapped to
// a sample by a [dataset.Mapping]. Row groups are streamed in batches; the
// file is never read whole.
package parquetdataset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/proctor-evals/proctor/dataset"
)

// batchRows is the number of rows decoded at a time.
const batchRows = 1024

// Dataset is a dataset read from one Parquet file. Mapping says which
// columns make the ID, input and tags (the zero Mapping: the row number is
// the ID, every column is the input). Only the columns the mapping needs are
// read when it lists Input.
//
// Columns are converted to JSON as encoding/json would marshal their Arrow
// values (binary columns as base64, timestamps as strings) and decoded into
// T. String columns must hold valid UTF-8 (strings nested in lists or
// structs are not checked, and encoding/json replaces their invalid bytes),
// and a column that T has no place for is an error unless
// AllowUnknownFields is set. A malformed file or row
// is a *dataset.RowError naming the file and, where known, the 1-based row
// and the column (Field); a corrupt file is an error, never a panic.
type Dataset[T any] struct {
	Path               string
	Mapping            dataset.Mapping
	AllowUnknownFields bool
}

// Samples reads the file lazily, batch by batch.
func (d Dataset[T]) Samples(ctx context.Context) iter.Seq2[dataset.Sample[T], error] {
	return func(yield func(dataset.Sample[T], error) bool) {
		f, err := os.Open(d.Path)
		if err != nil {
			yield(dataset.Sample[T]{}, fmt.Errorf("dataset: %w", err))
			return
		}
		defer f.Close()
		r := &reader[T]{d: d, f: f}
		defer r.close()
		if err := r.open(ctx); err != nil {
			yield(dataset.Sample[T]{}, err)
			return
		}
		for {
			if err := ctx.Err(); err != nil {
				yield(dataset.Sample[T]{}, err)
				return
			}
			batch, err := r.next()
			for _, s := range batch {
				if !yield(s, nil) {
					return
				}
			}
			if err != nil {
				yield(dataset.Sample[T]{}, err)
				return
			}
			if batch == nil {
				return
			}
		}
	}
}

// reader holds the Arrow state of one pass over the file. Its methods call
// into Arrow, which may panic on a corrupt file; they recover such panics
// into errors. The caller's yield is never called under their recover, so
// a panic of the caller's own is not swallowed.
type reader[T any] struct {
	d    Dataset[T]
	f    *os.File
	pf   *file.Reader
	rr   pqarrow.RecordReader
	rows int // rows converted so far
}

// fail makes a *RowError of err at row (0: the whole file) and field.
func (r *reader[T]) fail(row int, field string, err error) error {
	return &dataset.RowError{File: r.d.Path, Row: row, Field: field, Err: err}
}

// recovered turns a panic of Arrow into an error at the current row.
func (r *reader[T]) recovered(err *error) {
	if p := recover(); p != nil {
		row := 0
		if r.rr != nil {
			row = r.rows + 1
		}
		*err = r.fail(row, "", fmt.Errorf("corrupt file: %v", p))
	}
}

func (r *reader[T]) open(ctx context.Context) (err error) {
	defer r.recovered(&err)
	r.pf, err = file.NewParquetReader(r.f)
	if err != nil {
		return r.fail(0, "", err)
	}
	fr, err := pqarrow.NewFileReader(r.pf, pqarrow.ArrowReadProperties{BatchSize: batchRows}, memory.DefaultAllocator)
	if err != nil {
		return r.fail(0, "", err)
	}
	m := r.d.Mapping
	byName := make(map[string]*pqarrow.SchemaField, len(fr.Manifest.Fields))
	for i := range fr.Manifest.Fields {
		sf := &fr.Manifest.Fields[i]
		if _, dup := byName[sf.Field.Name]; dup {
			return r.fail(0, sf.Field.Name, errors.New("two columns of this name"))
		}
		byName[sf.Field.Name] = sf
	}
	want := slices.Concat(m.Input, m.Tags) // the columns the mapping names
	if m.ID != "" {
		want = append(want, m.ID)
	}
	for _, name := range want {
		if byName[name] == nil {
			return r.fail(0, name, errors.New("no such column"))
		}
	}
	if r.pf.NumRows() == 0 {
		return nil
	}
	if len(fr.Manifest.Fields) == 0 {
		return r.fail(0, "", errors.New("no columns"))
	}
	var leaves []int // nil: every column
	if m.Input != nil {
		for _, name := range want {
			leaves = appendLeaves(leaves, byName[name])
		}
		slices.Sort(leaves)
		leaves = slices.Compact(leaves)
		if len(leaves) == 0 {
			leaves = []int{0} // the mapping needs no column, but rows must still be counted
		}
	}
	r.rr, err = fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return r.fail(0, "", err)
	}
	return nil
}

// appendLeaves appends the Parquet leaf column indices of a field.
func appendLeaves(dst []int, f *pqarrow.SchemaField) []int {
	if f.IsLeaf() {
		return append(dst, f.ColIndex)
	}
	for i := range f.Children {
		dst = appendLeaves(dst, &f.Children[i])
	}
	return dst
}

// next converts the next batch of rows. It returns nil, nil at the end; on
// an error, the samples of the batch before the bad row come with it.
func (r *reader[T]) next() (out []dataset.Sample[T], err error) {
	if r.rr == nil {
		return nil, nil
	}
	defer r.recovered(&err)
	if !r.rr.Next() {
		if err := r.rr.Err(); err != nil {
			return nil, r.fail(r.rows+1, "", err)
		}
		return nil, nil
	}
	batch := r.rr.RecordBatch()
	n := int(batch.NumRows())
	out = make([]dataset.Sample[T], 0, n)
	sc := batch.Schema()
	for i := range n {
		row := make(dataset.Row, batch.NumCols())
		for j, col := range batch.Columns() {
			name := sc.Field(j).Name
			v, err := cell(col, i)
			if err != nil {
				return out, r.fail(r.rows+1, name, err)
			}
			row[name] = v
		}
		s, err := dataset.FromRow[T](r.d.Mapping, row, r.rows+1, r.d.AllowUnknownFields)
		if err != nil {
			var re *dataset.RowError
			if errors.As(err, &re) {
				re.File, re.Row = r.d.Path, r.rows+1
				return out, re
			}
			return out, r.fail(r.rows+1, "", err)
		}
		out = append(out, s)
		r.rows++
	}
	return out, nil
}

// cell is the JSON value of row i of col. Strings are checked to be valid
// UTF-8: encoding/json would silently replace invalid bytes.
func cell(col arrow.Array, i int) (json.RawMessage, error) {
	if col.IsNull(i) {
		return json.RawMessage("null"), nil
	}
	var v any
	switch c := col.(type) {
	case *array.String:
		v = c.Value(i)
	case *array.LargeString:
		v = c.Value(i)
	case *array.StringView:
		v = c.Value(i)
	default:
		v = col.GetOneForMarshal(i)
	}
	if s, ok := v.(string); ok && !utf8.ValidString(s) {
		return nil, errors.New("invalid UTF-8")
	}
	return json.Marshal(v)
}

func (r *reader[T]) close() {
	defer func() { recover() }() // releasing a corrupt file's buffers may panic too
	if r.rr != nil {
		r.rr.Release()
	}
	if r.pf != nil {
		r.pf.Close()
	}
}
