package parquetsink

import (
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/proctor-evals/proctor/sink"
)

// readBatch is the number of levels the reader decodes at a time, per
// column.
const readBatch = 4096

// Files returns the finished part files of the directory dir, in order
// (part-00000.parquet, part-00001.parquet…). Unfinished .tmp files, left by
// a crash, are not part of the set.
func Files(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "part-*.parquet"))
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	slices.Sort(files)
	return files, nil
}

// Records returns the records stored at path: a directory written by a
// [Writer] (its finished part files, in order) or a single Parquet file. It
// yields the records in the order they were written. An error (a missing
// path, a file that is not a proctor record file, a newer schema version,
// a corrupt file) is yielded as the last item; a corrupt file never makes
// it panic.
//
// Columns are found by name, so a file whose columns are reordered, or
// that lacks optional ones, still reads; a missing column reads as the
// zero value. StartedAt is returned in UTC.
func Records(path string) iter.Seq2[sink.Record, error] {
	return func(yield func(sink.Record, error) bool) {
		st, err := os.Stat(path)
		if err != nil {
			yield(sink.Record{}, fmt.Errorf("parquet: %w", err))
			return
		}
		files := []string{path}
		if st.IsDir() {
			if files, err = Files(path); err != nil {
				yield(sink.Record{}, err)
				return
			}
		}
		for _, name := range files {
			f, err := os.Open(name)
			if err != nil {
				yield(sink.Record{}, fmt.Errorf("parquet: %w", err))
				return
			}
			ok := readFrom(f, name, yield)
			f.Close()
			if !ok {
				return
			}
		}
	}
}

// checkProctorFile returns an error unless name is a Parquet file holding
// proctor records of a schema version this package reads.
func checkProctorFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = openRecords(f)
	return err
}

// openRecords opens r as a proctor record file. A panic in arrow-go's
// decoding of a corrupt footer is returned as an error.
func openRecords(r pq.ReaderAtSeeker) (pf *file.Reader, err error) {
	defer func() {
		if p := recover(); p != nil {
			pf, err = nil, fmt.Errorf("corrupt file: %v", p)
		}
	}()
	pf, err = file.NewParquetReader(r)
	if err != nil {
		return nil, err
	}
	version := pf.MetaData().KeyValueMetadata().FindValue(MetadataKey)
	if version == nil {
		return nil, errNotProctor
	}
	if v, err := strconv.Atoi(*version); err != nil || v < 1 || v > sink.SchemaVersion {
		return nil, fmt.Errorf("unsupported record schema %q (this reader knows %d)", *version, sink.SchemaVersion)
	}
	return pf, nil
}

// readFrom yields the records of one file, read from r and called name in
// errors; it returns false when the iteration must stop.
func readFrom(r pq.ReaderAtSeeker, name string, yield func(sink.Record, error) bool) (more bool) {
	fail := func(err error) bool {
		yield(sink.Record{}, fmt.Errorf("parquet: %s: %w", name, err))
		return false
	}
	pf, err := openRecords(r)
	if err != nil {
		return fail(err)
	}
	var d *decoder
	if err := safe(func() (err error) { d, err = newDecoder(pf); return err }); err != nil {
		return fail(err)
	}
	for g := range pf.NumRowGroups() {
		if err := safe(func() error { return d.rowGroup(pf, g) }); err != nil {
			return fail(err)
		}
		for range pf.MetaData().RowGroup(g).NumRows() {
			rec, err := d.record()
			if err != nil {
				return fail(fmt.Errorf("row group %d: %w", g, err))
			}
			if !yield(rec, nil) {
				return false
			}
		}
		// A row group whose columns hold more values than its rows is
		// corrupt too.
		if err := safe(d.rest); err != nil {
			return fail(fmt.Errorf("row group %d: %w", g, err))
		}
	}
	return true
}

// decoder turns the rows of a file back into records, leaf by leaf: each
// leaf column has a cursor over its current row group.
type decoder struct {
	idx  [numLeaves]int // the file's column index of each leaf, -1 if absent
	curs [numLeaves]cursor
	// startedAt converts started_at values, microseconds unless the
	// column's logical type says otherwise.
	startedAt func(int64) time.Time
}

func newDecoder(pf *file.Reader) (*decoder, error) {
	d := &decoder{startedAt: time.UnixMicro}
	sc := pf.MetaData().Schema
	for i, l := range leaves {
		d.idx[i] = sc.ColumnIndexByName(l.path)
		if d.idx[i] < 0 {
			continue
		}
		col := sc.Column(d.idx[i])
		if col.PhysicalType() != l.typ {
			return nil, fmt.Errorf("column %s: type %s, want %s", l.path, col.PhysicalType(), l.typ)
		}
		want := int16(0)
		switch l.levels {
		case levelsInput, levelsOutput:
			want = 1
		case levelsScores, levelsTags:
			want = 2
		}
		// A required column written as optional reads too (nulls as zero
		// values); a map must be a map.
		def, rep := col.MaxDefinitionLevel(), col.MaxRepetitionLevel()
		if want < 2 && (def > 1 || rep != 0) || want == 2 && (def != 2 || rep != 1) {
			return nil, fmt.Errorf("column %s: nesting (definition level %d, repetition level %d) is not the record schema's", l.path, def, rep)
		}
		if i == leafStartedAt {
			if ts, ok := col.LogicalType().(schema.TimestampLogicalType); ok {
				switch ts.TimeUnit() {
				case schema.TimeUnitMillis:
					d.startedAt = time.UnixMilli
				case schema.TimeUnitNanos:
					d.startedAt = func(ns int64) time.Time { return time.Unix(0, ns) }
				}
			}
		}
		d.curs[i].maxDef = col.MaxDefinitionLevel()
		d.curs[i].maxRep = col.MaxRepetitionLevel()
	}
	// A map needs both its key and its value.
	for _, pair := range [][2]int{{leafScoreKey, leafScoreValue}, {leafTagKey, leafTagValue}} {
		if (d.idx[pair[0]] < 0) != (d.idx[pair[1]] < 0) {
			return nil, fmt.Errorf("column %s: key or value missing", leaves[pair[0]].path)
		}
	}
	return d, nil
}

// rowGroup points the cursors at row group g.
func (d *decoder) rowGroup(pf *file.Reader, g int) error {
	rg := pf.RowGroup(g)
	for i := range leaves {
		if d.idx[i] < 0 {
			continue
		}
		cr, err := rg.Column(d.idx[i])
		if err != nil {
			return fmt.Errorf("column %s: %w", leaves[i].path, err)
		}
		d.curs[i].reset(cr)
	}
	return nil
}

// rest fails if a column holds values past the row group's rows.
func (d *decoder) rest() error {
	for i := range leaves {
		if d.idx[i] < 0 {
			continue
		}
		c := &d.curs[i]
		if c.pos == c.n {
			if err := c.fill(); err != nil {
				return fmt.Errorf("column %s: %w", leaves[i].path, err)
			}
		}
		if c.pos < c.n {
			return fmt.Errorf("column %s: more values than rows", leaves[i].path)
		}
	}
	return nil
}

// safe calls f, returning a panic in it as an error: arrow-go panics on
// some corrupt files, and a file is outside input.
func safe(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("corrupt file: %v", p)
		}
	}()
	return f()
}

func (d *decoder) record() (r sink.Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = sink.Record{}, fmt.Errorf("corrupt file: %v", p)
		}
	}()
	var (
		v   value
		txt = func(leaf int) string {
			if err == nil {
				v, err = d.scalar(leaf)
			}
			return v.s
		}
		i64 = func(leaf int) int64 {
			if err == nil {
				v, err = d.scalar(leaf)
			}
			return v.i
		}
		f64 = func(leaf int) float64 {
			if err == nil {
				v, err = d.scalar(leaf)
			}
			return v.f
		}
		raw = func(leaf int) json.RawMessage {
			if err == nil {
				v, err = d.scalar(leaf)
			}
			if !v.valid {
				return nil
			}
			return json.RawMessage(v.s)
		}
	)
	r.Schema = int(i64(leafSchema))
	r.RunID = txt(leafRunID)
	r.Eval = txt(leafEval)
	r.Variant = txt(leafVariant)
	r.SampleID = txt(leafSampleID)
	r.Epoch = int(i64(leafEpoch))
	r.Attempt = int(i64(leafAttempt))
	r.Status = sink.Status(txt(leafStatus))
	r.Score = f64(leafScore)
	if err == nil {
		r.Scores, err = mapOf(d, leafScoreKey, leafScoreValue, func(v value) float64 { return v.f })
	}
	r.Weight = f64(leafWeight)
	r.Reason = txt(leafReason)
	r.Error = txt(leafError)
	r.ErrorKind = sink.ErrorKind(txt(leafErrorKind))
	r.ErrorSource = txt(leafErrorSource)
	r.JudgeStages = txt(leafJudgeStages)
	r.Input = raw(leafInput)
	r.Output = raw(leafOutput)
	if err == nil {
		r.Tags, err = mapOf(d, leafTagKey, leafTagValue, func(v value) string { return v.s })
	}
	if us := i64(leafStartedAt); err == nil && d.idx[leafStartedAt] >= 0 {
		r.StartedAt = d.startedAt(us).UTC()
	}
	r.DurationMS = f64(leafDurationMS)
	r.InputTokens = i64(leafInputTokens)
	r.OutputTokens = i64(leafOutputTokens)
	r.CostUSD = f64(leafCostUSD)
	r.JudgeInputTokens = i64(leafJudgeInputTokens)
	r.JudgeOutputTokens = i64(leafJudgeOutputTokens)
	r.JudgeCostUSD = f64(leafJudgeCostUSD)
	r.Model = txt(leafModel)
	r.JudgeModel = txt(leafJudgeModel)
	r.SimulatorInputTokens = i64(leafSimulatorInputTokens)
	r.SimulatorOutputTokens = i64(leafSimulatorOutputTokens)
	r.SimulatorCostUSD = f64(leafSimulatorCostUSD)
	r.SimulatorModel = txt(leafSimulatorModel)
	r.Resources = txt(leafResources)
	r.CallsReplayed = int(i64(leafCallsReplayed))
	r.ReplayDivergedAt = int(i64(leafReplayDivergedAt))
	r.Seed = uint64(i64(leafSeed))
	r.Transcript = txt(leafTranscript)
	r.ParentRunID = txt(leafParentRunID)
	r.ReusedFrom = txt(leafReusedFrom)
	r.Worker = txt(leafWorker)
	r.TraceID = txt(leafTraceID)
	r.SpanID = txt(leafSpanID)
	if err != nil {
		return sink.Record{}, err
	}
	return r, nil
}

// scalar returns the next row's value of a non-repeated leaf, the zero
// value when the leaf is absent.
func (d *decoder) scalar(leaf int) (value, error) {
	if d.idx[leaf] < 0 {
		return value{}, nil
	}
	v, _, err := d.curs[leaf].next()
	if err != nil {
		return value{}, fmt.Errorf("column %s: %w", leaves[leaf].path, err)
	}
	return v, nil
}

// mapOf returns the next row's map of the key and value leaves: nil when
// it is null or empty (the writer writes an empty map as null).
func mapOf[V any](d *decoder, keyLeaf, valLeaf int, conv func(value) V) (map[string]V, error) {
	if d.idx[keyLeaf] < 0 {
		return nil, nil
	}
	kc, vc := &d.curs[keyLeaf], &d.curs[valLeaf]
	var m map[string]V
	for first := true; ; first = false {
		if !first {
			// Peek: another entry of this row, or the next row?
			more, err := kc.continues()
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", leaves[keyLeaf].path, err)
			}
			if !more {
				return m, nil
			}
		}
		k, krep, err := kc.next()
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", leaves[keyLeaf].path, err)
		}
		v, vrep, err := vc.next()
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", leaves[valLeaf].path, err)
		}
		if krep != vrep || k.def != v.def || first != (krep == 0) {
			return nil, fmt.Errorf("column %s: key and value levels disagree", leaves[keyLeaf].path)
		}
		if k.valid && v.valid {
			if m == nil {
				m = make(map[string]V)
			}
			m[k.s] = conv(v)
		}
	}
}

// value is one decoded level: a value when valid, else a null (at
// definition level def).
type value struct {
	valid bool
	def   int16
	i     int64
	f     float64
	s     string
}

// cursor reads one leaf column of a row group a batch at a time.
type cursor struct {
	maxDef, maxRep int16
	cr             file.ColumnChunkReader

	// The current batch: n levels, of which pos are consumed, and their
	// values (nvals, of which vpos are consumed), copied out of arrow-go's
	// buffers.
	n, pos, vpos int
	def, rep     []int16
	i64          []int64
	f64          []float64
	ba           []pq.ByteArray
	str          []string
}

func (c *cursor) reset(cr file.ColumnChunkReader) {
	c.cr = cr
	c.n, c.pos, c.vpos = 0, 0, 0
}

// fill reads the next batch; at the column's end it leaves n at 0.
func (c *cursor) fill() error {
	c.n, c.pos, c.vpos = 0, 0, 0
	if c.def == nil {
		c.def, c.rep = make([]int16, readBatch), make([]int16, readBatch)
	}
	var def, rep []int16
	if c.maxDef > 0 {
		def = c.def
	}
	if c.maxRep > 0 {
		rep = c.rep
	}
	var (
		levels int64
		err    error
	)
	switch cr := c.cr.(type) {
	case *file.Int64ColumnChunkReader:
		if c.i64 == nil {
			c.i64 = make([]int64, readBatch)
		}
		levels, _, err = cr.ReadBatch(readBatch, c.i64, def, rep)
	case *file.Float64ColumnChunkReader:
		if c.f64 == nil {
			c.f64 = make([]float64, readBatch)
		}
		levels, _, err = cr.ReadBatch(readBatch, c.f64, def, rep)
	case *file.ByteArrayColumnChunkReader:
		if c.ba == nil {
			c.ba = make([]pq.ByteArray, readBatch)
		}
		var nvals int
		levels, nvals, err = cr.ReadBatch(readBatch, c.ba, def, rep)
		// The values alias arrow-go's page buffers: copy them now.
		c.str = c.str[:0]
		for _, b := range c.ba[:nvals] {
			c.str = append(c.str, string(b))
		}
	default:
		return fmt.Errorf("unexpected column reader %T", c.cr)
	}
	if err != nil {
		return err
	}
	if levels < 0 || levels > readBatch {
		return fmt.Errorf("read %d levels, want at most %d", levels, readBatch)
	}
	c.n = int(levels)
	return nil
}

// next returns the next level's value and repetition level.
func (c *cursor) next() (value, int16, error) {
	if c.pos == c.n {
		if err := c.fill(); err != nil {
			return value{}, 0, err
		}
		if c.n == 0 {
			return value{}, 0, io.ErrUnexpectedEOF
		}
	}
	var v value
	var rep int16
	v.def = c.maxDef
	if c.maxDef > 0 {
		v.def = c.def[c.pos]
	}
	if c.maxRep > 0 {
		rep = c.rep[c.pos]
	}
	c.pos++
	if v.def < c.maxDef {
		return v, rep, nil
	}
	v.valid = true
	switch c.cr.(type) {
	case *file.Int64ColumnChunkReader:
		if c.vpos >= len(c.i64) {
			return value{}, 0, errValues
		}
		v.i = c.i64[c.vpos]
	case *file.Float64ColumnChunkReader:
		if c.vpos >= len(c.f64) {
			return value{}, 0, errValues
		}
		v.f = c.f64[c.vpos]
	case *file.ByteArrayColumnChunkReader:
		if c.vpos >= len(c.str) {
			return value{}, 0, errValues
		}
		v.s = c.str[c.vpos]
	}
	c.vpos++
	return v, rep, nil
}

// continues reports whether the next level continues the current row (a
// repetition level above 0), reading a batch if need be.
func (c *cursor) continues() (bool, error) {
	if c.pos == c.n {
		if err := c.fill(); err != nil {
			return false, err
		}
		if c.n == 0 {
			return false, nil
		}
	}
	return c.maxRep > 0 && c.rep[c.pos] > 0, nil
}

var errValues = fmt.Errorf("fewer values than levels")
