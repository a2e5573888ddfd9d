package parquet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/proctor-evals/proctor/sink"
)

// Defaults of the options.
const (
	DefaultRowGroupRows  = 64 << 10  // 65,536 rows
	DefaultRowGroupBytes = 128 << 20 // 128 MiB of buffered values
	DefaultFileRows      = 1 << 20   // 1,048,576 rows
)

// Compression is a Parquet compression codec.
type Compression int

const (
	Zstd         Compression = iota // the default: good ratio, fast
	Snappy                          // faster, bigger files
	Gzip                            // slower, for tools that lack zstd
	Uncompressed                    // no compression
)

func (c Compression) codec() (compress.Compression, error) {
	switch c {
	case Zstd:
		return compress.Codecs.Zstd, nil
	case Snappy:
		return compress.Codecs.Snappy, nil
	case Gzip:
		return compress.Codecs.Gzip, nil
	case Uncompressed:
		return compress.Codecs.Uncompressed, nil
	}
	return 0, fmt.Errorf("parquet: unknown compression %d", int(c))
}

// An Option configures a [Writer].
type Option func(*config)

type config struct {
	compression   Compression
	level         int
	levelSet      bool
	rowGroupRows  int
	rowGroupBytes int
	fileRows      int
}

// WithCompression sets the codec of every column (default [Zstd]).
func WithCompression(c Compression) Option {
	return func(cfg *config) { cfg.compression = c }
}

// WithCompressionLevel sets the codec's level (codec-specific; the default
// is the codec's default, for zstd its "default" speed).
func WithCompressionLevel(level int) Option {
	return func(cfg *config) { cfg.level, cfg.levelSet = level, true }
}

// WithRowGroupRows sets the maximum number of rows of a row group (default
// [DefaultRowGroupRows]). The writer holds at most two row groups in memory
// as Arrow arrays (one buffering, one being written in the background), so
// this bounds its memory together with [WithRowGroupBytes].
// Values below 1 mean the default.
func WithRowGroupRows(n int) Option {
	return func(cfg *config) { cfg.rowGroupRows = n }
}

// WithRowGroupBytes sets the size of buffered string data (input, output,
// reason…) at which the writer ends a row group early (default
// [DefaultRowGroupBytes]), so that large outputs do not make a row group
// of [WithRowGroupRows] rows unbounded. Values below 1 mean the default.
func WithRowGroupBytes(n int) Option {
	return func(cfg *config) { cfg.rowGroupBytes = n }
}

// WithFileRows sets the number of rows after which the writer finishes the
// current file and starts the next one (default [DefaultFileRows]). Values
// below 1 mean the default.
func WithFileRows(n int) Option {
	return func(cfg *config) { cfg.fileRows = n }
}

// Writer is a [sink.Sink] that writes records as Parquet files into a
// directory: part-00000.parquet, part-00001.parquet…, one new file every
// [WithFileRows] rows. A file is written as part-NNNNN.parquet.tmp and
// renamed to its final name (after an fsync) only once complete, so a crash
// leaves at most the one open file, under its .tmp name, incomplete: every
// file under a final name is whole. Close finishes the open file; a run that
// wrote no record leaves one valid file with zero rows, so that readers find
// the schema.
//
// The writer buffers records in Arrow builders. When [WithRowGroupRows]
// rows or [WithRowGroupBytes] bytes are buffered, it hands them, as one row
// group, to a background goroutine that encodes, compresses and writes them
// (and finishes the file when it is full), and goes on buffering in fresh
// builders: on two cores, Write and the encoding overlap. It waits for a row
// group's write before handing off the next, so at most one is in flight:
// its memory is bounded by two row groups (the one buffering and the one
// being written), plus the encoder's buffers and up to 64 MiB of recycled
// buffers, whatever the number of records. Row groups reach the file in
// order, and a file holds exactly [WithFileRows] rows (the last one fewer).
// A full file is finished (fsynced and renamed) in the background too, after
// its last row group: by the time the next file is created, at the hand-off
// of its first row group, or by the time Close returns. The background
// goroutine lives only while a row group is in flight, so a Writer that is
// never closed leaks no goroutine (but leaves its open file as .tmp).
//
// Column mapping (names are the record's JSON names): schema, epoch, attempt,
// input_tokens, output_tokens are int64; seed is uint64; score, weight,
// duration_ms, cost_usd are float64; run_id, eval, sample_id, status,
// reason, error, error_kind, trace, parent_run_id are strings (all
// plain-encoded, then compressed); scores is map<string, float64> and tags
// map<string, string>, keys sorted, null when empty; input and output are
// strings holding the JSON text as given, null when absent; started_at is
// timestamp[us, UTC]. The file's key-value metadata holds
// proctor.schema=1 ([MetadataKey]).
//
// Values are kept as they are, with two exceptions. StartedAt is stored in
// microseconds: nanoseconds are truncated (toward the past) and the location
// is dropped (read back in UTC). Invalid UTF-8 in strings, map keys and
// values and the JSON columns is replaced, byte by byte, with U+FFFD, as
// encoding/json (and so the JSONL log) does: Parquet strings are UTF-8.
// NaN and ±Inf float values are stored as they are (Parquet doubles are IEEE
// 754), unlike the JSON log which writes null.
//
// A Writer is safe for concurrent use: a mutex serializes Write and Close,
// and records from concurrent writers are stored in lock order. Write and
// Close do local file I/O only and ignore their context; Close waits for the
// background write and flushes even when its context is canceled. After an
// I/O error, in Write or in the background, the writer is broken: the next
// Write (or Close) and every later one returns that error, and Close removes
// the open .tmp file. A background error is seen by the first Write after it
// happens, or by Close; the records written in the meantime are lost with
// the file.
type Writer struct {
	mu     sync.Mutex
	dir    string
	cfg    config
	props  *pq.WriterProperties
	aprops pqarrow.ArrowWriterProperties

	rb      *array.RecordBuilder
	cols    columns
	strings []*array.StringBuilder // the string builders of cols
	next    builderSizes           // to reserve for the next row group
	// The sorted entries of the last record's scores and tags (reused).
	scoreKeys, tagKeys, tagVals []string
	scoreVals                   []float64

	buffered      int // rows in the builders
	bufferedBytes int // bytes of variable-length data in the builders

	part     int // index of the open (or next) file
	fileRows int // rows written to the open file, including buffered ones
	f        *os.File
	bw       *bufio.Writer
	fw       *pqarrow.FileWriter
	files    int // finished files

	// done, when not nil, receives the result of the row group being
	// written in the background; until then the background goroutine owns
	// part, f, bw, fw and files.
	done chan error

	err    error
	closed bool
}

// builderSizes are the lengths of a row group's builders.
type builderSizes struct {
	rows, scoreEntries, tagEntries int
	data                           [14]int // by w.strings
}

// columns are the typed builders of the record builder, by column.
type columns struct {
	schema, epoch, attempt, inputTokens, outputTokens *array.Int64Builder
	score, weight, durationMS, costUSD                *array.Float64Builder
	runID, eval, sampleID, status, reason             *array.StringBuilder
	errorMsg, errorKind, input, output, trace         *array.StringBuilder
	parentRunID                                       *array.StringBuilder
	scores                                            *array.MapBuilder
	scoreKeys                                         *array.StringBuilder
	scoreValues                                       *array.Float64Builder
	tags                                              *array.MapBuilder
	tagKeys, tagValues                                *array.StringBuilder
	startedAt                                         *array.TimestampBuilder
	seed                                              *array.Uint64Builder
}

// New returns a Writer that writes Parquet files into dir, creating it if
// need be. It fails if dir already holds part files (finished or .tmp),
// so that two runs never mix in one directory.
func New(dir string, opts ...Option) (*Writer, error) {
	cfg := config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.rowGroupRows < 1 {
		cfg.rowGroupRows = DefaultRowGroupRows
	}
	if cfg.rowGroupBytes < 1 {
		cfg.rowGroupBytes = DefaultRowGroupBytes
	}
	if cfg.fileRows < 1 {
		cfg.fileRows = DefaultFileRows
	}
	codec, err := cfg.compression.codec()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	existing, err := filepath.Glob(filepath.Join(dir, "part-*.parquet*"))
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	if len(existing) > 0 {
		return nil, fmt.Errorf("parquet: %s already holds part files (%s): %w", dir, filepath.Base(existing[0]), fs.ErrExist)
	}

	mem := &recycler{}
	props := []pq.WriterProperty{
		pq.WithCompression(codec),
		pq.WithMaxRowGroupLength(int64(cfg.rowGroupRows)),
		pq.WithDictionaryDefault(false),
		pq.WithCreatedBy("proctor (github.com/proctor-evals/proctor) over arrow-go"),
		pq.WithAllocator(mem),
	}
	if cfg.levelSet {
		props = append(props, pq.WithCompressionLevel(cfg.level))
	}
	for _, c := range noStatsColumns {
		props = append(props, pq.WithStatsFor(c, false))
	}

	w := &Writer{
		dir:    dir,
		cfg:    cfg,
		props:  pq.NewWriterProperties(props...),
		aprops: pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(mem)),
		rb:     array.NewRecordBuilder(mem, schema),
	}
	f := w.rb.Field
	w.cols = columns{
		schema:       f(colSchema).(*array.Int64Builder),
		runID:        f(colRunID).(*array.StringBuilder),
		eval:         f(colEval).(*array.StringBuilder),
		sampleID:     f(colSampleID).(*array.StringBuilder),
		epoch:        f(colEpoch).(*array.Int64Builder),
		attempt:      f(colAttempt).(*array.Int64Builder),
		status:       f(colStatus).(*array.StringBuilder),
		score:        f(colScore).(*array.Float64Builder),
		scores:       f(colScores).(*array.MapBuilder),
		weight:       f(colWeight).(*array.Float64Builder),
		reason:       f(colReason).(*array.StringBuilder),
		errorMsg:     f(colError).(*array.StringBuilder),
		errorKind:    f(colErrorKind).(*array.StringBuilder),
		input:        f(colInput).(*array.StringBuilder),
		output:       f(colOutput).(*array.StringBuilder),
		tags:         f(colTags).(*array.MapBuilder),
		startedAt:    f(colStartedAt).(*array.TimestampBuilder),
		durationMS:   f(colDurationMS).(*array.Float64Builder),
		inputTokens:  f(colInputTokens).(*array.Int64Builder),
		outputTokens: f(colOutputTokens).(*array.Int64Builder),
		costUSD:      f(colCostUSD).(*array.Float64Builder),
		seed:         f(colSeed).(*array.Uint64Builder),
		trace:        f(colTrace).(*array.StringBuilder),
		parentRunID:  f(colParentRunID).(*array.StringBuilder),
	}
	w.cols.scoreKeys = w.cols.scores.KeyBuilder().(*array.StringBuilder)
	w.cols.scoreValues = w.cols.scores.ItemBuilder().(*array.Float64Builder)
	w.cols.tagKeys = w.cols.tags.KeyBuilder().(*array.StringBuilder)
	w.cols.tagValues = w.cols.tags.ItemBuilder().(*array.StringBuilder)
	c := &w.cols
	w.strings = []*array.StringBuilder{c.runID, c.eval, c.sampleID, c.status, c.reason, c.errorMsg, c.errorKind, c.input, c.output, c.trace, c.parentRunID, c.scoreKeys, c.tagKeys, c.tagValues}
	w.rb.Reserve(min(cfg.rowGroupRows, 4096))
	return w, nil
}

// Dir returns the directory the writer writes into.
func (w *Writer) Dir() string { return w.dir }

// Write buffers r, handing a row group to the background writer, and
// rolling to a new file, when a limit is reached. It does not keep r's maps
// or slices.
func (w *Writer) Write(_ context.Context, r sink.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("parquet: write: %w", sink.ErrClosed)
	}
	if w.err != nil {
		return w.err
	}
	if w.done != nil {
		// A background write that ended in error breaks the writer now
		// rather than at the next row group.
		select {
		case err := <-w.done:
			w.done = nil
			if err != nil {
				return w.fail(err)
			}
		default:
		}
	}
	w.append(&r)
	w.buffered++
	w.fileRows++
	if w.buffered >= w.cfg.rowGroupRows || w.bufferedBytes >= w.cfg.rowGroupBytes || w.fileRows >= w.cfg.fileRows {
		if err := w.flush(); err != nil {
			return w.fail(err)
		}
	}
	return nil
}

// Close writes the buffered records, waits for the background write,
// finishes the open file and renames it to its final name. It flushes
// whatever the state of ctx; it is safe to call more than once (later calls
// return nil).
func (w *Writer) Close(_ context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	defer w.rb.Release()
	if w.err == nil && w.buffered > 0 {
		w.fail(w.flush())
	}
	// Wait even after an error: abort must not race the background write.
	if err := w.wait(); err != nil {
		w.fail(err)
	}
	if w.err == nil && w.fw == nil && w.files == 0 {
		// An empty run still leaves a valid, readable file: the schema.
		w.fail(w.open())
	}
	if w.err == nil && w.fw != nil {
		w.fail(w.finishFile())
	}
	if w.err != nil {
		w.abort()
	}
	return w.err
}

// fail records err, if not nil, as the writer's sticky error, and returns
// the sticky error.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// wait waits for the background write, if any, and returns its error.
func (w *Writer) wait() error {
	if w.done == nil {
		return nil
	}
	err := <-w.done
	w.done = nil
	return err
}

// abort removes the open .tmp file after an error. No background write
// may be running.
func (w *Writer) abort() {
	if w.f != nil {
		name := w.f.Name()
		w.f.Close()
		os.Remove(name)
		w.f, w.bw, w.fw = nil, nil, nil
	}
}

func (w *Writer) partName(i int) string {
	return filepath.Join(w.dir, fmt.Sprintf("part-%05d.parquet", i))
}

// open creates the next .tmp file and its Parquet writer. No background
// write may be running.
func (w *Writer) open() error {
	name := w.partName(w.part) + ".tmp"
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	// bufio.Writer is not an io.Closer, so the Parquet writer leaves f to us.
	bw := bufio.NewWriterSize(f, 1<<20)
	fw, err := pqarrow.NewFileWriter(schema, bw, w.props, w.aprops)
	if err != nil {
		f.Close()
		os.Remove(name)
		return fmt.Errorf("parquet: %s: %w", name, err)
	}
	w.f, w.bw, w.fw = f, bw, fw
	return nil
}

// flush hands the buffered rows, as one row group, to a background
// goroutine that encodes, compresses and writes them (and finishes the file
// if it is full), while Write goes on filling the builders, emptied. It
// first waits for the previous row group: at most one is in flight, so the
// writer holds at most two row groups (the one being written and the one
// being buffered), and row groups reach the file in order. The file is
// opened here rather than in the background, so that it exists, as .tmp,
// once Write returns.
//
// Until the background write is done (w.done), it alone uses the file
// fields (f, bw, fw, part, files).
func (w *Writer) flush() error {
	if err := w.wait(); err != nil {
		return err
	}
	if w.fw == nil {
		if err := w.open(); err != nil {
			return err
		}
	}
	w.sizes(w.buffered)
	rec := w.rb.NewRecordBatch()
	finish := w.fileRows >= w.cfg.fileRows
	w.buffered, w.bufferedBytes = 0, 0
	if finish {
		w.fileRows = 0
	}
	done := make(chan error, 1)
	w.done = done
	go func() {
		defer rec.Release()
		err := w.fw.Write(rec)
		if err != nil {
			err = fmt.Errorf("parquet: %s: %w", w.f.Name(), err)
		} else if finish {
			err = w.finishFile()
		}
		done <- err
	}()
	w.reserve()
	return nil
}

// sizes records the lengths of the row group being handed off: the next
// one is likely alike, so reserve reserves as much, once, instead of
// growing (and copying) each buffer by doubling.
func (w *Writer) sizes(rows int) {
	c := &w.cols
	w.next.rows = rows
	w.next.scoreEntries = c.scoreKeys.Len()
	w.next.tagEntries = c.tagKeys.Len()
	for i, b := range w.strings {
		w.next.data[i] = b.DataLen()
	}
}

func (w *Writer) reserve() {
	s := &w.next
	w.rb.Reserve(s.rows)
	c := &w.cols
	c.scoreKeys.Reserve(s.scoreEntries)
	c.scoreValues.Reserve(s.scoreEntries)
	c.tagKeys.Reserve(s.tagEntries)
	c.tagValues.Reserve(s.tagEntries)
	for i, b := range w.strings {
		b.ReserveData(s.data[i])
	}
}

// finishFile closes the open file, syncs it and renames it to its final
// name. The file's last row group must have been written. It runs in the
// background after that row group, or in Close.
func (w *Writer) finishFile() error {
	tmp := w.f.Name()
	final := w.partName(w.part)
	err := w.fw.Close()
	if err == nil {
		err = w.bw.Flush()
	}
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f, w.bw, w.fw = nil, nil, nil
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("parquet: %s: %w", final, err)
	}
	syncDir(w.dir)
	w.part++
	w.files++
	return nil
}

// syncDir makes a rename durable where the platform allows it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// append adds r to the builders. It is the hot path: no allocation.
func (w *Writer) append(r *sink.Record) {
	c := &w.cols
	c.schema.Append(int64(r.Schema))
	w.appendString(c.runID, r.RunID)
	w.appendString(c.eval, r.Eval)
	w.appendString(c.sampleID, r.SampleID)
	c.epoch.Append(int64(r.Epoch))
	c.attempt.Append(int64(r.Attempt))
	w.appendString(c.status, string(r.Status))
	c.score.Append(r.Score)
	if len(r.Scores) == 0 {
		c.scores.AppendNull()
	} else {
		c.scores.Append(true)
		w.scoreKeys, w.scoreVals = sortedEntries(w.scoreKeys, w.scoreVals, r.Scores)
		for i, k := range w.scoreKeys {
			w.appendString(c.scoreKeys, k)
			c.scoreValues.Append(w.scoreVals[i])
		}
	}
	c.weight.Append(r.Weight)
	w.appendString(c.reason, r.Reason)
	w.appendString(c.errorMsg, r.Error)
	w.appendString(c.errorKind, string(r.ErrorKind))
	w.appendJSON(c.input, r.Input)
	w.appendJSON(c.output, r.Output)
	if len(r.Tags) == 0 {
		c.tags.AppendNull()
	} else {
		c.tags.Append(true)
		w.tagKeys, w.tagVals = sortedEntries(w.tagKeys, w.tagVals, r.Tags)
		for i, k := range w.tagKeys {
			w.appendString(c.tagKeys, k)
			w.appendString(c.tagValues, w.tagVals[i])
		}
	}
	c.startedAt.Append(arrow.Timestamp(r.StartedAt.UnixMicro()))
	c.durationMS.Append(r.DurationMS)
	c.inputTokens.Append(r.InputTokens)
	c.outputTokens.Append(r.OutputTokens)
	c.costUSD.Append(r.CostUSD)
	c.seed.Append(r.Seed)
	w.appendString(c.trace, r.Trace)
	w.appendString(c.parentRunID, r.ParentRunID)
}

// sortedEntries returns the entries of m sorted by key, reusing the slices
// keys and vals, which hold the previous map's. Records mostly share their
// key set (the same scorers, the same tags), so it first tries the previous
// keys, already sorted: when m has as many keys and holds them all, they are
// its keys, and the values come from as many lookups, with no iteration of
// m and no sort.
func sortedEntries[V any](keys []string, vals []V, m map[string]V) ([]string, []V) {
	vals = vals[:0]
	if len(keys) == len(m) {
		for _, k := range keys {
			v, ok := m[k]
			if !ok {
				break
			}
			vals = append(vals, v)
		}
		if len(vals) == len(keys) {
			return keys, vals
		}
		vals = vals[:0]
	}
	keys = keys[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vals = append(vals, m[k])
	}
	return keys, vals
}

func (w *Writer) appendString(b *array.StringBuilder, s string) {
	w.bufferedBytes += len(s)
	if !utf8.ValidString(s) {
		b.BinaryBuilder.Append(appendValidUTF8(nil, s))
		return
	}
	// BinaryBuilder copies the bytes; it never writes to them.
	b.BinaryBuilder.Append(unsafe.Slice(unsafe.StringData(s), len(s)))
}

func (w *Writer) appendJSON(b *array.StringBuilder, v []byte) {
	if len(v) == 0 {
		b.AppendNull()
		return
	}
	w.bufferedBytes += len(v)
	if !utf8.Valid(v) {
		v = appendValidUTF8(nil, unsafe.String(unsafe.SliceData(v), len(v)))
	}
	b.BinaryBuilder.Append(v)
}

// appendValidUTF8 appends s to b with each byte of an invalid UTF-8
// sequence replaced by U+FFFD, as encoding/json does.
func appendValidUTF8(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}

var _ sink.Sink = (*Writer)(nil)

var errNotProctor = errors.New("parquet: not a proctor record file")
