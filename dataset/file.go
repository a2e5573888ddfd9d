package dataset

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
)

// JSONL is a dataset read from a JSON Lines file. Each non-blank line is one
// sample:
//
//	{"id": "t1", "input": {...}, "tags": {"difficulty": "easy"}}
//
// "input" is decoded into T with encoding/json; unknown top-level fields are
// an error, so a typo in "tags" does not silently drop a breakdown. A
// malformed line is a *RowError naming the file and line.
type JSONL[T any] struct {
	Path string
}

// Samples reads the file lazily, line by line.
func (d JSONL[T]) Samples(ctx context.Context) iter.Seq2[Sample[T], error] {
	return func(yield func(Sample[T], error) bool) {
		f, err := os.Open(d.Path)
		if err != nil {
			yield(Sample[T]{}, fmt.Errorf("dataset: %w", err))
			return
		}
		defer f.Close()
		r := bufio.NewReaderSize(f, 64<<10)
		for line := 1; ; line++ {
			b, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(b)) > 0 {
				s, perr := decodeJSONLRow[T](b)
				if perr != nil {
					yield(Sample[T]{}, &RowError{File: d.Path, Line: line, Err: perr})
					return
				}
				if !yield(s, nil) {
					return
				}
			}
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(Sample[T]{}, fmt.Errorf("dataset: %s: %w", d.Path, err))
				return
			}
			if ctx.Err() != nil {
				yield(Sample[T]{}, ctx.Err())
				return
			}
		}
	}
}

func decodeJSONLRow[T any](b []byte) (Sample[T], error) {
	var row struct {
		ID    *string           `json:"id"`
		Input json.RawMessage   `json:"input"`
		Tags  map[string]string `json:"tags"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&row); err != nil {
		return Sample[T]{}, err
	}
	if row.ID == nil || *row.ID == "" {
		return Sample[T]{}, errors.New(`missing "id"`)
	}
	s := Sample[T]{ID: *row.ID, Tags: row.Tags}
	if len(row.Input) > 0 {
		if err := json.Unmarshal(row.Input, &s.Input); err != nil {
			return Sample[T]{}, fmt.Errorf(`"input": %w`, err)
		}
	}
	return s, nil
}

// CSV is a dataset read from a CSV file with a header row. Parse turns one
// row (column name → value) into a sample; an error it returns, or a row
// with the wrong number of fields, is a *RowError naming the file and line.
type CSV[T any] struct {
	Path  string
	Parse func(row map[string]string) (Sample[T], error)
}

// Samples reads the file lazily, record by record.
func (d CSV[T]) Samples(ctx context.Context) iter.Seq2[Sample[T], error] {
	return func(yield func(Sample[T], error) bool) {
		f, err := os.Open(d.Path)
		if err != nil {
			yield(Sample[T]{}, fmt.Errorf("dataset: %w", err))
			return
		}
		defer f.Close()
		r := csv.NewReader(bufio.NewReader(f))
		header, err := r.Read()
		if err != nil {
			yield(Sample[T]{}, &RowError{File: d.Path, Line: 1, Err: fmt.Errorf("header: %w", err)})
			return
		}
		for {
			rec, err := r.Read()
			if err == io.EOF {
				return
			}
			line, _ := r.FieldPos(0)
			if err != nil {
				var pe *csv.ParseError
				if errors.As(err, &pe) {
					line = pe.Line
				}
				yield(Sample[T]{}, &RowError{File: d.Path, Line: line, Err: err})
				return
			}
			row := make(map[string]string, len(header))
			for i, name := range header {
				row[name] = rec[i]
			}
			s, err := d.Parse(row)
			if err == nil && s.ID == "" {
				err = errors.New("empty sample ID")
			}
			if err != nil {
				yield(Sample[T]{}, &RowError{File: d.Path, Line: line, Err: err})
				return
			}
			if !yield(s, nil) || ctx.Err() != nil {
				return
			}
		}
	}
}
