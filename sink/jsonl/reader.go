package jsonl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"

	"github.com/proctor-evals/proctor/sink"
)

// TornTailError reports an incomplete last line: what a crash in the middle
// of a write leaves. The bytes from Offset to the end of the file are not
// committed records.
type TornTailError struct {
	Path   string
	Line   int   // 1-based line number of the torn line
	Offset int64 // where the committed part of the file ends
	Bytes  int64 // length of the torn tail
}

func (e *TornTailError) Error() string {
	return fmt.Sprintf("jsonl: %s: torn tail at line %d: %d bytes after offset %d are not a complete record", e.Path, e.Line, e.Bytes, e.Offset)
}

// CorruptError reports a complete line that does not parse, with committed
// records after it: not a crash artefact, so nothing is cut or skipped.
type CorruptError struct {
	Path string
	Line int
	Err  error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("jsonl: %s:%d: corrupt record: %v", e.Path, e.Line, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// SchemaError reports a record of a schema version this package cannot read.
type SchemaError struct {
	Path   string
	Line   int
	Schema int
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("jsonl: %s:%d: record schema %d, this version of proctor reads schema %d", e.Path, e.Line, e.Schema, sink.SchemaVersion)
}

// lines yields each line of the file (without its newline) with its number
// and offset, then, when the file does not end in a newline, the torn tail
// as a *TornTailError. A line that does not parse is judged by the caller,
// which knows whether anything follows it.
type line struct {
	data   []byte // valid until the next iteration
	num    int
	offset int64
	last   bool // no complete line follows
}

func scanLines(path string, f io.Reader, yield func(line) error) error {
	r := bufio.NewReaderSize(f, 1<<20)
	var (
		off     int64
		num     int
		long    []byte
		pending *line
		keep    []byte
	)
	flush := func(last bool) error {
		if pending == nil {
			return nil
		}
		pending.last = last
		err := yield(*pending)
		pending = nil
		return err
	}
	for {
		b, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, b...)
			continue
		}
		if long != nil {
			b = append(long, b...)
			long = nil
		}
		if err == io.EOF {
			if len(b) > 0 {
				if ferr := flush(true); ferr != nil {
					return ferr
				}
				return &TornTailError{Path: path, Line: num + 1, Offset: off, Bytes: int64(len(b))}
			}
			return flush(true)
		}
		if err != nil {
			return fmt.Errorf("jsonl: read %s: %w", path, err)
		}
		// The previous line is not the last: yield it before reading on
		// would invalidate its buffer, so it is held one step behind.
		if ferr := flush(false); ferr != nil {
			return ferr
		}
		num++
		keep = append(keep[:0], b[:len(b)-1]...)
		pending = &line{data: keep, num: num, offset: off}
		off += int64(len(b))
	}
}

// Records yields the committed records of the log at path, in order. A torn
// tail is yielded last as a *TornTailError (the records before it are all
// good); a corrupt line with records after it is a *CorruptError, and a
// record of another schema a *SchemaError, and end the iteration.
func Records(path string) iter.Seq2[sink.Record, error] {
	return func(yield func(sink.Record, error) bool) {
		f, err := os.Open(path)
		if err != nil {
			yield(sink.Record{}, fmt.Errorf("jsonl: %w", err))
			return
		}
		defer f.Close()
		for r, err := range Read(f, path) {
			if !yield(r, err) {
				return
			}
		}
	}
}

// Read is Records over any reader; name is used in errors.
func Read(f io.Reader, path string) iter.Seq2[sink.Record, error] {
	return func(yield func(sink.Record, error) bool) {
		for e, err := range readEntries(f, path) {
			if !yield(e.Record, err) {
				return
			}
		}
	}
}

// Entry is a record with the offset of its line, which ReadLineAt reads
// back: an index of a log needs to keep only offsets, not outputs.
type Entry struct {
	sink.Record
	Offset int64
}

// Entries is Records with each record's offset.
func Entries(path string) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		f, err := os.Open(path)
		if err != nil {
			yield(Entry{}, fmt.Errorf("jsonl: %w", err))
			return
		}
		defer f.Close()
		for e, err := range readEntries(f, path) {
			if !yield(e, err) {
				return
			}
		}
	}
}

func readEntries(f io.Reader, path string) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		stopped := errors.New("stopped")
		err := scanLines(path, f, func(l line) error {
			if len(bytes.TrimSpace(l.data)) == 0 {
				return nil
			}
			var r sink.Record
			// UnmarshalJSON validates as it decodes: calling it directly
			// skips encoding/json's separate validation pass.
			if err := r.UnmarshalJSON(l.data); err != nil {
				if l.last {
					return &TornTailError{Path: path, Line: l.num, Offset: l.offset, Bytes: int64(len(l.data)) + 1}
				}
				return &CorruptError{Path: path, Line: l.num, Err: err}
			}
			if r.Schema != sink.SchemaVersion {
				return &SchemaError{Path: path, Line: l.num, Schema: r.Schema}
			}
			if !yield(Entry{r, l.offset}, nil) {
				return stopped
			}
			return nil
		})
		if err != nil && err != stopped {
			yield(Entry{}, err)
		}
	}
}

// ReadLineAt returns the line that starts at offset in the file at path,
// as written by Writer.WriteLine.
func ReadLineAt(path string, offset int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	b, err := bufio.NewReaderSize(f, 64<<10).ReadBytes('\n')
	if err == io.EOF {
		return nil, &TornTailError{Path: path, Offset: offset, Bytes: int64(len(b))}
	}
	if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	return b[:len(b)-1], nil
}
