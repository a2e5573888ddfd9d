package dataset

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// The text loaders read gzip and zstd files decompressed; [JSONL] documents
// the rules. Decompression streams: memory stays bounded by the line limit
// and, for zstd, by maxZstdWindow.

// maxZstdWindow bounds the window a zstd frame may ask for (and so the
// decoder's memory): 128 MiB, the zstd command's own default limit; the
// Collector's file exporter writes 8 MiB windows.
const maxZstdWindow = 128 << 20

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// textFile is a file opened for reading as text: decompressed when it is
// gzip or zstd. Its Read counts the lines it has passed, so that an error
// of the compressed stream (truncated, corrupt) names the line it broke.
type textFile struct {
	f      *os.File
	r      io.Reader
	format string // "gzip", "zstd", or "" for plain text
	close  func()
	lines  int   // newlines read so far
	err    error // the first error other than io.EOF
}

// openText opens the file at path; see textFile. limit bounds a message
// of the Collector's framing (see zstdMessages). Its errors carry the
// package prefix and the path.
func openText(path string, limit int) (*textFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	t := &textFile{f: f}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(4 + len(zstdMagic))
	switch {
	case len(head) == 8 && bytes.Equal(head[4:], zstdMagic):
		t.format = "zstd"
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow),
			zstd.WithDecoderMaxMemory(uint64(limit)))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("dataset: %s: %w", path, streamError("zstd", err))
		}
		t.r, t.close = &zstdMessages{r: br, dec: dec, limit: limit}, dec.Close
	case bytes.HasPrefix(head, gzipMagic):
		t.format = "gzip"
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("dataset: %s: %w", path, streamError("gzip", err))
		}
		t.r, t.close = zr, func() { zr.Close() }
	case bytes.HasPrefix(head, zstdMagic):
		t.format = "zstd"
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("dataset: %s: %w", path, streamError("zstd", err))
		}
		t.r, t.close = zr, zr.Close
	case strings.HasSuffix(path, ".gz"):
		f.Close()
		return nil, fmt.Errorf("dataset: %s: named .gz but not gzip-compressed", path)
	case strings.HasSuffix(path, ".zst"):
		f.Close()
		return nil, fmt.Errorf("dataset: %s: named .zst but not zstd-compressed", path)
	default:
		t.r = br
	}
	return t, nil
}

// Read reads decompressed text. An error of the compressed stream says
// which format and that the file is truncated or corrupt.
// The error is sticky: a bufio.Reader's Peek (skipping a byte-order mark)
// returns an error once and forgets it, and a reader of the Collector's
// messages would otherwise read on after a cut one.
func (t *textFile) Read(p []byte) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	n, err := t.r.Read(p)
	t.lines += bytes.Count(p[:n], []byte{'\n'})
	if err != nil && err != io.EOF {
		if t.format != "" {
			err = streamError(t.format, err)
		}
		t.err = err
	}
	return n, err
}

// Line is the 1-based line of the decompressed text that Read has
// reached.
func (t *textFile) Line() int { return t.lines + 1 }

func (t *textFile) Close() error {
	if t.close != nil {
		t.close()
	}
	return t.f.Close()
}

func streamError(format string, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // an empty or cut header
	}
	return fmt.Errorf("truncated or corrupt %s stream: %w", format, err)
}

// zstdMessages reads what the OpenTelemetry Collector's file exporter
// writes with compression zstd (unless its exporter.file.nativeCompression
// gate, v0.154+, makes it a plain zstd stream): each message a 4-byte
// big-endian length and a zstd frame of that length. It yields the
// messages (compact JSON export requests) one per line.
type zstdMessages struct {
	r     *bufio.Reader
	dec   *zstd.Decoder
	limit int          // bounds a message, compressed and not
	frame bytes.Buffer // the compressed message
	out   []byte       // the message and its newline
	rest  []byte       // what of out Read has not returned
}

func (z *zstdMessages) Read(p []byte) (int, error) {
	for len(z.rest) == 0 {
		var size [4]byte
		if _, err := io.ReadFull(z.r, size[:]); err != nil {
			return 0, err // io.EOF between messages, io.ErrUnexpectedEOF within
		}
		n := binary.BigEndian.Uint32(size[:])
		if uint64(n) > uint64(z.limit) {
			return 0, fmt.Errorf("a message of %d compressed bytes, over the limit of %d", n, z.limit)
		}
		// Grown as the bytes come, not to the length the file claims.
		z.frame.Reset()
		if m, _ := io.CopyN(&z.frame, z.r, int64(n)); m < int64(n) {
			return 0, io.ErrUnexpectedEOF
		}
		out, err := z.dec.DecodeAll(z.frame.Bytes(), z.out[:0])
		if err != nil {
			return 0, err
		}
		z.out = append(out, '\n')
		z.rest = z.out
	}
	n := copy(p, z.rest)
	z.rest = z.rest[n:]
	return n, nil
}
