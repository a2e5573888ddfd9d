// Package jsonl is proctor's durable log: an append-only JSON Lines file
// with one complete line per record. It is the source of truth of a run:
// what resume reads, what reports and exports are rebuilt from.
//
// A record is committed when its line is complete (ends in a newline) and
// parses: when [sink.Record.UnmarshalJSON] accepts it. Every reader here
// ([Open]'s resume scan, [Records]) applies that one rule.
//
// A log has one writer at a time: a Writer holds an exclusive lock (flock
// on the sidecar file <log>.lock, which names the holder's pid and host)
// from the moment it is made until Close, and a second Writer of the same
// log, in this process or another, fails at once with a *[LockedError].
// The kernel drops the lock when its holder dies, even by SIGKILL, so no
// lock is ever stale. Readers take no lock. Writes are group-committed: lines are buffered and written whole,
// and the file is fsynced every SyncEvery records or SyncInterval, whichever
// comes first, never once per line. A crash (even kill -9) can lose only the
// records not yet written, and can leave at most one torn line at the end of
// the file; [Open] reports that tail and cuts it off, and [Records] yields it
// as a *[TornTailError] after the committed records, never hiding it.
package jsonl

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/proctor-evals/proctor/sink"
)

// Options tune a Writer. The zero value means the defaults.
type Options struct {
	// SyncEvery fsyncs after this many records; default 4096.
	SyncEvery int
	// SyncInterval fsyncs at least this often while records arrive;
	// default 200ms.
	SyncInterval time.Duration
	// BufferSize is how many bytes are buffered before a write(2);
	// default 256 KiB.
	BufferSize int
}

func (o *Options) withDefaults() Options {
	var d Options
	if o != nil {
		d = *o
	}
	if d.SyncEvery <= 0 {
		d.SyncEvery = 4096
	}
	if d.SyncInterval <= 0 {
		d.SyncInterval = 200 * time.Millisecond
	}
	if d.BufferSize <= 0 {
		d.BufferSize = 256 << 10
	}
	return d
}

// Writer appends records to a log. It implements sink.Sink and is safe for
// concurrent use.
type Writer struct {
	path string
	opts Options
	lock *os.File // held until Close

	mu       sync.Mutex
	f        *os.File
	buf      []byte
	unsynced int // records written since the last fsync
	lastSync time.Time
	size     int64   // bytes in the file plus the buffer: the next line's offset
	first    *Writer // flushed before this one: the trace store a record links to
	err      error   // sticky: the first I/O error fails every later call
	closed   bool
	stop     chan struct{}
	done     chan struct{}
	syncNow  chan struct{}
}

// Create creates (or truncates) the log at path for writing. It fails with
// a *LockedError if another Writer holds the log.
func Create(path string, opts *Options) (*Writer, error) {
	lk, err := lock(path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		unlock(path, lk)
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	return newWriter(path, f, lk, opts), nil
}

// Append opens the log at path for appending, creating it if missing. It
// does not check what is already there: use [Open] to recover a log. It
// fails with a *LockedError if another Writer holds the log.
func Append(path string, opts *Options) (*Writer, error) {
	lk, err := lock(path)
	if err != nil {
		return nil, err
	}
	w, err := appendLocked(path, lk, opts)
	if err != nil {
		unlock(path, lk)
	}
	return w, err
}

func appendLocked(path string, lk *os.File, opts *Options) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	w := newWriter(path, f, lk, opts)
	w.size = st.Size()
	return w, nil
}

func newWriter(path string, f *os.File, lk *os.File, opts *Options) *Writer {
	w := &Writer{path: path, opts: opts.withDefaults(), f: f, lock: lk, lastSync: time.Now(),
		stop: make(chan struct{}), done: make(chan struct{}), syncNow: make(chan struct{}, 1)}
	w.buf = make([]byte, 0, w.opts.BufferSize+4096)
	go w.syncLoop()
	return w
}

// Size returns the log's length in bytes, including what is buffered.
func (w *Writer) Size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size
}

// Path returns the log's path.
func (w *Writer) Path() string { return w.path }

// Write appends r as one line.
func (w *Writer) Write(_ context.Context, r sink.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("jsonl: write %s: %w", w.path, sink.ErrClosed)
	}
	if w.err != nil {
		return w.err
	}
	n := len(w.buf)
	w.buf = r.AppendJSON(w.buf)
	w.buf = append(w.buf, '\n')
	w.size += int64(len(w.buf) - n)
	w.unsynced++
	if len(w.buf) >= w.opts.BufferSize {
		w.flushLocked()
	}
	if w.unsynced >= w.opts.SyncEvery {
		w.requestSync()
	}
	return w.err
}

// requestSync asks the sync goroutine for a group commit now; the writer
// goes on filling its buffer meanwhile.
func (w *Writer) requestSync() {
	select {
	case w.syncNow <- struct{}{}:
	default: // one is pending already
	}
}

// WriteLine appends one line of JSON (without its newline) and returns its
// offset in the file, which [ReadLineAt] reads it back from.
func (w *Writer) WriteLine(line []byte) (offset int64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, fmt.Errorf("jsonl: write %s: %w", w.path, sink.ErrClosed)
	}
	if w.err != nil {
		return 0, w.err
	}
	offset = w.size
	w.buf = append(w.buf, line...)
	w.buf = append(w.buf, '\n')
	w.size += int64(len(line) + 1)
	w.unsynced++
	if len(w.buf) >= w.opts.BufferSize {
		w.flushLocked()
	}
	return offset, w.err
}

// FlushFirst makes w flush other before each of its own writes to the file,
// so that a line of w never reaches the disk before the lines of other it
// links to (a record and its transcript).
func (w *Writer) FlushFirst(other *Writer) {
	w.mu.Lock()
	w.first = other
	w.mu.Unlock()
}

// Flush writes buffered lines to the file and fsyncs it.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("jsonl: flush %s: %w", w.path, sink.ErrClosed)
	}
	w.syncLocked()
	return w.err
}

func (w *Writer) flushLocked() {
	if w.err != nil || len(w.buf) == 0 {
		return
	}
	if w.first != nil {
		if err := w.first.do((*Writer).flushLocked); err != nil {
			w.err = err
			return
		}
	}
	if _, err := w.f.Write(w.buf); err != nil {
		w.err = fmt.Errorf("jsonl: write %s: %w", w.path, err)
	}
	w.buf = w.buf[:0]
}

func (w *Writer) syncLocked() {
	w.flushLocked()
	if w.err != nil {
		return
	}
	if w.first != nil {
		if err := w.first.do((*Writer).syncLocked); err != nil {
			w.err = err
			return
		}
	}
	if err := w.f.Sync(); err != nil {
		w.err = fmt.Errorf("jsonl: sync %s: %w", w.path, err)
	}
	w.unsynced = 0
	w.lastSync = time.Now()
}

// do runs f on w under its lock and returns w's error.
func (w *Writer) do(f func(*Writer)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		f(w)
	}
	return w.err
}

// syncLoop does the group commits: every SyncInterval, or sooner when
// SyncEvery records are waiting. It writes the buffer under the lock but
// fsyncs outside it, so that writers never wait for the disk.
func (w *Writer) syncLoop() {
	defer close(w.done)
	t := time.NewTicker(w.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.syncNow:
		}
		w.mu.Lock()
		if w.closed || (len(w.buf) == 0 && w.unsynced == 0) {
			w.mu.Unlock()
			continue
		}
		w.flushLocked()
		w.unsynced = 0
		err := w.err
		w.mu.Unlock()
		if err == nil {
			w.fsync()
		}
	}
}

// fsync syncs the files this writer's lines depend on, then its own; an
// error is kept for the next call to report.
func (w *Writer) fsync() {
	if w.first != nil {
		w.first.fsync()
	}
	if err := w.f.Sync(); err != nil {
		w.mu.Lock()
		if w.err == nil && !w.closed {
			w.err = fmt.Errorf("jsonl: sync %s: %w", w.path, err)
		}
		w.mu.Unlock()
	}
}

// Close flushes, fsyncs and closes the log, then releases its lock. It
// ignores ctx's cancellation: committing what was written is the point.
// Closing twice is a no-op.
func (w *Writer) Close(context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done // no group commit runs past this point

	w.mu.Lock()
	defer w.mu.Unlock()
	w.syncLocked()
	err := w.err
	if cerr := w.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("jsonl: close %s: %w", w.path, cerr)
	}
	if cerr := unlock(w.path, w.lock); cerr != nil && err == nil {
		err = fmt.Errorf("jsonl: unlock %s: %w", w.path, cerr)
	}
	return err
}
