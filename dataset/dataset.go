// Package dataset holds the samples an evaluation runs on: the [Sample] type,
// the [Dataset] source interface, [Slice] (an in-memory dataset), loaders for
// JSONL and CSV files, and transforms (filter, limit, seeded shuffle,
// stratified subset, shard).
package dataset

import (
	"context"
	"fmt"
	"iter"
)

// Sample is one task of a dataset.
type Sample[T any] struct {
	ID    string            // unique within the dataset
	Input T                 // the task, including what the judge needs (e.g. the reference answer)
	Tags  map[string]string // breakdown keys: "difficulty", "repo", "category"…
}

// Dataset is a source of samples. Samples yields each sample once, in a
// deterministic order, and stops at the first error it yields. It may be
// called more than once; each call starts from the beginning.
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

// RowError reports a malformed row of a dataset file.
type RowError struct {
	File string
	Line int // 1-based; for CSV, the record's line
	Err  error
}

func (e *RowError) Error() string {
	return fmt.Sprintf("dataset: %s:%d: %v", e.File, e.Line, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }
