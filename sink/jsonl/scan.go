package jsonl

// The parallel half of every reader of a log: whole lines, cut into
// chunks, checked or decoded on every core, handed on in file order. At the
// first line that is not a committed record, the parallel half stops and
// the caller reads on one line at a time (scanLinesFrom, checkLine), which
// knows a torn tail from a corrupt line: rare, and short.

import (
	"bytes"
	"io"
	"runtime"

	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/sink"
)

// chunkSize is how much of a log one worker takes at a time.
var chunkSize = 4 << 20

// chunk is a run of whole lines of a log, worked on by one goroutine.
type chunk struct {
	data    []byte
	num     int   // lines before it
	off     int64 // its offset in the file
	keys    []numKey
	entries []Entry
	stop    int // offset in data of the first line left to the sequential reader; -1 for none
	ready   chan struct{}
}

type numKey struct {
	recordjson.LineKey
	num int
}

// eachRecordLine calls fn with each non-blank line of c and its offset in
// c.data, up to the first line for which fn returns false, where it sets
// c.stop.
func (c *chunk) eachRecordLine(fn func(l []byte, i, num int) bool) {
	defer close(c.ready)
	c.stop = -1
	num := c.num
	for i := 0; i < len(c.data); {
		j := bytes.IndexByte(c.data[i:], '\n')
		l := c.data[i : i+j]
		num++
		if !blank(l) && !fn(l, i, num) {
			c.stop = i
			return
		}
		i += j + 1
	}
}

// checkKeys runs recordjson.ScanLine on each line, up to the first one that
// is not a committed record, which it leaves to checkLine.
func (c *chunk) checkKeys() {
	c.eachRecordLine(func(l []byte, _, num int) bool {
		k, err := recordjson.ScanLine(l)
		if err != nil || k.Schema != sink.SchemaVersion {
			return false
		}
		c.keys = append(c.keys, numKey{k, num})
		return true
	})
}

// decodeEntries decodes each line, up to the first one that is not a
// committed record, which it leaves to checkLine.
func (c *chunk) decodeEntries() {
	c.eachRecordLine(func(l []byte, i, _ int) bool {
		c.entries = append(c.entries, Entry{Offset: c.off + int64(i)})
		e := &c.entries[len(c.entries)-1]
		if err := recordjson.DecodeLine(l, &e.Record, nil); err != nil || e.Schema != sink.SchemaVersion {
			c.entries = c.entries[:len(c.entries)-1]
			return false
		}
		return true
	})
}

// scanParallel reads the whole lines of f from where it stands, runs work
// on each chunk on its own goroutine (a few chunks in flight per core) and
// passes the chunks to consume in file order. It stops after the first
// chunk whose work stopped short, or at the end of the last complete line,
// and returns where (the offset relative to f's start position, and the
// lines before it): the caller reads on from there one line at a time.
// consume may keep nothing of a chunk: its buffers are reused.
func scanParallel(f io.Reader, work func(*chunk), consume func(*chunk) error) (off int64, num int, err error) {
	var (
		queue   []*chunk
		stopped bool
		queued  = runtime.GOMAXPROCS(0) + 1 // chunks in flight
		carry   []byte
		spare   []*chunk // consumed: their buffers are reused
	)
	next := func() error {
		c := queue[0]
		queue = queue[1:]
		<-c.ready
		if stopped {
			return nil
		}
		if err := consume(c); err != nil {
			return err
		}
		if c.stop >= 0 {
			stopped = true
			off = c.off + int64(c.stop)
			num = c.num + bytes.Count(c.data[:c.stop], []byte{'\n'})
		}
		if cap(c.data) == chunkSize {
			spare = append(spare, c)
		}
		return nil
	}
	defer func() {
		for _, c := range queue { // let the workers finish
			<-c.ready
		}
	}()
	var pos int64
	lines := 0
	size := chunkSize
	for !stopped {
		var c *chunk
		if n := len(spare); n > 0 && size == chunkSize && len(carry) < chunkSize/2 {
			c, spare = spare[n-1], spare[:n-1]
			*c = chunk{data: c.data[:cap(c.data)], keys: c.keys[:0], entries: c.entries[:0]}
		} else {
			c = &chunk{data: make([]byte, max(size, 2*len(carry)))}
		}
		buf := c.data
		n := copy(buf, carry)
		m, rerr := io.ReadFull(f, buf[n:])
		data := buf[:n+m]
		end := bytes.LastIndexByte(data, '\n') + 1
		eof := rerr == io.EOF || rerr == io.ErrUnexpectedEOF
		if rerr != nil && !eof {
			return 0, 0, rerr
		}
		if end == 0 && !eof {
			carry, size = data, 2*len(data) // a line longer than the buffer
			continue
		}
		carry, size = data[end:], chunkSize
		if end > 0 {
			c.data, c.num, c.off, c.ready = data[:end], lines, pos, make(chan struct{})
			lines += bytes.Count(c.data, []byte{'\n'})
			pos += int64(end)
			go work(c)
			queue = append(queue, c)
			if len(queue) >= queued {
				if err := next(); err != nil {
					return 0, 0, err
				}
			}
		}
		if eof {
			break
		}
	}
	for len(queue) > 0 && !stopped {
		if err := next(); err != nil {
			return 0, 0, err
		}
	}
	if !stopped {
		off, num = pos, lines
	}
	return off, num, nil
}
