package jsonl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"

	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/internal/safeopen"
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

// line is one line of a log, without its newline.
type line struct {
	data       []byte // valid until the next iteration
	num        int
	offset     int64
	last       bool // no complete line follows
	incomplete bool // the file ends without this line's newline
}

// scanLines yields each line of the file with its number and offset, the
// last one (complete, or not) marked so: a line that is not a record is
// judged by the caller, which knows whether anything follows it.
func scanLines(path string, f io.Reader, yield func(line) error) error {
	return scanLinesFrom(path, f, 0, 0, yield)
}

// scanLinesFrom is scanLines over a reader positioned after num lines,
// at offset off.
func scanLinesFrom(path string, f io.Reader, num int, off int64, yield func(line) error) error {
	r := bufio.NewReaderSize(f, 1<<20)
	var (
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
			if ferr := flush(true); ferr != nil || len(b) == 0 {
				return ferr
			}
			return yield(line{data: b, num: num + 1, offset: off, last: true, incomplete: true})
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

// checkLine is the one rule of every reader of a log: it returns the key
// of a committed record, or the error that says what the line is instead.
// committed is the number of records before the line. A torn tail is the
// last line, cut short or complete, that is not a record but starts as
// one; a file whose first line is not a record is not a log.
func checkLine(path string, l line, committed int) (recordjson.LineKey, error) {
	k, err := recordjson.ScanLine(l.data)
	if err == nil && l.incomplete {
		err = errors.New("no newline")
	}
	if err == nil && k.Schema != sink.SchemaVersion {
		if committed > 0 || k.Schema != 0 {
			return k, &SchemaError{Path: path, Line: l.num, Schema: k.Schema}
		}
		err = errors.New(`no "schema" field`)
	}
	if err == nil {
		return k, nil
	}
	switch {
	case l.last && looksLikeRecord(l.data):
		n := int64(len(l.data))
		if !l.incomplete {
			n++
		}
		return k, &TornTailError{Path: path, Line: l.num, Offset: l.offset, Bytes: n}
	case committed == 0:
		return k, &NotLogError{Path: path, Line: l.num, Err: err}
	}
	return k, &CorruptError{Path: path, Line: l.num, Err: err}
}

// blank reports a line of white space only, which readers skip.
func blank(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }

// Records yields the committed records of the log at path, in order: the
// lines Open counts as committed, by the same rule. A torn tail is yielded
// last as a *TornTailError (the records before it are all good); a corrupt
// line is a *CorruptError, a record of another schema a *SchemaError and a
// file that is not a log a *NotLogError, and end the iteration.
func Records(path string) iter.Seq2[sink.Record, error] {
	return func(yield func(sink.Record, error) bool) {
		f, err := safeopen.Open(path)
		if err != nil {
			yield(sink.Record{}, fmt.Errorf("jsonl: %w", err))
			return
		}
		defer f.Close()
		for e, err := range readFile(f, path) {
			if !yield(e.Record, err) {
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
		f, err := safeopen.Open(path)
		if err != nil {
			yield(Entry{}, fmt.Errorf("jsonl: %w", err))
			return
		}
		defer f.Close()
		for e, err := range readFile(f, path) {
			if !yield(e, err) {
				return
			}
		}
	}
}

// ReadEntries is Entries over a reader positioned at the start of a log;
// path is used in errors. A reader that keeps one open file for its scan
// and its later ReadAt calls reads one version of the log, even if a
// resumed run rewrites it meanwhile (the rewrite is a rename).
func ReadEntries(f io.Reader, path string) iter.Seq2[Entry, error] { return readEntries(f, path) }

func readEntries(f io.Reader, path string) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		readEntriesFrom(f, path, 0, 0, 0, yield)
	}
}

// readFile is readEntries over a file read from its start: every core
// decodes whole lines up to the first that is not a committed record;
// from there on (a torn tail, a corrupt line) one line at a time.
func readFile(f *os.File, path string) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		stopped := errors.New("stopped")
		committed := 0
		off, num, err := recordjson.ScanChunks(f, decodeEntries, func(c *recordjson.Chunk[Entry]) error {
			for _, e := range c.Out {
				committed++
				if !yield(e, nil) {
					return stopped
				}
			}
			return nil
		})
		if err == stopped {
			return
		}
		if err == nil {
			_, err = f.Seek(off, io.SeekStart)
		}
		if err != nil {
			yield(Entry{}, fmt.Errorf("jsonl: read %s: %w", path, err))
			return
		}
		readEntriesFrom(f, path, num, off, committed, yield)
	}
}

// readEntriesFrom reads the entries of f, positioned after num lines and
// committed records at offset off, one line at a time.
func readEntriesFrom(f io.Reader, path string, num int, off int64, committed int, yield func(Entry, error) bool) {
	stopped := errors.New("stopped")
	err := scanLinesFrom(path, f, num, off, func(l line) error {
		if blank(l.data) && !l.incomplete {
			return nil
		}
		var r sink.Record
		if err := recordjson.DecodeLine(l.data, &r, nil); err != nil || l.incomplete || r.Schema != sink.SchemaVersion {
			// Not committed: checkLine, the rule Open applies too,
			// says what it is.
			if _, cerr := checkLine(path, l, committed); cerr != nil {
				return cerr
			}
			return &CorruptError{Path: path, Line: l.num, Err: err} // unreachable: ScanLine and DecodeLine agree
		}
		committed++
		if !yield(Entry{r, l.offset}, nil) {
			return stopped
		}
		return nil
	})
	if err != nil && err != stopped {
		yield(Entry{}, err)
	}
}

// ReadLineAt returns the line that starts at offset in the file at path,
// as written by Writer.WriteLine.
func ReadLineAt(path string, offset int64) ([]byte, error) {
	f, err := safeopen.Open(path)
	if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	defer f.Close()
	return ReadLineFrom(f, offset, nil)
}

// ReadLineFrom reads the line that starts at offset in f, without its
// newline, into buf (reused when large enough). It reads with ReadAt, so
// many goroutines may read one open file at once, and a reader holding the
// file is not disturbed when the log is replaced by a rename. A line
// without its newline is a *TornTailError.
func ReadLineFrom(f *os.File, offset int64, buf []byte) ([]byte, error) {
	buf = buf[:0]
	chunk := 4096
	for {
		n := len(buf)
		buf = slices.Grow(buf, chunk)[:n+chunk]
		m, err := f.ReadAt(buf[n:], offset+int64(n))
		buf = buf[:n+m]
		if i := bytes.IndexByte(buf[n:], '\n'); i >= 0 {
			return buf[:n+i], nil
		}
		if err == io.EOF {
			return buf, &TornTailError{Path: f.Name(), Offset: offset, Bytes: int64(len(buf))}
		}
		if err != nil {
			return buf, fmt.Errorf("jsonl: %w", err)
		}
		chunk = min(2*chunk, 16<<20)
	}
}
