package jsonl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/proctor-evals/proctor/internal/atomicfile"
	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/sink"
)

// OpenOptions tune Open. The zero value (or nil) keeps error records,
// collects Recovery.Done and uses the default writer Options.
type OpenOptions struct {
	Options
	// DropErrors removes records whose status is error (the file is
	// rewritten atomically) so that a resumed run retries those episodes
	// and the log still holds each episode once.
	DropErrors bool
	// KeepLimits, with DropErrors, keeps the error records of kind limit
	// (an episode stopped at its per-episode cap): they are final, since
	// running them again would spend as much again.
	KeepLimits bool
	// ErrorsFinal counts error records as final, as any other: they are
	// kept, and visited (Done, Visit), so that their episodes do not run
	// again. A sequential gate's resume needs it: running an errored
	// episode again is a second draw of it. Not with DropErrors.
	ErrorsFinal bool
	// Visit, when set, receives the key of every kept record instead of
	// Recovery.Done being filled: a caller with its own index of episodes
	// (the engine's bitset over the dataset) saves a map of every key.
	// variant and sampleID are valid only during the call.
	Visit func(variant, sampleID []byte, epoch int)
}

// Recovery is what Open found in an existing log.
type Recovery struct {
	RunID   string                // the run the log belongs to; "" for an empty log
	Records int                   // committed records kept
	Done    map[sink.Key]struct{} // episodes with a final record (any status but error, unless OpenOptions.ErrorsFinal); nil with OpenOptions.Visit
	Dropped int                   // error records removed so that their episodes run again
	Torn    *TornTailError        // the torn tail that was cut off, if any
	// TraceEnd is one past the largest transcript offset a record links
	// to (0 for none): a trace store resumed with this log must not give
	// an offset below it to a new transcript (Writer.SkipTo), or an older
	// record's link would show another episode's.
	TraceEnd int64
}

// Open recovers the log at path and opens it for appending, creating it
// if missing; an empty file is a fresh log. It holds the log's lock (see
// the package doc) from its first step, so a log in use fails at once with
// a *LockedError.
//
// A torn tail, what a crash in the middle of a write leaves, is cut off and
// reported in Recovery.Torn: a last line without its newline that is a
// prefix of a record as AppendJSON writes it, or a complete last line that
// does not parse but starts as one does. With DropErrors, error records are
// removed (see OpenOptions). Anything else that is not a committed record
// is an error and nothing is cut or rewritten: a file that is not a
// proctor log (*NotLogError), a corrupt line (*CorruptError), a record of
// another schema (*SchemaError), a log holding more than one run. A path
// that is not a regular file (a directory, a FIFO, a device) is an error
// before anything is opened or created.
//
// A line counts as committed exactly when json.Unmarshal into a [sink.Record]
// accepts it, as [Records] does; Open checks that with a scan that
// validates the whole line but builds only its key fields, so that
// resuming a log of a million records starts new work in well under a
// second.
func Open(path string, opts *OpenOptions) (*Writer, *Recovery, error) {
	if opts == nil {
		opts = &OpenOptions{}
	}
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, nil, &NotLogError{Path: path, Err: fmt.Errorf("not a regular file (%v)", st.Mode().Type())}
	}
	lk, err := lock(path)
	if err != nil {
		return nil, nil, err
	}
	w, rec, err := open(path, opts, lk)
	if err != nil {
		unlock(path, lk)
		return nil, nil, err
	}
	return w, rec, nil
}

func open(path string, opts *OpenOptions, lk *os.File) (*Writer, *Recovery, error) {
	visit := opts.Visit
	rec := &Recovery{}
	if visit == nil {
		rec.Done = map[sink.Key]struct{}{}
		visit = func(variant, id []byte, epoch int) {
			rec.Done[sink.Key{Variant: string(variant), SampleID: string(id), Epoch: epoch}] = struct{}{}
		}
	}
	keepLimits := opts.DropErrors && opts.KeepLimits
	err := scanIndex(path, rec, keepLimits, opts.ErrorsFinal && !opts.DropErrors, visit)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	if rec.Torn != nil {
		if err := os.Truncate(path, rec.Torn.Offset); err != nil {
			return nil, nil, fmt.Errorf("jsonl: cutting torn tail: %w", err)
		}
	}
	if opts.DropErrors && rec.Dropped > 0 {
		if err := dropErrorRecords(path, keepLimits); err != nil {
			return nil, nil, err
		}
	} else {
		rec.Records += rec.Dropped
		rec.Dropped = 0
	}
	w, err := appendLocked(path, lk, &opts.Options)
	if err != nil {
		return nil, nil, err
	}
	return w, rec, nil
}

// dropped reports a record DropErrors removes.
func dropped(k recordjson.LineKey, keepLimits bool) bool {
	return k.Status == sink.Error && !(keepLimits && k.ErrorKind == sink.KindLimit)
}

// linkOffset is the OFFSET of a trace link PATH#OFFSET; -1 for none.
func linkOffset(link []byte) int64 {
	i := bytes.LastIndexByte(link, '#')
	if i < 0 || i == len(link)-1 {
		return -1
	}
	var n int64
	for _, c := range link[i+1:] {
		if c < '0' || c > '9' || n > (1<<62)/10 {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// NotLogError reports a file that is not a proctor log: Open leaves it as
// it is rather than append to it or cut anything off.
type NotLogError struct {
	Path string
	Line int   // the first line that is not a record; 0 for the file as a whole
	Err  error // why
}

func (e *NotLogError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("jsonl: %s is not a proctor log: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("jsonl: %s is not a proctor log: line %d is not a record: %v", e.Path, e.Line, e.Err)
}

func (e *NotLogError) Unwrap() error { return e.Err }

// recordStart is how every line AppendJSON writes begins.
const recordStart = `{"schema":`

// looksLikeRecord reports whether b starts as a record line does, or, cut
// short, could: the test of a torn tail.
func looksLikeRecord(b []byte) bool {
	if len(b) < len(recordStart) {
		return len(b) > 0 && recordStart[:len(b)] == string(b)
	}
	return string(b[:len(recordStart)]) == recordStart
}

// scanIndex reads every line, validates it and visits its key.
func scanIndex(path string, rec *Recovery, keepLimits, errorsFinal bool, visit func([]byte, []byte, int)) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("jsonl: %w", err)
	}
	if !st.Mode().IsRegular() { // replaced since Open's first look
		return &NotLogError{Path: path, Err: fmt.Errorf("not a regular file (%v)", st.Mode().Type())}
	}
	// A log starts with a record's opening brace; anything else (a binary
	// file without a newline in its first gigabyte, say) is refused before
	// a line of it is buffered.
	var head [1]byte
	if n, _ := f.ReadAt(head[:], 0); n == 1 && head[0] != '{' {
		return &NotLogError{Path: path, Line: 1, Err: errors.New("it does not start with '{'")}
	}
	committed := 0
	apply := func(k recordjson.LineKey, num int) error {
		committed++
		if rec.RunID == "" {
			rec.RunID = string(k.RunID)
		} else if string(k.RunID) != rec.RunID {
			return fmt.Errorf("jsonl: %s:%d: record of run %q in the log of run %q: one log holds one run", path, num, k.RunID, rec.RunID)
		}
		if off := linkOffset(k.Transcript); off >= rec.TraceEnd {
			rec.TraceEnd = off + 1
		}
		if !errorsFinal && dropped(k, keepLimits) {
			rec.Dropped++
			return nil
		}
		rec.Records++
		visit(k.Variant, k.SampleID, k.Epoch)
		return nil
	}
	// Every core checks whole lines up to the first that is not a record;
	// from there on (a torn tail, a corrupt line: rare, and short) one
	// line at a time, with the rule Records applies.
	off, num, err := recordjson.ScanChunks(f, checkKeys, func(c *recordjson.Chunk[numKey]) error {
		for _, k := range c.Out {
			if err := apply(k.LineKey, k.num); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("jsonl: read %s: %w", path, err)
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("jsonl: read %s: %w", path, err)
	}
	err = scanLinesFrom(path, f, num, off, func(l line) error {
		if blank(l.data) && !l.incomplete {
			return nil
		}
		k, err := checkLine(path, l, committed)
		if err != nil {
			return err
		}
		return apply(k, l.num)
	})
	var torn *TornTailError
	if errors.As(err, &torn) {
		rec.Torn = torn
		return nil
	}
	return err
}

// dropErrorRecords rewrites the log without its error records: a new file
// beside it, fsynced, renamed over it, and the directory fsynced. The
// caller holds the lock and has validated every line.
func dropErrorRecords(path string, keepLimits bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("jsonl: dropping error records: %w", err)
	}
	defer f.Close()
	perm := os.FileMode(0o644)
	if st, err := f.Stat(); err == nil {
		perm = st.Mode().Perm() // the log keeps its permissions
	}
	err = atomicfile.Write(path, perm, func(w *bufio.Writer) error {
		return scanLines(path, f, func(l line) error {
			if k, err := recordjson.ScanLine(l.data); err == nil && dropped(k, keepLimits) {
				return nil
			}
			w.Write(l.data)
			return w.WriteByte('\n') // a bufio.Writer keeps its first error
		})
	})
	if err != nil {
		return fmt.Errorf("jsonl: dropping error records: %w", err)
	}
	return nil
}
