package dataset

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
)

// DefaultMaxLineBytes is the longest JSONL line read when
// [JSONL.MaxLineBytes] is zero.
const DefaultMaxLineBytes = 256 << 20

// bom is the UTF-8 byte-order mark some editors write at the start of a file.
const bom = "\uFEFF"

// JSONL is a dataset read from a JSON Lines file. Each non-blank line is one
// sample, in proctor's shape:
//
//	{"id": "t1", "input": {...}, "tags": {"difficulty": "easy"}}
//
// or, with a [Mapping], any flat JSON object. "input" is decoded into T with
// encoding/json. Fields that land nowhere (an unknown top-level field, an
// input field T has no place for) are an error unless AllowUnknownFields is
// set, so a typo in "tags" does not silently drop a breakdown. Lines must be
// valid UTF-8 (encoding/json would silently rewrite invalid bytes); a
// byte-order mark at the start of the file is skipped. A malformed line is a
// *RowError naming the file, line and, where known, column and field.
//
// A gzip or zstd file (HumanEval ships as HumanEval.jsonl.gz) is read as
// its decompressed text, streamed, with the same errors, lines numbered
// in that text. The format is recognized by its first bytes (its magic
// number, which no UTF-8 text starts with), whatever the file's name; a
// name ending in .gz or .zst on a file that is not that format is an
// error, as is a compressed stream that breaks (truncated, corrupt: a
// *RowError at the line reached). A zstd frame may not ask for a window
// over 128 MiB, the zstd command's default limit. The OpenTelemetry
// Collector's file exporter writes zstd as messages (each a 4-byte
// big-endian length and a zstd frame) unless its nativeCompression gate
// is on: such a file reads as one line per message. The same holds for
// [CSV] and [Lines], and so for the loaders built on them. In
// proctor's shape a "trace" field, the link to the episode a sample failed
// in that `proctor export -failures` writes, is accepted and not loaded.
type JSONL[T any] struct {
	Path string
	// Mapping, when set, maps each line, a flat JSON object, to a sample.
	// Nil means proctor's {"id","input","tags"} shape.
	Mapping *Mapping
	// AllowUnknownFields ignores fields that land nowhere instead of
	// failing on them.
	AllowUnknownFields bool
	// MaxLineBytes bounds the length of a line, which is held in memory
	// whole; a longer line is a *RowError. Zero means DefaultMaxLineBytes.
	MaxLineBytes int
}

// Samples reads the file lazily, line by line.
func (d JSONL[T]) Samples(ctx context.Context) iter.Seq2[Sample[T], error] {
	return func(yield func(Sample[T], error) bool) {
		rows := 0
		for l, err := range Lines(ctx, d.Path, d.MaxLineBytes) {
			if err != nil {
				yield(Sample[T]{}, err)
				return
			}
			rows++
			s, re := d.decodeLine(l.Bytes, rows)
			if re != nil {
				re.File, re.Line = d.Path, l.Number
				if re.Column > 0 {
					re.Column += l.Skip
				}
				yield(Sample[T]{}, re)
				return
			}
			if !yield(s, nil) {
				return
			}
		}
	}
}

// skipBOM discards a byte-order mark at the start of r.
func skipBOM(r *bufio.Reader) bool {
	if b, _ := r.Peek(len(bom)); string(b) == bom {
		r.Discard(len(bom))
		return true
	}
	return false
}

// decodeLine decodes the n-th non-blank line b. Its error has no position
// but the column within b.
func (d JSONL[T]) decodeLine(b []byte, n int) (Sample[T], *RowError) {
	if i := invalidUTF8At(b); i >= 0 {
		return Sample[T]{}, &RowError{Column: i + 1, Err: errors.New("invalid UTF-8")}
	}
	if d.Mapping != nil {
		var row Row
		if err := decode(b, &row, false); err != nil {
			return Sample[T]{}, jsonError(err)
		}
		if row == nil {
			return Sample[T]{}, &RowError{Err: errors.New("want a JSON object, got null")}
		}
		s, err := FromRow[T](*d.Mapping, row, n, d.AllowUnknownFields)
		if err != nil {
			return Sample[T]{}, err.(*RowError)
		}
		return s, nil
	}
	var row struct {
		ID         *string           `json:"id"`
		Input      json.RawMessage   `json:"input"`
		Tags       map[string]string `json:"tags"`
		Transcript string            `json:"trace"` // where the sample came from (proctor export -failures); not loaded
	}
	if err := decode(b, &row, !d.AllowUnknownFields); err != nil {
		return Sample[T]{}, jsonError(err)
	}
	if row.ID == nil {
		return Sample[T]{}, &RowError{Field: "id", Err: errMissing}
	}
	if err := checkID(*row.ID); err != nil {
		return Sample[T]{}, &RowError{Field: "id", Err: err}
	}
	s := Sample[T]{ID: *row.ID, Tags: row.Tags}
	if len(row.Input) > 0 {
		if err := decode(row.Input, &s.Input, !d.AllowUnknownFields); err != nil {
			return Sample[T]{}, &RowError{Field: "input", Err: err}
		}
	}
	return s, nil
}

// jsonError positions a decoding error of a line where encoding/json says.
func jsonError(err error) *RowError {
	re := &RowError{Err: err}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		re.Column = int(se.Offset)
	case errors.As(err, &te):
		re.Column, re.Field = int(te.Offset), te.Field
	}
	return re
}

// CSV is a dataset read from a CSV file with a header row. Parse turns one
// row (column name → value) into a sample. Every record must have as many
// fields as the header, header names must be unique, and every field must be
// valid UTF-8; a byte-order mark at the start of the file is skipped. An
// error of Parse, a malformed record or a bad sample ID is a *RowError
// naming the file, line and, where known, column. A gzip or zstd file is
// read decompressed, as [JSONL] says.
type CSV[T any] struct {
	Path  string
	Parse func(row map[string]string) (Sample[T], error)
	// MaxRecordBytes bounds the length of a record (a row, with the
	// newlines of its quoted fields), which is held in memory whole; a
	// longer one is a *RowError. Zero means DefaultMaxLineBytes.
	MaxRecordBytes int
}

// Samples reads the file lazily, record by record.
func (d CSV[T]) Samples(ctx context.Context) iter.Seq2[Sample[T], error] {
	return func(yield func(Sample[T], error) bool) {
		if d.Parse == nil {
			yield(Sample[T]{}, errors.New("dataset: CSV.Parse is nil"))
			return
		}
		f, err := openText(d.Path, DefaultMaxLineBytes)
		if err != nil {
			yield(Sample[T]{}, err)
			return
		}
		defer f.Close()
		limit := d.MaxRecordBytes
		if limit <= 0 {
			limit = DefaultMaxLineBytes
		}
		// encoding/csv holds a record whole, however long: the reader
		// under it stops once a record has run past the limit.
		lr := &recordLimit{r: f, limit: int64(limit)}
		br := bufio.NewReader(lr)
		hasBOM := skipBOM(br)
		r := csv.NewReader(br)
		lr.csv = r
		nextLine := 1 // where the record being read starts, at the earliest
		fail := func(re *RowError) {
			re.File = d.Path
			if re.Line == 1 && hasBOM && re.Column > 0 {
				re.Column += len(bom)
			}
			yield(Sample[T]{}, re)
		}
		// encoding/csv returns what the reader fails with as is: name the
		// line the stream broke on.
		readErr := func(err error) bool {
			var pe *csv.ParseError
			if err == nil || err == io.EOF || errors.As(err, &pe) {
				return false
			}
			if errors.Is(err, errLongRecord) {
				fail(&RowError{Line: nextLine, Err: fmt.Errorf("a record longer than %d bytes (MaxRecordBytes)", limit)})
				return true
			}
			fail(&RowError{Line: f.Line(), Err: err})
			return true
		}
		header, err := r.Read()
		if readErr(err) {
			return
		}
		if err == io.EOF {
			fail(&RowError{Line: 1, Err: errors.New("empty file, want a header row")})
			return
		}
		if err != nil {
			fail(csvError(err, 1))
			return
		}
		nextLine = endLine(r, header)
		seen := make(map[string]bool, len(header))
		for i, name := range header {
			if re := checkField(r, i, name, ""); re != nil {
				fail(re)
				return
			}
			if seen[name] {
				line, col := r.FieldPos(i)
				fail(&RowError{Line: line, Column: col, Field: name, Err: errors.New("duplicate column in the header")})
				return
			}
			seen[name] = true
		}
		for {
			if err := ctx.Err(); err != nil {
				yield(Sample[T]{}, err)
				return
			}
			rec, err := r.Read()
			if err == io.EOF || readErr(err) {
				return
			}
			if err != nil {
				var pe *csv.ParseError
				if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
					fail(&RowError{Line: pe.StartLine, Err: fmt.Errorf("%d fields, but the header has %d", len(rec), len(header))})
					return
				}
				fail(csvError(err, 0))
				return
			}
			line, _ := r.FieldPos(0) // a record read without error has len(header) ≥ 1 fields
			nextLine = endLine(r, rec)
			row := make(map[string]string, len(header))
			for i, name := range header {
				if re := checkField(r, i, rec[i], name); re != nil {
					fail(re)
					return
				}
				row[name] = rec[i]
			}
			s, err := d.Parse(row)
			if err == nil {
				err = checkSample(s)
			}
			if err != nil {
				fail(&RowError{Line: line, Err: err})
				return
			}
			if !yield(s, nil) {
				return
			}
		}
	}
}

// checkField checks that field i of the record r just read is valid UTF-8.
func checkField(r *csv.Reader, i int, v, name string) *RowError {
	if j := invalidUTF8At(v); j >= 0 {
		line, col := r.FieldPos(i)
		return &RowError{Line: line, Column: col + j, Field: name, Err: errors.New("invalid UTF-8")}
	}
	return nil
}

// csvError positions an error of encoding/csv; line is used when the error
// has no position of its own.
func csvError(err error, line int) *RowError {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &RowError{Line: pe.Line, Column: pe.Column, Err: pe.Err}
	}
	return &RowError{Line: line, Err: err}
}

// errLongRecord is recordLimit's error.
var errLongRecord = errors.New("dataset: record too long")

// recordLimit reads from r for csv, failing once csv has been given more
// than limit bytes past the end of the last record it returned (plus
// one read's worth): what it holds of the record being read.
type recordLimit struct {
	r     io.Reader
	csv   *csv.Reader
	limit int64
	n     int64 // bytes read
}

func (l *recordLimit) Read(p []byte) (int, error) {
	if l.csv != nil && l.n-l.csv.InputOffset() > l.limit {
		return 0, errLongRecord
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	return n, err
}

// endLine is the line after the record r just returned, rec: where the
// next record starts at the earliest.
func endLine(r *csv.Reader, rec []string) int {
	line, _ := r.FieldPos(len(rec) - 1)
	return line + strings.Count(rec[len(rec)-1], "\n") + 1
}
