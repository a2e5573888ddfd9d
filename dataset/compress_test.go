package dataset_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
)

func gzipped(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zstdEncoder is shared: EncodeAll may be called concurrently, and a new
// encoder per call would slow the fuzzer down tenfold.
var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		panic(err)
	}
	return zw
})

func zstded(_ testing.TB, b []byte) []byte { return zstdEncoder().EncodeAll(b, nil) }

// compressions are the formats the text loaders read: the file's suffix
// and how to make its content.
var compressions = []struct {
	ext      string
	compress func(testing.TB, []byte) []byte
}{
	{"", func(_ testing.TB, b []byte) []byte { return b }},
	{".gz", gzipped},
	{".zst", func(t testing.TB, b []byte) []byte { return zstded(t, b) }},
}

// load collects d's samples and its error, with path replaced by FILE so
// that files of different names compare.
func load[T any](d dataset.Dataset[T], path string) ([]dataset.Sample[T], string) {
	got, err := dataset.Collect(context.Background(), d)
	if err != nil {
		return got, strings.ReplaceAll(err.Error(), path, "FILE")
	}
	return got, ""
}

// A gzip or zstd file loads as its text does, samples and row errors alike
// (lines numbered in the decompressed text, the compressed file named).
func TestCompressedFilesLoadAsTheirText(t *testing.T) {
	t.Parallel()
	jsonl := "\uFEFF" + `{"id":"a","input":{"q":"1+1","a":2}}` + "\n\n" + `{"id":"b","input":{"q":"2+2","a":4},"tags":{"level":"hard"}}` + "\n"
	csvText := "id,question,answer,level\na,\"1+1\",2,easy\nb,\"2+2\nstill\",4,hard\n"
	for _, tc := range []struct {
		name, text string
		wantErr    string // in the plain file's error, with FILE for the path
		load       func(path string) (any, string)
	}{
		{"jsonl", jsonl, "", func(p string) (any, string) { return load(dataset.JSONL[task]{Path: p}, p) }},
		{"jsonl bad line", jsonl + `{"id":"c","input":{"q":1}}` + "\n", "dataset: FILE:4:", func(p string) (any, string) { return load(dataset.JSONL[task]{Path: p}, p) }},
		{"csv", csvText, "", func(p string) (any, string) { return load(dataset.CSV[task]{Path: p, Parse: parseRow}, p) }},
		{"csv bad record", csvText + "c,q,x,easy\n", "dataset: FILE:5: answer", func(p string) (any, string) {
			return load(dataset.CSV[task]{Path: p, Parse: parseRow}, p)
		}},
		{"lines", "one\n\n two \n", "", func(p string) (any, string) {
			var got []string
			for l, err := range dataset.Lines(context.Background(), p, 0) {
				if err != nil {
					return got, strings.ReplaceAll(err.Error(), p, "FILE")
				}
				got = append(got, fmt.Sprintf("%d:%q", l.Number, l.Bytes))
			}
			return got, ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var want any
			for i, c := range compressions {
				path := filepath.Join(dir, "data"+c.ext)
				require.NoError(t, os.WriteFile(path, c.compress(t, []byte(tc.text)), 0o644))
				got, gotErr := tc.load(path)
				if i == 0 {
					want = got
					if tc.wantErr == "" {
						require.Empty(t, gotErr)
					} else {
						require.Contains(t, gotErr, tc.wantErr)
					}
					continue
				}
				require.Equal(t, want, got, c.ext)
				_, plainErr := tc.load(filepath.Join(dir, "data"))
				require.Equal(t, plainErr, gotErr, c.ext)
			}
		})
	}
}

// The format is the content's, not the name's: a gzip file named .jsonl
// loads; a file named .gz or .zst that is not compressed is an error
// naming it, as a compressed stream that breaks is one naming the line it
// reached.
func TestCompressedFileErrors(t *testing.T) {
	t.Parallel()
	var text strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&text, `{"id":"s%d","input":{"q":"%d","a":%d}}`+"\n", i, i, i)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, b, 0o644))
		return path
	}
	loadErr := func(path string) (int, error) {
		got, err := dataset.Collect(context.Background(), dataset.JSONL[task]{Path: path})
		return len(got), err
	}

	n, err := loadErr(write("misnamed.jsonl", gzipped(t, []byte(text.String()))))
	require.NoError(t, err)
	require.Equal(t, 10000, n)

	for _, tc := range []struct{ name, want string }{
		{"plain.jsonl.gz", "named .gz but not gzip-compressed"},
		{"plain.jsonl.zst", "named .zst but not zstd-compressed"},
	} {
		path := write(tc.name, []byte(`{"id":"a"}`+"\n"))
		_, err := loadErr(path)
		require.ErrorContains(t, err, path+": "+tc.want)
		_, err = loadErr(write("empty-"+tc.name, nil))
		require.ErrorContains(t, err, tc.want)
	}

	var csvText strings.Builder
	csvText.WriteString("id,question,answer,level\n")
	for i := range 10000 {
		fmt.Fprintf(&csvText, "s%d,%d,%d,easy\n", i, i, i)
	}
	for name, text := range map[string]string{"JSONL": text.String(), "CSV": csvText.String()} {
		gz := gzipped(t, []byte(text))
		zs := zstded(t, []byte(text))
		corrupt := bytes.Clone(gz)
		corrupt[len(corrupt)-6] ^= 0xff // the CRC-32 of the trailer
		for _, tc := range []struct {
			name string
			data []byte
			want string
		}{
			{"cut.gz", gz[:len(gz)*9/10], "truncated or corrupt gzip stream: unexpected EOF"},
			{"cut.zst", zs[:len(zs)*9/10], "truncated or corrupt zstd stream"},
			{"crc.gz", corrupt, "truncated or corrupt gzip stream: gzip: invalid checksum"},
			{"header.gz", gz[:5], "truncated or corrupt gzip stream: unexpected EOF"},
			{"header.zst", zs[:5], "truncated or corrupt zstd stream"},
		} {
			path := write(name+"-"+tc.name, tc.data)
			d := dataset.Dataset[task](dataset.JSONL[task]{Path: path})
			if name == "CSV" {
				d = dataset.CSV[task]{Path: path, Parse: parseRow}
			}
			_, err := dataset.Collect(context.Background(), d)
			require.ErrorContains(t, err, tc.want, path)
			require.ErrorContains(t, err, "dataset: "+path+":", path)
			// A cut header may fail at open (no line) or at the first read.
			var re *dataset.RowError
			switch {
			case errors.As(err, &re):
				require.Equal(t, path, re.File)
				if strings.HasPrefix(tc.name, "header") {
					require.Equal(t, 1, re.Line, path)
				} else {
					require.Greater(t, re.Line, 1, path) // where the stream broke
				}
			case !strings.HasPrefix(tc.name, "header"):
				t.Fatalf("%s: not a *RowError: %v", path, err)
			}
		}
	}

	// A zstd frame may not ask for a window over 128 MiB (memory).
	var big bytes.Buffer
	zw, err := zstd.NewWriter(&big, zstd.WithWindowSize(256<<20), zstd.WithLowerEncoderMem(true))
	require.NoError(t, err)
	zw.Write([]byte(text.String()))
	require.NoError(t, zw.Close())
	_, err = loadErr(write("window.jsonl.zst", big.Bytes()))
	require.ErrorContains(t, err, "window size exceeded")
}

// A Collector message whose length claims 200 MB in a file of a few bytes
// is cut short, and costs no 200 MB. Not parallel: it measures the
// process's allocations.
func TestZstdMessageLengthIsNotTrusted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "traces.zst")
	require.NoError(t, os.WriteFile(path, []byte{0x0b, 0xeb, 0xc2, 0x00, 0x28, 0xb5, 0x2f, 0xfd, 0x04}, 0o644))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := dataset.Collect(context.Background(), dataset.JSONL[task]{Path: path})
	runtime.ReadMemStats(&after)
	require.ErrorContains(t, err, "truncated or corrupt zstd stream: unexpected EOF")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20))
}

// FuzzCompressed loads the fuzzer's text compressed (gzip and zstd, whole
// or cut at cut bytes) and the fuzzer's bytes as a compressed stream
// (behind each magic number): every error is a *RowError naming the file
// and a line, or a whole-file error naming it, and a whole compressed
// file loads exactly as its text does.
func FuzzCompressed(f *testing.F) {
	f.Add([]byte(`{"id":"a","input":{"q":"1+1","a":2}}`+"\n"+`{"id":"b"}`), uint16(0))
	f.Add([]byte("\uFEFF"+`{"id":"a"}`+"\n"+`{"id":1}`), uint16(20))
	f.Add([]byte("id,question,answer,level\na,q,2,easy\n"), uint16(7))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, uint16(3))
	dir := f.TempDir()
	// gzip, zstd, and a zstd message of the Collector's (4-byte length).
	magics := [][]byte{{0x1f, 0x8b}, {0x28, 0xb5, 0x2f, 0xfd}, {0, 0, 0, 9, 0x28, 0xb5, 0x2f, 0xfd}}
	f.Fuzz(func(t *testing.T, text []byte, cut uint16) {
		// A text that starts with a magic number is read as compressed.
		compressedText := slices.ContainsFunc(magics, func(m []byte) bool { return bytes.HasPrefix(text, m) })
		plain := fuzzFile(t, dir, "d.jsonl", text)
		want, wantErr := load(dataset.JSONL[task]{Path: plain, MaxLineBytes: 4096}, plain)
		for _, c := range compressions[1:] {
			data := c.compress(t, text)
			path := fuzzFile(t, dir, "d.jsonl"+c.ext, data)
			got, gotErr := load(dataset.JSONL[task]{Path: path, MaxLineBytes: 4096}, path)
			if !compressedText && (gotErr != wantErr || len(got) != len(want)) {
				t.Fatalf("%s: %d samples, error %q; the text gives %d, %q", c.ext, len(got), gotErr, len(want), wantErr)
			}
			if int(cut) < len(data) {
				// One frame or member, cut: never taken for a whole file.
				path = fuzzFile(t, dir, "cut.jsonl"+c.ext, data[:cut])
				if _, err := dataset.Collect(context.Background(), dataset.JSONL[task]{Path: path, MaxLineBytes: 4096}); err == nil {
					t.Fatalf("%s cut at %d of %d bytes loads without an error", c.ext, cut, len(data))
				}
				checkCompressed(t, path, dataset.JSONL[task]{Path: path, MaxLineBytes: 4096})
				checkCompressed(t, path, dataset.CSV[task]{Path: path, Parse: parseRow})
			}
		}
		for _, magic := range magics {
			path := fuzzFile(t, dir, "raw", append(bytes.Clone(magic), text...))
			checkCompressed(t, path, dataset.JSONL[task]{Path: path, MaxLineBytes: 4096})
			checkCompressed(t, path, dataset.CSV[task]{Path: path, Parse: parseRow})
		}
	})
}

// checkCompressed is checkLoaded, but a stream whose header cannot be read
// fails at open, as does an empty file named .gz or .zst, naming the file
// but no line.
func checkCompressed[T any](t *testing.T, path string, d dataset.Dataset[T]) {
	t.Helper()
	for _, err := range d.Samples(context.Background()) {
		if err != nil {
			if msg := strings.TrimPrefix(err.Error(), "dataset: "+path+": "); strings.HasPrefix(msg, "truncated or corrupt") || strings.HasPrefix(msg, "named .") {
				return
			}
			break
		}
	}
	checkLoaded(t, path, d)
}

// BenchmarkJSONL loads a 20,000-line JSONL file plain, gzip- and
// zstd-compressed: what decompression costs, side by side.
//
//	go test -run '^$' -bench JSONL -count 5 ./dataset
func BenchmarkJSONL(b *testing.B) {
	var text strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&text, `{"id":"s%d","input":{"q":"what is %d + %d?","a":%d},"tags":{"level":"easy"}}`+"\n", i, i, i, 2*i)
	}
	dir := b.TempDir()
	for _, c := range compressions {
		path := filepath.Join(dir, "d.jsonl"+c.ext)
		if err := os.WriteFile(path, c.compress(b, []byte(text.String())), 0o644); err != nil {
			b.Fatal(err)
		}
		name := strings.TrimPrefix(c.ext, ".")
		if name == "" {
			name = "plain"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(text.Len()))
			for b.Loop() {
				n := 0
				for _, err := range (dataset.JSONL[task]{Path: path}).Samples(context.Background()) {
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n != 20000 {
					b.Fatalf("%d samples", n)
				}
			}
		})
	}
}

// TestCSVRecordIsBounded: a small compressed CSV holding one huge quoted
// field (a 96 KB .csv.zst of a 3 GiB field) was read into memory whole:
// encoding/csv has no limit. Now a record is bounded as a JSONL line is
// (CSV.MaxRecordBytes), a longer one a *RowError naming the line, plain,
// gzip or zstd.
func TestCSVRecordIsBounded(t *testing.T) {
	t.Parallel()
	text := []byte("id,input\na,\"" + strings.Repeat("x", 8<<20) + "\"\nb,fine\n")
	for _, c := range compressions {
		path := filepath.Join(t.TempDir(), "bomb.csv"+c.ext)
		require.NoError(t, os.WriteFile(path, c.compress(t, text), 0o644))
		d := dataset.CSV[string]{Path: path, MaxRecordBytes: 1 << 20, Parse: func(row map[string]string) (dataset.Sample[string], error) {
			return dataset.Sample[string]{ID: row["id"], Input: row["input"]}, nil
		}}
		_, err := dataset.Collect(context.Background(), d)
		var re *dataset.RowError
		require.ErrorAs(t, err, &re, "%s", c.ext)
		require.Equal(t, 2, re.Line, "%s", c.ext)
		require.Contains(t, err.Error(), "longer than 1048576 bytes", "%s", c.ext)
	}
}
