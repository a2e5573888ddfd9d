package view

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// A run's state is folded from its log in one pass and kept up to date by
// reading only what was appended since: a report.Aggregator (the report's
// numbers, computed by eval/report and nowhere else), the viewer's own
// histograms and time series, and an index of each record's byte offset by
// sample. Records, outputs and transcripts are never kept: the sample page
// reads its lines back by offset.

// errNotLog marks a file whose first line is not a record: a dataset or
// another JSONL file in a runs directory, which the runs page leaves out.
var errNotLog = errors.New("not a proctor log")

// indexEntry locates one record: the hash of its sample ID and the offset
// of its line. 16 bytes a record; a lookup scans them all (a million in a
// few milliseconds) and reads back the lines whose hash matches.
type indexEntry struct {
	hash uint64
	off  int64
}

// Latency and cost histograms: log-spaced bins, four per decade.
const (
	binsPerDecade = 4
	latMinExp     = -2 // 0.01 ms
	latBins       = 10 * binsPerDecade
	costMinExp    = -7 // $1e-7
	costBins      = 10 * binsPerDecade
)

// extras is what the viewer folds beside the aggregator: the charts the
// text report has no room for. Like the aggregator, it merges.
type extras struct {
	latency  [latBins]int
	cost     [costBins + 1]int // bin 0: free episodes
	finished map[int64]*[4]int // unix second of the end → pass, fail, error, unscored
	kinds    map[sink.ErrorKind]int
	workers  map[string]int
	traced   int
	spend    spend     // for the projected cost
	first    time.Time // earliest start
	last     time.Time // latest end
}

const maxWorkers = 256 // distinct workers listed; more are folded into "other"

func newExtras() *extras {
	return &extras{finished: map[int64]*[4]int{}, kinds: map[sink.ErrorKind]int{}, workers: map[string]int{}}
}

func logBin(v float64, minExp, n int) int {
	if v <= 0 {
		return 0
	}
	b := int(math.Floor((math.Log10(v) - float64(minExp)) * binsPerDecade))
	return min(max(b, 0), n-1)
}

func (e *extras) add(r *sink.Record) {
	e.latency[logBin(r.DurationMS, latMinExp, latBins)]++
	if r.CostUSD > 0 {
		e.cost[1+logBin(r.CostUSD, costMinExp, costBins)]++
	} else {
		e.cost[0]++
	}
	e.spend.add(r.CostUSD)
	if !r.StartedAt.IsZero() {
		end := r.StartedAt.Add(time.Duration(r.DurationMS * float64(time.Millisecond)))
		if e.first.IsZero() || r.StartedAt.Before(e.first) {
			e.first = r.StartedAt
		}
		if end.After(e.last) {
			e.last = end
		}
		sec := end.Unix()
		c := e.finished[sec]
		if c == nil {
			c = new([4]int)
			e.finished[sec] = c
		}
		c[statusIndex(r.Status)]++
	}
	if r.ErrorKind != "" {
		e.kinds[r.ErrorKind]++
	}
	if r.Worker != "" {
		e.addWorker(r.Worker, 1)
	}
	if r.TraceID != "" {
		e.traced++
	}
}

func (e *extras) addWorker(w string, n int) {
	if _, ok := e.workers[w]; !ok && len(e.workers) >= maxWorkers {
		w = "(other)"
	}
	e.workers[w] += n
}

func statusIndex(s sink.Status) int {
	switch s {
	case sink.Pass:
		return 0
	case sink.Fail:
		return 1
	case sink.Error:
		return 2
	}
	return 3
}

func (e *extras) merge(o *extras) {
	for i, n := range o.latency {
		e.latency[i] += n
	}
	for i, n := range o.cost {
		e.cost[i] += n
	}
	for sec, c := range o.finished {
		d := e.finished[sec]
		if d == nil {
			d = new([4]int)
			e.finished[sec] = d
		}
		for i := range c {
			d[i] += c[i]
		}
	}
	for k, n := range o.kinds {
		e.kinds[k] += n
	}
	for w, n := range o.workers {
		e.addWorker(w, n)
	}
	e.traced += o.traced
	e.spend.merge(&o.spend)
	if !o.first.IsZero() && (e.first.IsZero() || o.first.Before(e.first)) {
		e.first = o.first
	}
	if o.last.After(e.last) {
		e.last = o.last
	}
}

// logState is one served log, folded up to off.
type logState struct {
	id, path string
	opts     *report.Options
	seed     maphash.Seed

	mu      sync.Mutex
	file    os.FileInfo // the file as last read: a rewrite (a new inode) or a shrink starts over
	off     int64       // the end of the last committed line folded in
	lines   int         // lines before off
	records int
	tail    int64 // bytes after off: a line being written, or a torn tail
	err     error // fatal: not a log, a corrupt line, another schema
	agg     *report.Aggregator
	ext     *extras
	index   []indexEntry
	version uint64 // bumped whenever records are folded in

	rep        *report.Report // cached Report of version repVersion
	repVersion uint64
}

func newLogState(id, path string, opts *report.Options, seed maphash.Seed) *logState {
	l := &logState{id: id, path: path, opts: opts, seed: seed}
	l.reset()
	return l
}

func (l *logState) reset() {
	l.file, l.off, l.lines, l.records, l.tail, l.err = nil, 0, 0, 0, 0, nil
	l.agg = report.NewAggregator(l.opts)
	l.ext = newExtras()
	l.index = nil
	l.version++
	l.rep = nil
}

// snapshot is what a page needs of a log, taken under its lock.
type snapshot struct {
	ID, Path string
	Size     int64
	Records  int
	Tail     int64
	Err      error
	Version  uint64
	Report   *report.Report
	Ext      *extras // a copy: not shared with the live state
}

func (l *logState) refreshLocked() error {
	f, err := safeopen.Open(l.path)
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("view: %s is not a regular file", l.path)
	}
	if l.file != nil && (!os.SameFile(l.file, fi) || fi.Size() < l.off+l.tail) {
		l.reset() // rewritten (resume drops error records atomically) or truncated
	}
	l.file = fi
	if l.err != nil || fi.Size() == l.off+l.tail && l.version > 1 {
		return nil
	}
	return l.fold(f, fi.Size())
}

// chunk is a run of whole lines folded by one worker; what must stay in
// file order (the index, the failures, where a bad line is) is kept per
// chunk, the rest in the worker's aggregator and extras.
type chunk struct {
	data    []byte
	off     int64 // of data in the file
	index   []indexEntry
	records int
	lines   int    // newlines in data before bad, or in all of it
	size    int    // of data, which is dropped once folded
	bad     int    // offset in data of the first line that is not a record; -1 for none
	badLine []byte // that line
	badErr  error  // why
	schema  int    // the bad line's schema when it is a record of another schema; 0 otherwise
}

// worker is one goroutine's share of a fold.
type worker struct {
	agg *report.Aggregator
	ext *extras
	rec sink.Record // decoded into, line after line: records are not kept

	tags   map[string]string            // a new sample's tags, decoded into
	keys   []string                     // their keys, sorted
	key    []byte                       // the tags as one key of shared
	shared map[string]map[string]string // tag sets seen, by key
}

// foldDecode leaves out of each record what the run page never shows:
// input and output, and the maps (scores are in no chart, and a sample's
// tags are read once, when the worker's aggregator first sees it). Every
// line is validated all the same, as the log's reader does.
var foldDecode = recordjson.DecodeOptions{NoRaw: true, NoMaps: true}

func (w *worker) fold(c *chunk, seed maphash.Seed) {
	c.bad = -1
	data := c.data
	c.data = nil // the chunks of a 1M-record log would add up to all of it
	for i := 0; i < len(data); {
		j := bytes.IndexByte(data[i:], '\n')
		line := data[i : i+j]
		if len(bytes.TrimSpace(line)) > 0 {
			r := &w.rec
			*r = sink.Record{}
			err := recordjson.DecodeLine(line, r, &foldDecode)
			if err == nil && r.Schema != sink.SchemaVersion {
				c.schema = r.Schema
				err = fmt.Errorf("record schema %d, this version of proctor reads schema %d", r.Schema, sink.SchemaVersion)
			}
			if err != nil {
				c.bad, c.badLine, c.badErr = i, slices.Clone(line), err
				return
			}
			if s, known := w.agg.Index(r.SampleID); known {
				w.agg.AddAt(s, r)
			} else {
				r.Tags = w.sampleTags(line) // the aggregator keeps a new sample's tags
				w.agg.Add(r)
			}
			w.ext.add(r)
			c.index = append(c.index, indexEntry{maphash.String(seed, r.SampleID), c.off + int64(i)})
			c.records++
		}
		c.lines++
		i += j + 1
	}
}

// sampleTags returns the tags of a record line already decoded, nil for
// none. Samples with the same tags share one map, which the aggregators
// only read: a run has a few tag sets and many samples.
func (w *worker) sampleTags(line []byte) map[string]string {
	clear(w.tags)
	r := sink.Record{Tags: w.tags}
	if recordjson.DecodeLine(line, &r, &recordjson.DecodeOptions{NoRaw: true}) != nil || len(w.tags) == 0 {
		return nil
	}
	w.keys = w.keys[:0]
	for k := range w.tags {
		w.keys = append(w.keys, k)
	}
	slices.Sort(w.keys)
	w.key = w.key[:0]
	for _, k := range w.keys {
		w.key = strconv.AppendQuote(w.key, k)
		w.key = strconv.AppendQuote(w.key, w.tags[k])
	}
	if m, ok := w.shared[string(w.key)]; ok {
		return m
	}
	m := maps.Clone(w.tags)
	if len(w.shared) < maxSharedTags {
		w.shared[string(w.key)] = m
	}
	return m
}

// maxSharedTags bounds a worker's table of tag sets: tags unique to each
// sample (an ID as a tag, say) get a map each, as they would anyway.
const maxSharedTags = 4096

// folded is what folding a range of a log gives.
type folded struct {
	agg     *report.Aggregator
	ext     *extras
	index   []indexEntry
	records int
	lines   int
	end     int64  // the end of the last whole line folded
	bad     *chunk // the chunk of the first line that is not a record, if any
}

// foldRange reads [from, size) of f in chunks split at newlines and folds
// them on every core, each worker into its own aggregator, merged at the
// end. A last line without its newline is not folded: a writer is in the
// middle of it, or it is a torn tail.
func (l *logState) foldRange(f *os.File, from, size int64) (*folded, error) {
	n := runtime.GOMAXPROCS(0)
	// Each chunk is folded by whichever worker is free: a worker holds its
	// own aggregator, extras and tag tables, merged at the end.
	workers := make([]*worker, n)
	free := make(chan *worker, n)
	for i := range workers {
		workers[i] = &worker{agg: report.NewAggregator(l.opts), ext: newExtras(), tags: map[string]string{}, shared: map[string]map[string]string{}}
		free <- workers[i]
	}
	var chunks []*chunk
	// The log's one chunk reader: every chunk is folded (a bad line is
	// found again below), none is left to a sequential reader.
	_, _, err := recordjson.ScanChunks(io.NewSectionReader(f, from, size-from), func(rc *recordjson.Chunk[*chunk]) {
		c := &chunk{data: rc.Data, size: len(rc.Data), off: from + rc.Off}
		w := <-free
		w.fold(c, l.seed)
		free <- w
		rc.Out = append(rc.Out, c)
	}, func(rc *recordjson.Chunk[*chunk]) error {
		chunks = append(chunks, rc.Out[0])
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("view: read %s: %w", l.path, err)
	}
	out := &folded{agg: workers[0].agg, ext: workers[0].ext, end: from}
	for _, w := range workers[1:] {
		out.agg.Merge(w.agg)
		out.ext.merge(w.ext)
	}
	records := 0
	for _, c := range chunks {
		records += c.records
	}
	out.index = make([]indexEntry, 0, records)
	for _, c := range chunks {
		if c.bad >= 0 {
			out.bad = c
			break
		}
		out.index = append(out.index, c.index...)
		out.records += c.records
		out.lines += c.lines
		out.end = c.off + int64(c.size)
	}
	return out, nil
}

// fold folds in the log from l.off to size. A line that is not a record
// stops it: it is the last line (a torn tail, unless more follows later),
// a corrupt line, or the first line of a file that is not a log.
func (l *logState) fold(f *os.File, size int64) error {
	res, err := l.foldRange(f, l.off, size)
	if err != nil {
		return err
	}
	bad := res.bad
	if bad != nil {
		// The workers folded chunks past the bad line: fold again up to it.
		if res, err = l.foldRange(f, l.off, bad.off+int64(bad.bad)); err != nil {
			return err
		}
	}
	if l.records == 0 {
		l.agg, l.ext = res.agg, res.ext
	} else {
		l.agg.Merge(res.agg)
		l.ext.merge(res.ext)
	}
	if l.index == nil {
		l.index = res.index // a log opened: no copy of its index
	} else {
		l.index = append(l.index, res.index...)
	}
	l.records += res.records
	l.lines += res.lines
	l.off = res.end
	if bad != nil {
		line := bad.badLine
		last := l.off+int64(len(line))+1 == size
		switch {
		case bad.schema != 0:
			// A whole record of another schema is never a torn tail, last
			// or not: resume and report refuse it too (jsonl.SchemaError).
			l.err = fmt.Errorf("view: %s:%d: %v", l.path, l.lines+1, bad.badErr)
		case l.records == 0 && !looksLikeRecord(line) || l.records == 0 && !last:
			l.err = fmt.Errorf("view: %s:%d: %w: %v", l.path, l.lines+1, errNotLog, bad.badErr)
		case last:
			// The last line, complete but not a record: a torn tail if
			// nothing follows it, corrupt if something does later.
		default:
			l.err = fmt.Errorf("view: %s:%d: corrupt record: %v", l.path, l.lines+1, bad.badErr)
		}
	}
	l.tail = size - l.off
	if l.records == 0 && l.tail > 0 && l.err == nil {
		// An unfinished first line: a log being started, or not a log.
		head := make([]byte, min(l.tail, 16))
		if n, _ := f.ReadAt(head, l.off); !looksLikeRecord(head[:n]) && len(bytes.TrimSpace(head[:n])) > 0 {
			l.err = fmt.Errorf("view: %s:1: %w", l.path, errNotLog)
		}
	}
	l.version++
	return nil
}

// recordStart is how every record line of a log begins (sink.AppendJSON's
// first field): a torn tail starts like it.
const recordStart = `{"schema":`

func looksLikeRecord(b []byte) bool {
	if len(b) < len(recordStart) {
		return len(b) > 0 && recordStart[:len(b)] == string(b)
	}
	return string(b[:len(recordStart)]) == recordStart
}

// snapshot refreshes the log and returns its state, with its report
// recomputed when records were folded in since the last one.
func (l *logState) snapshot() (*snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.refreshLocked(); err != nil {
		return nil, err
	}
	if l.rep == nil || l.repVersion != l.version {
		rep := l.agg.Report()
		l.rep, l.repVersion = rep, l.version
	}
	ext := *l.ext
	ext.finished = make(map[int64]*[4]int, len(l.ext.finished))
	for k, v := range l.ext.finished {
		c := *v
		ext.finished[k] = &c
	}
	ext.kinds, ext.workers = cloneMap(l.ext.kinds), cloneMap(l.ext.workers)
	return &snapshot{ID: l.id, Path: l.path, Size: l.off + l.tail, Records: l.records, Tail: l.tail,
		Err: l.err, Version: l.version, Report: l.rep, Ext: &ext}, nil
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// counts is the cheap summary a live page is sent as the log grows.
type counts struct {
	Version  uint64 `json:"version"`
	Episodes int    `json:"episodes"`
	Passed   int    `json:"passed"`
	Failed   int    `json:"failed"`
	Errored  int    `json:"errored"`
	Tail     int64  `json:"tail"`
}

// live refreshes the log and returns its counts, without a report.
func (l *logState) live() (counts, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.refreshLocked(); err != nil {
		return counts{}, err
	}
	c := counts{Version: l.version, Episodes: l.records, Tail: l.tail}
	for _, n := range l.ext.finished {
		c.Passed += n[0]
		c.Failed += n[1]
		c.Errored += n[2]
	}
	return c, nil
}

// sampleRecords reads back the records of one sample, by epoch.
func (l *logState) sampleRecords(id string) ([]located, error) {
	l.mu.Lock()
	if err := l.refreshLocked(); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	h := maphash.String(l.seed, id)
	var offs []int64
	for _, e := range l.index {
		if e.hash == h {
			offs = append(offs, e.off)
		}
	}
	l.mu.Unlock()
	f, err := safeopen.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	defer f.Close()
	var out []located
	for _, off := range offs {
		line, err := jsonl.ReadLineFrom(f, off, nil)
		if err != nil {
			return nil, fmt.Errorf("view: %s at offset %d: %w", l.path, off, err)
		}
		var r sink.Record
		if err := recordjson.DecodeLine(line, &r, nil); err != nil {
			return nil, fmt.Errorf("view: %s at offset %d: %w", l.path, off, err)
		}
		if r.SampleID == id { // not a hash collision
			out = append(out, located{r, off})
		}
	}
	slices.SortStableFunc(out, func(a, b located) int { return a.Epoch - b.Epoch })
	return out, nil
}

type located struct {
	sink.Record
	Offset int64
}
