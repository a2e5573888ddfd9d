package jsonl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pipeWriter returns a Writer whose file is the write end of a pipe: a
// write(2) larger than what the pipe holds (64 KiB on Linux) blocks until
// the test reads r.
func pipeWriter(t *testing.T, opts *Options) (w *Writer, r *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	lk, err := lock(path)
	require.NoError(t, err)
	r, pw, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return newWriter(path, pw, lk, opts), r
}

// closePipeWriter closes w, accepting the error fsync gives for a pipe.
func closePipeWriter(t *testing.T, w *Writer) {
	t.Helper()
	if err := w.Close(context.Background()); err != nil {
		require.ErrorIs(t, err, syscall.EINVAL, "a pipe cannot be fsynced; any other error is real")
	}
}

func readAllAsync(r io.Reader) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	return got
}

func paddedLine(i, pad int) []byte {
	return fmt.Appendf(nil, `{"i":%d,"pad":%q}`, i, strings.Repeat("x", pad))
}

// The caller that fills the buffer must not do its write(2): with nobody
// reading the pipe, that write cannot finish, yet WriteLine returns. The
// caller then fills the second buffer and waits (memory stays bounded).
func TestWriteLineLeavesTheWriteToTheBackground(t *testing.T) {
	t.Parallel()
	const bufSize = 256 << 10 // more than the pipe holds
	w, r := pipeWriter(t, &Options{BufferSize: bufSize, SyncInterval: time.Hour})

	var want bytes.Buffer // read by the test only once finished is received
	var offsets []int64
	lineLen := len(paddedLine(0, 330)) + 1 // the shortest line
	handedOff := make(chan struct{})
	finished := make(chan error, 1)
	go func() {
		for i := 0; want.Len() < 3*bufSize; i++ {
			line := paddedLine(i, 330)
			off, err := w.WriteLine(line)
			if err != nil {
				finished <- err
				return
			}
			offsets = append(offsets, off)
			want.Write(line)
			want.WriteByte('\n')
			if want.Len() >= bufSize && want.Len()-lineLen < bufSize {
				close(handedOff) // the first buffer is full: its write started
			}
		}
		finished <- nil
	}()

	var writerErr error
	done := false
	select {
	case <-handedOff:
		// Nothing has been read, so the write of the full buffer is pending.
		select {
		case writerErr = <-finished:
			done = true
			t.Error("three buffers were appended while the first could not reach the file: no backpressure")
		case <-time.After(200 * time.Millisecond):
			require.LessOrEqual(t, w.Size(), int64(2*(bufSize+lineLen+8)), "more than two buffers held")
		}
	case <-time.After(10 * time.Second):
		t.Error("WriteLine did not return while its full buffer waited to be written: the caller does the write(2)")
	}

	got := readAllAsync(r) // unblocks the writes; ends when Close closes the pipe
	if !done {
		select {
		case writerErr = <-finished:
		case <-time.After(10 * time.Second):
			t.Fatal("the writer did not finish once the pipe was read")
		}
	}
	require.NoError(t, writerErr)
	closePipeWriter(t, w)
	data := <-got
	require.Equal(t, want.Len(), len(data))
	require.True(t, bytes.Equal(want.Bytes(), data), "the pipe got other bytes than the lines in order")
	var pos int64
	for i, off := range offsets {
		require.Equal(t, pos, off, "offset of line %d", i)
		pos += int64(len(paddedLine(i, 330)) + 1)
	}
}

// A failed background write is reported by the next call, and by Close.
func TestBackgroundWriteErrorIsSticky(t *testing.T) {
	t.Parallel()
	w, r := pipeWriter(t, &Options{BufferSize: 4096, SyncInterval: time.Hour})
	require.NoError(t, r.Close()) // writes now fail (EPIPE)
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; err == nil && time.Now().Before(deadline); i++ {
		_, err = w.WriteLine(paddedLine(i, 100))
	}
	require.ErrorIs(t, err, syscall.EPIPE)
	_, err = w.WriteLine([]byte(`{}`))
	require.ErrorIs(t, err, syscall.EPIPE, "the error is sticky")
	require.ErrorIs(t, w.Close(context.Background()), syscall.EPIPE)
}

// Many writers, hand-offs, group commits and Flush at once: the file holds
// every line exactly once, each at the offset WriteLine returned, in the
// order of each writer's calls, and a Flush returns only once what was
// appended before it is in the file.
func TestConcurrentWritersOrderAndOffsets(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	// A small buffer for many hand-offs; a short interval for commits among them.
	w, err := Create(path, &Options{BufferSize: 4096, SyncInterval: time.Millisecond})
	require.NoError(t, err)

	type written struct {
		off  int64
		line []byte
	}
	const writers, lines = 8, 600
	got := make([][]written, writers)
	var wg sync.WaitGroup
	for k := range writers {
		wg.Go(func() {
			for i := range lines {
				pad := (i*7 + k*13) % 600
				if i%200 == 199 {
					pad = 3 * 4096 // a line larger than the buffer
				}
				line := fmt.Appendf(nil, `{"w":%d,"i":%d,"pad":%q}`, k, i, strings.Repeat("x", pad))
				off, err := w.WriteLine(line)
				if err != nil {
					t.Error(err)
					return
				}
				got[k] = append(got[k], written{off, line})
			}
		})
	}
	var stop atomic.Bool
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		for !stop.Load() {
			appended := w.Size()
			if err := w.Flush(); err != nil {
				t.Error(err)
				return
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Error(err)
				return
			}
			if st.Size() < appended {
				t.Errorf("after Flush the file has %d bytes, %d were appended before it", st.Size(), appended)
				return
			}
		}
	}()
	wg.Wait()
	stop.Store(true)
	<-flushed
	require.NoError(t, w.Close(context.Background()))

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var back []byte
	var all []written
	for k := range writers {
		require.Len(t, got[k], lines)
		for i, l := range got[k] {
			if i > 0 {
				require.Greater(t, l.off, got[k][i-1].off, "writer %d's lines out of order", k)
			}
			back, err = ReadLineFrom(f, l.off, back) // what ReadLineAt does, on one open file
			require.NoError(t, err)
			require.Equal(t, string(l.line), string(back))
		}
		all = append(all, got[k]...)
	}
	slices.SortFunc(all, func(a, b written) int { return int(a.off - b.off) })
	var want bytes.Buffer
	for _, l := range all {
		require.Equal(t, int64(want.Len()), l.off, "a gap or overlap before offset %d", l.off)
		want.Write(l.line)
		want.WriteByte('\n')
	}
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want.Bytes(), data), "the file is not exactly the lines at their offsets")
}

// A log line must never be in the file before the transcript line it links to,
// also when syncLoop writes the log's full buffers.
func TestFlushFirstOrderWithBackgroundWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tracePath, logPath := filepath.Join(dir, "traces.jsonl"), filepath.Join(dir, "log.jsonl")
	// The transcript store's buffer outlasts many of the log's: only FlushFirst
	// puts its lines in the file in time.
	traces, err := Create(tracePath, &Options{BufferSize: 64 << 10, SyncInterval: time.Hour})
	require.NoError(t, err)
	log, err := Create(logPath, &Options{BufferSize: 1024, SyncInterval: time.Hour})
	require.NoError(t, err)
	log.FlushFirst(traces)

	// check reads the log before the transcript store: a transcript line on disk
	// before the log line that links to it is still there after.
	check := func() error {
		logData, err := os.ReadFile(logPath)
		if err != nil {
			return err
		}
		traceData, err := os.ReadFile(tracePath)
		if err != nil {
			return err
		}
		for len(logData) > 0 {
			line, rest, complete := bytes.Cut(logData, []byte("\n"))
			logData = rest
			if !complete {
				break // the end of a write being made
			}
			is, offs, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(string(line), `{"i":`), "}"), `,"trace":`)
			i, err1 := strconv.Atoi(is)
			off, err2 := strconv.ParseInt(offs, 10, 64)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("log line %q", line)
			}
			prefix := `{"trace":` + is + `,`
			if off >= int64(len(traceData)) || !bytes.HasPrefix(traceData[off:], []byte(prefix)) ||
				!bytes.Contains(traceData[off:], []byte("\n")) {
				return fmt.Errorf("log line %d is in the file before its transcript line at offset %d (transcript store: %d bytes)", i, off, len(traceData))
			}
		}
		return nil
	}

	var stop atomic.Bool
	checked := make(chan error, 1)
	go func() { // checks while syncLoop writes
		for !stop.Load() {
			if err := check(); err != nil {
				checked <- err
				return
			}
		}
		checked <- nil
	}()
	for i := range 2000 {
		off, err := traces.WriteLine(fmt.Appendf(nil, `{"trace":%d,"pad":%q}`, i, strings.Repeat("t", 200)))
		require.NoError(t, err)
		_, err = log.WriteLine(fmt.Appendf(nil, `{"i":%d,"trace":%d}`, i, off))
		require.NoError(t, err)
		if i%20 == 0 {
			require.NoError(t, check())
		}
		if i%250 == 249 {
			require.NoError(t, log.Flush())
			require.NoError(t, check())
		}
	}
	stop.Store(true)
	require.NoError(t, <-checked)
	require.NoError(t, log.Close(context.Background()))
	require.NoError(t, check())
	require.NoError(t, traces.Close(context.Background()))
}

// BenchmarkWriteLine appends 350-byte lines, as the engine's recorder
// does: the time per line is what the caller's goroutine spends.
func BenchmarkWriteLine(b *testing.B) {
	w, err := Create(filepath.Join(b.TempDir(), "log.jsonl"), nil)
	if err != nil {
		b.Fatal(err)
	}
	line := paddedLine(12345, 350-len(paddedLine(12345, 0)))
	b.SetBytes(int64(len(line) + 1))
	for b.Loop() {
		if _, err := w.WriteLine(line); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
}
