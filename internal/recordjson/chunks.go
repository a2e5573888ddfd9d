package recordjson

import (
	"bytes"
	"io"
	"runtime"
)

// ChunkSize is how much of a log one worker of ScanChunks takes at a time.
var ChunkSize = 4 << 20

// Chunk is a run of whole lines of a log, worked on by one goroutine.
type Chunk[T any] struct {
	Data []byte // whole lines, each with its newline
	Num  int    // lines before it
	Off  int64  // its offset in the file
	Out  []T    // what the work made of it
	// Stop is the offset in Data of the first line the work left to a
	// sequential reader (a line that is not a committed record); -1 for
	// none.
	Stop int
	// Aux is the caller's, for what its work made of the chunk besides
	// Out.
	Aux   any
	ready chan struct{}
}

// EachLine calls fn with each non-blank line of c (without its newline),
// its offset in c.Data and its 1-based line number, up to the first line
// for which fn returns false, where it sets c.Stop.
func (c *Chunk[T]) EachLine(fn func(line []byte, i, num int) bool) {
	num := c.Num
	for i := 0; i < len(c.Data); {
		j := bytes.IndexByte(c.Data[i:], '\n')
		l := c.Data[i : i+j]
		num++
		if len(bytes.TrimSpace(l)) > 0 && !fn(l, i, num) {
			c.Stop = i
			return
		}
		i += j + 1
	}
}

// ScanChunks is the parallel half of every reader of a log: it reads the
// whole lines of f from where it stands in chunks, runs work on each chunk
// on its own goroutine (a few chunks in flight per core) and passes the
// chunks to consume in file order. It stops after the first chunk whose
// work stopped short (Stop >= 0), or at the end of the last complete line,
// and returns where (the offset from f's start position, and the lines
// before it): the caller reads on from there one line at a time, which
// knows a torn tail from a corrupt line. consume may keep nothing of a
// chunk: its buffers are reused.
func ScanChunks[T any](f io.Reader, work func(*Chunk[T]), consume func(*Chunk[T]) error) (off int64, num int, err error) {
	var (
		queue   []*Chunk[T]
		stopped bool
		queued  = runtime.GOMAXPROCS(0) + 1 // chunks in flight
		carry   []byte
		spare   []*Chunk[T] // consumed: their buffers are reused
	)
	size := ChunkSize
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
		if c.Stop >= 0 {
			stopped = true
			off = c.Off + int64(c.Stop)
			num = c.Num + bytes.Count(c.Data[:c.Stop], []byte{'\n'})
		}
		if cap(c.Data) == size {
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
	want := size
	for !stopped {
		var c *Chunk[T]
		if n := len(spare); n > 0 && want == size && len(carry) < size/2 {
			c, spare = spare[n-1], spare[:n-1]
			*c = Chunk[T]{Data: c.Data[:cap(c.Data)], Out: c.Out[:0]}
		} else {
			c = &Chunk[T]{Data: make([]byte, max(want, 2*len(carry)))}
		}
		buf := c.Data
		n := copy(buf, carry)
		m, rerr := io.ReadFull(f, buf[n:])
		data := buf[:n+m]
		end := bytes.LastIndexByte(data, '\n') + 1
		eof := rerr == io.EOF || rerr == io.ErrUnexpectedEOF
		if rerr != nil && !eof {
			return 0, 0, rerr
		}
		if end == 0 && !eof {
			carry, want = data, 2*len(data) // a line longer than the buffer
			continue
		}
		carry, want = data[end:], size
		if end > 0 {
			c.Data, c.Num, c.Off, c.Stop, c.ready = data[:end], lines, pos, -1, make(chan struct{})
			lines += bytes.Count(c.Data, []byte{'\n'})
			pos += int64(end)
			go func() {
				defer close(c.ready)
				work(c)
			}()
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
