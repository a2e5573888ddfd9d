package dataset

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
)

// Line is one non-blank line of a file, as Lines yields it.
type Line struct {
	Number int    // 1-based
	Bytes  []byte // valid until the next iteration
	Skip   int    // bytes cut from the start of the line (a byte-order mark): add to columns
}

// Lines yields the non-blank lines of the file at path, reading lines of
// any length up to maxLineBytes (0 means DefaultMaxLineBytes) and skipping
// a byte-order mark at the start of the file, for loaders of line-oriented
// formats of their own. A gzip or zstd file is read decompressed, as
// [JSONL] says, its lines numbered as in the decompressed text. A line too
// long, or a compressed stream that breaks (truncated, corrupt), is a
// *RowError naming the file and line; the iteration stops at the first
// error.
func Lines(ctx context.Context, path string, maxLineBytes int) iter.Seq2[Line, error] {
	return func(yield func(Line, error) bool) {
		limit := maxLineBytes
		if limit == 0 {
			limit = DefaultMaxLineBytes
		}
		if limit < 0 {
			yield(Line{}, fmt.Errorf("dataset: MaxLineBytes is negative (%d)", limit))
			return
		}
		f, err := openText(path, limit)
		if err != nil {
			yield(Line{}, err)
			return
		}
		defer f.Close()
		r := bufio.NewReaderSize(f, 64<<10)
		skip := 0
		if skipBOM(r) {
			skip = len(bom)
		}
		var buf []byte
		for n := 1; ; n++ {
			if err := ctx.Err(); err != nil {
				yield(Line{}, err)
				return
			}
			buf = buf[:0]
			for {
				frag, err2 := r.ReadSlice('\n')
				buf = append(buf, frag...)
				err = err2
				if len(bytes.TrimSuffix(buf, []byte("\n"))) > limit {
					yield(Line{}, &RowError{File: path, Line: n, Err: fmt.Errorf("line longer than %d bytes (MaxLineBytes)", limit)})
					return
				}
				if err != bufio.ErrBufferFull {
					break
				}
			}
			if err != nil && err != io.EOF {
				// Not the torn line's fault: the stream broke (a truncated or
				// corrupt compressed file, a failing disk).
				yield(Line{}, &RowError{File: path, Line: n, Err: err})
				return
			}
			if len(bytes.TrimSpace(buf)) > 0 && !yield(Line{n, buf, skip}, nil) {
				return
			}
			skip = 0
			if err == io.EOF {
				return
			}
		}
	}
}
