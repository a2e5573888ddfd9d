package parquetsink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

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

// Options configure a [Writer]. A nil *Options, and every zero field,
// means the default.
type Options struct {
	// Compression is the codec of every column (default [Zstd]).
	Compression Compression
	// CompressionLevel is the codec's level (codec-specific); 0 means the
	// codec's default, for zstd its "default" speed.
	CompressionLevel int
	// RowGroupRows is the maximum number of rows of a row group (default
	// [DefaultRowGroupRows]). The writer holds at most two row groups in
	// memory (one buffering, one being written in the background), so this
	// bounds its memory together with RowGroupBytes.
	RowGroupRows int
	// RowGroupBytes is the size of buffered string data (input, output,
	// reason…) at which the writer ends a row group early (default
	// [DefaultRowGroupBytes]), so that large outputs do not make a row
	// group of RowGroupRows rows unbounded.
	RowGroupBytes int
	// FileRows is the number of rows after which the writer finishes the
	// current file and starts the next one (default [DefaultFileRows]).
	FileRows int
}

// Writer is a [sink.Sink] that writes records as Parquet files into a
// directory: part-00000.parquet, part-00001.parquet…, one new file every
// [Options.FileRows] rows. A file is written as part-NNNNN.parquet.tmp and
// renamed to its final name (after an fsync) only once complete, so a crash
// leaves at most the one open file, under its .tmp name, incomplete: every
// file under a final name is whole. Close finishes the open file; a run that
// wrote no record into a new directory leaves one valid file with zero rows,
// so that readers find the schema.
//
// The writer buffers records column by column in plain Go slices. When
// [Options.RowGroupRows] rows or [Options.RowGroupBytes] bytes are buffered, it hands them, as one row
// group, to a background goroutine that encodes, compresses and writes them
// (and finishes the file when it is full), and goes on buffering in the other of
// its two row groups: on two cores, Write and the encoding overlap. It waits for a row
// group's write before handing off the next, so at most one is in flight:
// its memory is bounded by two row groups (the one buffering and the one
// being written), plus the encoder's buffers and up to 64 MiB of recycled
// buffers, whatever the number of records. Row groups reach the file in
// order, and a file holds exactly [Options.FileRows] rows (the last one fewer).
// A full file is finished (fsynced and renamed) in the background too, after
// its last row group: by the time the next file is created, at the hand-off
// of its first row group, or by the time Close returns. The background
// goroutine lives only while a row group is in flight, so a Writer that is
// never closed leaks no goroutine (but leaves its open file as .tmp).
//
// Column mapping (names are the record's JSON names, types are Parquet
// logical types, which DuckDB, Spark, pandas and polars map to their own):
// schema, epoch, attempt, input_tokens, output_tokens are INT64; seed is
// INT(64, unsigned); score, weight, duration_ms, cost_usd are DOUBLE;
// run_id, eval, sample_id, status, reason, error, error_kind, trace,
// parent_run_id, reused_from, worker, trace_id, span_id are STRING (all
// plain-encoded, then compressed; empty when unset); scores is
// a MAP of STRING to DOUBLE and tags a MAP of STRING to STRING, keys
// sorted, null when empty; input and output are JSON, the text as given,
// null when absent; started_at is TIMESTAMP(MICROS, adjusted to UTC). The file's key-value metadata holds
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
	mu    sync.Mutex
	dir   string
	opts  Options // defaults filled in
	props *pq.WriterProperties
	meta  metadata.KeyValueMetadata

	// cur is the row group being buffered; spare is the one written in the
	// background, or idle: the two swap at each hand-off, and keep their
	// capacity, so that after the first two row groups Write appends
	// without growing a buffer.
	cur, spare *group
	// The sorted entries of the last record's scores and tags (reused).
	scoreKeys, tagKeys, tagVals []string
	scoreVals                   []float64

	bufferedBytes int // bytes of variable-length data in cur

	part     int // index of the open (or next) file
	fileRows int // rows written to the open file, including buffered ones
	f        *os.File
	bw       *bufio.Writer
	fw       *file.Writer
	files    int  // files finished by this writer
	resumed  bool // the directory held part files when New was called

	// done, when not nil, receives the result of the row group being
	// written in the background; until then the background goroutine owns
	// spare, part, f, bw, fw and files.
	done chan error

	err    error
	closed bool
}

// group is one row group's values, by leaf buffer (see [leaves]).
type group struct {
	rows int
	i64  [numI64][]int64
	f64  [numF64][]float64
	str  [numStr]strCol
	// The definition levels of input and output (1 present, 0 null), and
	// the definition and repetition levels of scores and tags, which each
	// map's key and value leaves share.
	inputDef, outputDef  []int16
	scoresDef, scoresRep []int16
	tagsDef, tagsRep     []int16
	views                []pq.ByteArray // scratch: one string leaf's values
}

// strCol holds a string leaf's values end to end, and where each ends.
type strCol struct {
	data []byte
	ends []int
}

func (g *group) reset() {
	g.rows = 0
	for i := range g.i64 {
		g.i64[i] = g.i64[i][:0]
	}
	for i := range g.f64 {
		g.f64[i] = g.f64[i][:0]
	}
	for i := range g.str {
		g.str[i].data, g.str[i].ends = g.str[i].data[:0], g.str[i].ends[:0]
	}
	g.inputDef, g.outputDef = g.inputDef[:0], g.outputDef[:0]
	g.scoresDef, g.scoresRep = g.scoresDef[:0], g.scoresRep[:0]
	g.tagsDef, g.tagsRep = g.tagsDef[:0], g.tagsRep[:0]
}

func (g *group) levels(kind int) (def, rep []int16) {
	switch kind {
	case levelsInput:
		return g.inputDef, nil
	case levelsOutput:
		return g.outputDef, nil
	case levelsScores:
		return g.scoresDef, g.scoresRep
	case levelsTags:
		return g.tagsDef, g.tagsRep
	}
	return nil, nil
}

// byteArrays returns the values of string leaf i as views into its data.
func (g *group) byteArrays(i int) []pq.ByteArray {
	c := &g.str[i]
	g.views = g.views[:0]
	start := 0
	for _, end := range c.ends {
		g.views = append(g.views, c.data[start:end:end])
		start = end
	}
	return g.views
}

// write writes g as the row group of rgw, leaf by leaf.
func (g *group) write(rgw file.SerialRowGroupWriter) error {
	for i := range leaves {
		l := &leaves[i]
		cw, err := rgw.NextColumn()
		if err != nil {
			return err
		}
		def, rep := g.levels(l.levels)
		switch cw := cw.(type) {
		case *file.Int64ColumnChunkWriter:
			_, err = cw.WriteBatch(g.i64[l.buf], def, rep)
		case *file.Float64ColumnChunkWriter:
			_, err = cw.WriteBatch(g.f64[l.buf], def, rep)
		case *file.ByteArrayColumnChunkWriter:
			_, err = cw.WriteBatch(g.byteArrays(l.buf), def, rep)
		default:
			err = fmt.Errorf("unexpected column writer %T", cw)
		}
		if cerr := cw.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("column %s: %w", l.path, err)
		}
	}
	return rgw.Close()
}

// New returns a Writer that writes Parquet files into dir, creating it if
// need be; opts may be nil. A directory that already holds part files is
// taken to be this sink's own from an earlier, interrupted run that is now
// resumed: the writer leaves them as they are and numbers its files after
// the highest (finished or .tmp), so records written before and after the
// resume read back together. The .tmp file of a crashed writer is left in
// place (readers skip it; its records are in the JSONL log, from which
// proctor export rewrites a complete directory). New fails if the last
// finished part file is not a proctor record file, so that records never
// mix with someone else's data.
func New(dir string, opts *Options) (*Writer, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.RowGroupRows < 1 {
		o.RowGroupRows = DefaultRowGroupRows
	}
	if o.RowGroupBytes < 1 {
		o.RowGroupBytes = DefaultRowGroupBytes
	}
	if o.FileRows < 1 {
		o.FileRows = DefaultFileRows
	}
	codec, err := o.Compression.codec()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	next, err := nextPart(dir)
	if err != nil {
		return nil, err
	}

	mem := &recycler{}
	props := []pq.WriterProperty{
		pq.WithCompression(codec),
		pq.WithMaxRowGroupLength(int64(o.RowGroupRows)),
		pq.WithDictionaryDefault(false),
		pq.WithCreatedBy("proctor (github.com/proctor-evals/proctor) over arrow-go"),
		pq.WithAllocator(mem),
	}
	if o.CompressionLevel != 0 {
		props = append(props, pq.WithCompressionLevel(o.CompressionLevel))
	}
	for _, c := range noStatsColumns {
		props = append(props, pq.WithStatsFor(c, false))
	}
	meta := metadata.NewKeyValueMetadata()
	meta.Append(MetadataKey, strconv.Itoa(sink.SchemaVersion))
	return &Writer{
		dir:     dir,
		opts:    o,
		props:   pq.NewWriterProperties(props...),
		meta:    meta,
		cur:     &group{},
		spare:   &group{},
		part:    next,
		resumed: next > 0,
	}, nil
}

// nextPart returns the index of the first part file New may create in dir:
// one past the highest part file there, finished or not. It fails if the
// last finished one is not a proctor record file.
func nextPart(dir string) (int, error) {
	names, err := filepath.Glob(filepath.Join(dir, "part-*.parquet*"))
	if err != nil {
		return 0, fmt.Errorf("parquet: %w", err)
	}
	next, last := 0, ""
	for _, name := range names {
		base := filepath.Base(name)
		num, ok := strings.CutPrefix(base, "part-")
		if !ok {
			continue
		}
		finished := strings.HasSuffix(num, ".parquet")
		num, _, _ = strings.Cut(num, ".")
		i, err := strconv.Atoi(num)
		if err != nil || i < 0 {
			continue
		}
		next = max(next, i+1)
		if finished && name > last {
			last = name
		}
	}
	if last != "" {
		if err := checkProctorFile(last); err != nil {
			return 0, fmt.Errorf("parquet: %s holds part files that are not this sink's: %w", dir, err)
		}
	}
	return next, nil
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
	w.fileRows++
	if w.cur.rows >= w.opts.RowGroupRows || w.bufferedBytes >= w.opts.RowGroupBytes || w.fileRows >= w.opts.FileRows {
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
	if w.err == nil && w.cur.rows > 0 {
		w.fail(w.flush())
	}
	// Wait even after an error: abort must not race the background write.
	if err := w.wait(); err != nil {
		w.fail(err)
	}
	if w.err == nil && w.fw == nil && w.files == 0 && !w.resumed {
		// An empty run still leaves a valid, readable file: the schema.
		w.fail(w.open())
	}
	if w.err == nil && w.fw != nil {
		w.fail(w.finishFile())
	}
	if w.err != nil {
		w.abort()
	}
	w.cur, w.spare = nil, nil
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
	fw, err := file.NewParquetWriterWithError(bw, buildSchema(), file.WithWriterProps(w.props), file.WithWriteMetadata(w.meta))
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
// if it is full), while Write goes on filling the other group. It first
// waits for the previous row group: at most one is in flight, so the writer
// holds at most two row groups (the one being written and the one being
// buffered), and row groups reach the file in order. The file is opened
// here rather than in the background, so that it exists, as .tmp, once
// Write returns.
func (w *Writer) flush() error {
	if err := w.wait(); err != nil {
		return err
	}
	if w.fw == nil {
		if err := w.open(); err != nil {
			return err
		}
	}
	g := w.cur
	w.cur, w.spare = w.spare, g
	w.cur.reset()
	finish := w.fileRows >= w.opts.FileRows
	w.bufferedBytes = 0
	if finish {
		w.fileRows = 0
	}
	done := make(chan error, 1)
	w.done = done
	go func() {
		err := w.writeGroup(g)
		if err == nil && finish {
			err = w.finishFile()
		}
		done <- err
	}()
	return nil
}

// writeGroup writes g as the open file's next row group. A panic in the
// encoder (arrow-go reports some write failures so) is returned as an
// error, like any other.
func (w *Writer) writeGroup(g *group) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError(p)
		}
		if err != nil {
			err = fmt.Errorf("parquet: %s: %w", w.f.Name(), err)
		}
	}()
	rgw, err := w.fw.AppendRowGroupChecked()
	if err != nil {
		return err
	}
	return g.write(rgw)
}

// panicError turns a recovered panic value into an error, keeping an
// error value's chain.
func panicError(p any) error {
	if err, ok := p.(error); ok {
		return err
	}
	return fmt.Errorf("%v", p)
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

// append adds r to the buffered row group. It is the hot path: no
// allocation once the buffers have grown to a row group's size.
func (w *Writer) append(r *sink.Record) {
	g := w.cur
	g.rows++
	g.i64[i64Schema] = append(g.i64[i64Schema], int64(r.Schema))
	w.appendString(strRunID, r.RunID)
	w.appendString(strEval, r.Eval)
	w.appendString(strVariant, r.Variant)
	w.appendString(strSampleID, r.SampleID)
	g.i64[i64Epoch] = append(g.i64[i64Epoch], int64(r.Epoch))
	g.i64[i64Attempt] = append(g.i64[i64Attempt], int64(r.Attempt))
	w.appendString(strStatus, string(r.Status))
	g.f64[f64Score] = append(g.f64[f64Score], r.Score)
	if len(r.Scores) == 0 {
		g.scoresDef, g.scoresRep = append(g.scoresDef, 0), append(g.scoresRep, 0)
	} else {
		w.scoreKeys, w.scoreVals = sortedEntries(w.scoreKeys, w.scoreVals, r.Scores)
		for i, k := range w.scoreKeys {
			g.scoresDef, g.scoresRep = append(g.scoresDef, 2), append(g.scoresRep, min(int16(i), 1))
			w.appendString(strScoreKey, k)
			g.f64[f64ScoreValue] = append(g.f64[f64ScoreValue], w.scoreVals[i])
		}
	}
	g.f64[f64Weight] = append(g.f64[f64Weight], r.Weight)
	w.appendString(strReason, r.Reason)
	w.appendString(strError, r.Error)
	w.appendString(strErrorKind, string(r.ErrorKind))
	w.appendString(strErrorSource, r.ErrorSource)
	w.appendString(strJudgeStages, r.JudgeStages)
	g.inputDef = w.appendJSON(g.inputDef, strInput, r.Input)
	g.outputDef = w.appendJSON(g.outputDef, strOutput, r.Output)
	if len(r.Tags) == 0 {
		g.tagsDef, g.tagsRep = append(g.tagsDef, 0), append(g.tagsRep, 0)
	} else {
		w.tagKeys, w.tagVals = sortedEntries(w.tagKeys, w.tagVals, r.Tags)
		for i, k := range w.tagKeys {
			g.tagsDef, g.tagsRep = append(g.tagsDef, 2), append(g.tagsRep, min(int16(i), 1))
			w.appendString(strTagKey, k)
			w.appendString(strTagValue, w.tagVals[i])
		}
	}
	g.i64[i64StartedAt] = append(g.i64[i64StartedAt], r.StartedAt.UnixMicro())
	g.f64[f64DurationMS] = append(g.f64[f64DurationMS], r.DurationMS)
	g.i64[i64InputTokens] = append(g.i64[i64InputTokens], r.InputTokens)
	g.i64[i64OutputTokens] = append(g.i64[i64OutputTokens], r.OutputTokens)
	g.f64[f64CostUSD] = append(g.f64[f64CostUSD], r.CostUSD)
	g.i64[i64JudgeInputTokens] = append(g.i64[i64JudgeInputTokens], r.JudgeInputTokens)
	g.i64[i64JudgeOutputTokens] = append(g.i64[i64JudgeOutputTokens], r.JudgeOutputTokens)
	g.f64[f64JudgeCostUSD] = append(g.f64[f64JudgeCostUSD], r.JudgeCostUSD)
	w.appendString(strModel, r.Model)
	w.appendString(strJudgeModel, r.JudgeModel)
	g.i64[i64SimulatorInputTokens] = append(g.i64[i64SimulatorInputTokens], r.SimulatorInputTokens)
	g.i64[i64SimulatorOutputTokens] = append(g.i64[i64SimulatorOutputTokens], r.SimulatorOutputTokens)
	g.f64[f64SimulatorCostUSD] = append(g.f64[f64SimulatorCostUSD], r.SimulatorCostUSD)
	w.appendString(strSimulatorModel, r.SimulatorModel)
	w.appendString(strResources, r.Resources)
	g.i64[i64CallsReplayed] = append(g.i64[i64CallsReplayed], int64(r.CallsReplayed))
	g.i64[i64ReplayDivergedAt] = append(g.i64[i64ReplayDivergedAt], int64(r.ReplayDivergedAt))
	g.i64[i64Seed] = append(g.i64[i64Seed], int64(r.Seed))
	w.appendString(strTranscript, r.Transcript)
	w.appendString(strParentRunID, r.ParentRunID)
	w.appendString(strReusedFrom, r.ReusedFrom)
	w.appendString(strWorker, r.Worker)
	w.appendString(strTraceID, r.TraceID)
	w.appendString(strSpanID, r.SpanID)
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

func (w *Writer) appendString(i int, s string) {
	c := &w.cur.str[i]
	w.bufferedBytes += len(s)
	if utf8.ValidString(s) {
		c.data = append(c.data, s...)
	} else {
		c.data = appendValidUTF8(c.data, s)
	}
	c.ends = append(c.ends, len(c.data))
}

// appendJSON appends v to string leaf i, or a null when v is empty, and
// returns def with v's definition level appended.
func (w *Writer) appendJSON(def []int16, i int, v []byte) []int16 {
	if len(v) == 0 {
		return append(def, 0)
	}
	w.appendString(i, unsafe.String(unsafe.SliceData(v), len(v))) // copied, not kept
	return append(def, 1)
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
