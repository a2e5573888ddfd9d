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
// comes first, never once per line. A full buffer is written by the
// Writer's own goroutine while callers fill a second one, so that the
// caller never pays for the write(2); writes never overlap and keep the
// order of the calls. A crash (even kill -9) can lose only the
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

	mu    sync.Mutex
	f     *os.File
	buf   []byte // lines appended since the last hand-off
	out   []byte // a full buffer handed to syncLoop, not yet in the file
	spare []byte // the other buffer, when not handed off: no allocation per hand-off
	// writing is set while syncLoop writes out with mu released: any
	// other write to the file waits for it (idle), so that lines reach the
	// file in the order they were appended.
	writing  bool
	idle     sync.Cond     // on mu: a write ended, out was written, or w failed or closed
	full     chan struct{} // out is waiting for syncLoop (cap 1)
	unsynced int           // records appended since the last fsync
	lastSync time.Time
	size     int64        // bytes in the file plus the buffer: the next line's offset
	first    *Writer      // flushed before this one: the transcript store a record links to
	err      error        // sticky: the first I/O error fails every later call
	syncFile func() error // f.Sync; a test's fault, set under mu
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
		stop: make(chan struct{}), done: make(chan struct{}), syncNow: make(chan struct{}, 1), full: make(chan struct{}, 1)}
	w.idle.L = &w.mu
	w.syncFile = f.Sync
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
		w.handOff()
	}
	if w.unsynced >= w.opts.SyncEvery {
		w.requestSync()
	}
	return w.err
}

// handOff queues the full buffer for syncLoop to write and goes on with
// the spare. While the previous buffer is still being written it waits
// for it first (backpressure): a Writer never holds more than two buffers.
func (w *Writer) handOff() {
	for w.out != nil && w.err == nil && !w.closed {
		w.idle.Wait()
	}
	// Another caller may have handed it off meanwhile; once closed, Close
	// writes what is left.
	if w.out != nil || w.err != nil || w.closed || len(w.buf) < w.opts.BufferSize {
		return
	}
	w.swapLocked()
	select {
	case w.full <- struct{}{}:
	default:
	}
}

// swapLocked moves buf to out and makes the spare the buffer; w.out must
// be nil.
func (w *Writer) swapLocked() {
	next := w.spare
	if next == nil { // allocated on the first hand-off: a small log never needs it
		next = make([]byte, 0, w.opts.BufferSize+4096)
	}
	w.out, w.buf, w.spare = w.buf, next[:0], nil
}

// fail records the first error; waiters must see it, or they could wait
// for a buffer that will never be written.
func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
	w.idle.Broadcast()
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
		w.handOff()
	}
	return offset, w.err
}

// WriteLineNow is WriteLine that also writes the line, and all buffered
// before it, to the file before it returns (write(2), not fsync): a
// process killed right after (even by SIGKILL) has it in the file. The
// fsync is still the group commit's.
func (w *Writer) WriteLineNow(line []byte) (offset int64, err error) {
	offset, err = w.WriteLine(line)
	if err != nil {
		return offset, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.flushLocked()
	}
	return offset, w.err
}

// CutTo cuts the file to off bytes, what is buffered first written:
// a torn tail its caller found, which no other writer can be writing
// while w holds the lock.
func (w *Writer) CutTo(off int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("jsonl: %s: %w", w.path, sink.ErrClosed)
	}
	w.flushLocked()
	if w.err != nil || off >= w.size {
		return w.err
	}
	if err := w.f.Truncate(off); err != nil {
		w.fail(fmt.Errorf("jsonl: %s: %w", w.path, err))
		return w.err
	}
	w.size = off
	return nil
}

// FlushFirst makes w flush other before each of its own writes to the file,
// so that a line of w never reaches the disk before the lines of other it
// links to (a record and its transcript).
func (w *Writer) FlushFirst(other *Writer) {
	w.mu.Lock()
	w.first = other
	w.mu.Unlock()
}

// SkipTo makes the next line start at offset off or later. A file shorter
// than that is extended to it, the gap zero bytes (a hole, on most file
// systems) ending in a newline: a trace store that was deleted or cut then
// never gives an offset an older record still links to to another line.
func (w *Writer) SkipTo(off int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("jsonl: %s: %w", w.path, sink.ErrClosed)
	}
	w.flushLocked()
	if w.err != nil || w.size >= off {
		return w.err
	}
	err := w.f.Truncate(off - 1)
	if err == nil {
		_, err = w.f.Write([]byte{'\n'}) // O_APPEND: at off-1
	}
	if err != nil {
		w.fail(fmt.Errorf("jsonl: %s: %w", w.path, err))
		return w.err
	}
	w.size = off
	return nil
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

// flushLocked writes, on the caller's goroutine, all that is buffered:
// first the lines of w.first that ours link to, then a full buffer still
// queued for syncLoop, then buf. It waits for syncLoop's write in flight,
// if any, so that the file keeps the order of the calls.
func (w *Writer) flushLocked() {
	for w.writing {
		w.idle.Wait()
	}
	if w.err != nil || (w.out == nil && len(w.buf) == 0) {
		return
	}
	if w.first != nil {
		if err := w.first.do((*Writer).flushLocked); err != nil {
			w.fail(err)
			return
		}
	}
	if w.out != nil {
		_, err := w.f.Write(w.out)
		w.out, w.spare = nil, w.out[:0]
		w.idle.Broadcast() // a caller waiting to hand off may go on
		if err != nil {
			w.fail(fmt.Errorf("jsonl: write %s: %w", w.path, err))
			return
		}
	}
	if _, err := w.f.Write(w.buf); err != nil {
		w.fail(fmt.Errorf("jsonl: write %s: %w", w.path, err))
	}
	w.buf = w.buf[:0]
}

// writeOutLocked writes w.out with mu released, after flushing w.first
// (a line must never reach the disk before the lines it links to); other
// writes to the file wait meanwhile (writing). Only syncLoop calls it.
func (w *Writer) writeOutLocked() {
	out, first := w.out, w.first
	w.writing = true
	w.mu.Unlock()
	var err error
	if first != nil {
		err = first.do((*Writer).flushLocked)
	}
	if err == nil {
		if _, werr := w.f.Write(out); werr != nil {
			err = fmt.Errorf("jsonl: write %s: %w", w.path, werr)
		}
	}
	w.mu.Lock()
	w.writing = false
	w.out, w.spare = nil, out[:0]
	if err != nil {
		w.fail(err)
	}
	w.idle.Broadcast()
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
	if err := w.syncFile(); err != nil {
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

// syncLoop writes the full buffers callers hand off, and does the group
// commits: every SyncInterval, or sooner when SyncEvery records are
// waiting. It writes outside the lock, so that callers never wait for the
// disk (unless they fill a second buffer meanwhile), and leaves the fsyncs
// to fsyncLoop, so that a slow fsync does not hold up those writes.
func (w *Writer) syncLoop() {
	defer close(w.done)
	fsyncNow, fsyncDone := make(chan struct{}, 1), make(chan struct{})
	go w.fsyncLoop(fsyncNow, fsyncDone)
	defer func() { <-fsyncDone }()
	t := time.NewTicker(w.opts.SyncInterval)
	defer t.Stop()
	for {
		commit := true
		select {
		case <-w.stop:
			return // Close writes what is left
		case <-w.full:
			commit = false
		case <-t.C:
		case <-w.syncNow:
		}
		if w.writeOut(commit) {
			select {
			case fsyncNow <- struct{}{}:
			default: // one is pending: it runs after this write
			}
		}
	}
}

func (w *Writer) fsyncLoop(now <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-w.stop:
			return // Close fsyncs
		case <-now:
			w.fsync()
		}
	}
}

// writeOut writes the buffer handed off, if any; for a group commit it
// then writes what is buffered too, and reports whether to fsync.
func (w *Writer) writeOut(commit bool) (fsync bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if commit && w.out == nil && len(w.buf) == 0 && w.unsynced == 0 {
		return false
	}
	committed := w.unsynced
	// At most twice: a full buffer queued, then the lines behind it.
	for range 2 {
		if w.closed || w.err != nil {
			return false // Close writes what is left
		}
		if w.out == nil {
			if !commit || len(w.buf) == 0 {
				break
			}
			w.swapLocked()
		}
		w.writeOutLocked()
	}
	if !commit || w.closed || w.err != nil {
		return false
	}
	// Lines appended while the lock was released wait for the next commit.
	w.unsynced = max(0, w.unsynced-committed)
	return true
}

// fsync syncs the files this writer's lines depend on, then its own; an
// error is kept for the next call to report.
func (w *Writer) fsync() {
	w.mu.Lock()
	first, syncFile := w.first, w.syncFile
	w.mu.Unlock()
	if first != nil {
		first.fsync()
	}
	if err := syncFile(); err != nil {
		// Kept even once Close has begun (it waits for this fsync): an
		// fsync reports a write-back error once, so Close's own fsync
		// would succeed on lines that may be lost.
		w.mu.Lock()
		w.fail(fmt.Errorf("jsonl: sync %s: %w", w.path, err))
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
	w.idle.Broadcast() // callers waiting to hand off a buffer leave it to us
	w.mu.Unlock()
	close(w.stop)
	<-w.done // no write by syncLoop runs past this point

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
