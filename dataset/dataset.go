// Package dataset holds the samples an evaluation runs on: the [Sample] type,
// the [Dataset] source interface, [Slice] (an in-memory dataset), loaders for
// JSONL and CSV files, a [Mapping] from flat rows to samples (for JSONL here
// and Parquet in dataset/parquetdataset, so published files load as they are), and
// transforms (filter, limit, seeded shuffle, stratified subset, shard).
//
// # Malformed files
//
// A loader never panics on its input. A malformed row (bad quoting, a ragged
// CSV row, invalid UTF-8, an unknown or missing field, a bad sample ID) ends
// the dataset with a [*RowError] naming the file, the line (or Parquet row)
// and, where known, the column and field. A UTF-8 byte-order mark at the
// start of a JSONL or CSV file is accepted and skipped. Lines of any length
// up to [JSONL.MaxLineBytes] are read.
//
// # Sample IDs
//
// Loaders check every ID with [CheckID]: IDs must be non-empty, valid UTF-8,
// free of control characters and at most [MaxIDBytes] long. Any other ID
// (spaces, quotes, slashes, any printable Unicode) is carried byte for byte.
package dataset

import (
	"context"
	"fmt"
	"iter"
	"strings"
)

// Sample is one task of a dataset.
type Sample[T any] struct {
	ID    string            // unique within the dataset; see CheckID
	Input T                 // the task, including what the judge needs (e.g. the reference answer)
	Tags  map[string]string // breakdown keys: "difficulty", "repo", "category"…
}

// Dataset is a source of samples. Samples yields each sample once, in a
// deterministic order, and stops at the first error it yields. It may be
// called more than once; each call starts from the beginning and yields
// the same samples (eval reads a dataset other than a Slice once to check
// it and again to run it, keeping only IDs in between; Collect reads one
// into a Slice).
type Dataset[T any] interface {
	Samples(ctx context.Context) iter.Seq2[Sample[T], error]
}

// Slice is an in-memory dataset: the MapFS of datasets.
type Slice[T any] []Sample[T]

// Samples yields the slice's samples in order.
func (s Slice[T]) Samples(ctx context.Context) iter.Seq2[Sample[T], error] {
	return func(yield func(Sample[T], error) bool) {
		for _, x := range s {
			if !yield(x, nil) {
				return
			}
		}
	}
}

// Func adapts a function to a Dataset.
type Func[T any] func(ctx context.Context) iter.Seq2[Sample[T], error]

// Samples calls f(ctx).
func (f Func[T]) Samples(ctx context.Context) iter.Seq2[Sample[T], error] { return f(ctx) }

// Collect reads a whole dataset into memory.
func Collect[T any](ctx context.Context, d Dataset[T]) (Slice[T], error) {
	var out Slice[T]
	for s, err := range d.Samples(ctx) {
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// RowError reports a malformed row of a dataset file, or a malformed file.
// Its message reads "dataset: FILE:LINE:COLUMN: field "F": ERR" for text files
// and "dataset: FILE: row N: field "F": ERR" for Parquet; the parts not known
// are left out.
type RowError struct {
	File   string
	Line   int    // 1-based line in a text file (for CSV, where the error is); 0 for Parquet
	Row    int    // 1-based row of a Parquet file; 0 for text files and for errors of the whole file
	Column int    // 1-based byte column within Line; 0 when unknown
	Field  string // the JSON field, CSV or Parquet column at fault, when known
	Err    error
}

func (e *RowError) Error() string {
	var b strings.Builder
	b.WriteString("dataset: ")
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
			if e.Column > 0 {
				fmt.Fprintf(&b, ":%d", e.Column)
			}
		}
		b.WriteString(": ")
	}
	if e.Row > 0 {
		fmt.Fprintf(&b, "row %d: ", e.Row)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q: ", e.Field)
	}
	fmt.Fprintf(&b, "%v", e.Err)
	return b.String()
}

func (e *RowError) Unwrap() error { return e.Err }
