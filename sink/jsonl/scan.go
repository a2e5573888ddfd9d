package jsonl

import (
	"bytes"
	"io"
	"os"
	"runtime"

	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/sink"
)

// chunkSize is how much of a log one worker of scanParallel checks at a
// time.
var chunkSize = 4 << 20

// chunk is a run of whole lines of a log, checked by one worker.
type chunk struct {
	data  []byte
	num   int   // lines before it
	off   int64 // its offset in the file
	keys  []numKey
	stop  int // offset in data of the first line left to the sequential scan; -1 for none
	ready chan struct{}
}

type numKey struct {
	recordjson.LineKey
	num int
}

// check runs recordjson.ScanLine on each line, up to the first one that is not
// a committed record, which it leaves to checkLine.
func (c *chunk) check() {
	defer close(c.ready)
	c.stop = -1
	num := c.num
	for i := 0; i < len(c.data); {
		j := bytes.IndexByte(c.data[i:], '\n')
		l := c.data[i : i+j]
		num++
		if !blank(l) {
			k, err := recordjson.ScanLine(l)
			if err != nil || k.Schema != sink.SchemaVersion {
				c.stop = i
				return
			}
			c.keys = append(c.keys, numKey{k, num})
		}
		i += j + 1
	}
}

// scanParallel checks the whole lines of f on every core and calls apply
// with each committed record's key, in file order. It stops at the first
// line that is not a committed record, or at the end of the last complete
// line, and returns where: the caller scans on from there one line at a
// time, which knows a torn tail from a corrupt line.
func scanParallel(f *os.File, apply func(k recordjson.LineKey, num int) error) (off int64, num int, err error) {
	var (
		queue   []*chunk
		stopped bool
		queued  = runtime.GOMAXPROCS(0) + 1 // chunks in flight
		carry   []byte
		spare   []*chunk // consumed: their buffers and key slices are reused
	)
	consume := func() error {
		c := queue[0]
		queue = queue[1:]
		<-c.ready
		if stopped {
			return nil
		}
		for _, k := range c.keys {
			if err := apply(k.LineKey, k.num); err != nil {
				return err
			}
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
			*c = chunk{data: c.data[:cap(c.data)], keys: c.keys[:0]}
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
			go c.check()
			queue = append(queue, c)
			if len(queue) >= queued {
				if err := consume(); err != nil {
					return 0, 0, err
				}
			}
		}
		if eof {
			break
		}
	}
	for len(queue) > 0 && !stopped {
		if err := consume(); err != nil {
			return 0, 0, err
		}
	}
	if !stopped {
		off, num = pos, lines
	}
	return off, num, nil
}
