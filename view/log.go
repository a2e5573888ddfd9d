package view

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"os"
	"slices"
	"strings"
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
	owned    map[string]string // the kinds' and workers' names, copied (own)
	traced   int
	spend    spend     // for the projected cost
	first    time.Time // earliest start
	last     time.Time // latest end
}

const maxWorkers = 256 // distinct workers listed; more are folded into "other"

func newExtras() *extras {
	return &extras{finished: map[int64]*[4]int{}, kinds: map[sink.ErrorKind]int{}, workers: map[string]int{}, owned: map[string]string{}}
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
		e.kinds[sink.ErrorKind(e.own(string(r.ErrorKind)))]++
	}
	if r.Worker != "" {
		e.addWorker(e.own(r.Worker), 1)
	}
	if r.TraceID != "" {
		e.traced++
	}
}

// own returns s as e keeps it: a record's strings share a chunk of the
// log that is reused, and a map assignment stores its key even when the
// key is there already.
func (e *extras) own(s string) string {
	if o, ok := e.owned[s]; ok {
		return o
	}
	o := strings.Clone(s)
	if len(e.owned) < 2*maxWorkers {
		e.owned[o] = o
	}
	return o
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
	opts := l.opts
	if opts == nil || opts.Broken == nil {
		// An oracle's log beside the run's (eval.Config.Oracle): its broken
		// samples are left out, as `proctor report` leaves them out.
		broken, err := report.OracleBroken(l.path)
		if err != nil {
			l.err = fmt.Errorf("view: %w", err)
		} else if broken != nil {
			o := report.Options{}
			if opts != nil {
				o = *opts
			}
			o.Broken, opts = broken, &o
		}
	}
	l.agg = report.NewAggregator(opts)
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

// chunkFold is what the viewer gathers from a chunk besides the
// aggregator: its charts and its records' offsets, in order.
type chunkFold struct {
	ext   *extras
	index []indexEntry
}

// fold folds in the log from l.off to size with recordjson.Fold, the
// reader `proctor report` uses: every core decodes whole lines and the
// records are added to the aggregator in file order, so the run page shows
// the numbers the report prints. A line that is not a record stops it: it
// is the last line (a torn tail, unless more follows later), a corrupt
// line, or the first line of a file that is not a log. A last line without
// its newline is not folded: a writer is in the middle of it, or it is a
// torn tail.
func (l *logState) fold(f *os.File, size int64) error {
	from := l.off
	var index [][]indexEntry // by chunk, joined at the end
	end, lines, err := recordjson.Fold(io.NewSectionReader(f, from, size-from), l.agg, func(c *recordjson.FoldChunk) {
		x := &chunkFold{ext: newExtras(), index: make([]indexEntry, len(c.Out))}
		for i := range c.Out {
			r := &c.Out[i]
			x.ext.add(&r.Record)
			x.index[i] = indexEntry{maphash.String(l.seed, r.SampleID), from + c.Off + int64(r.Start)}
		}
		c.Aux = x
	}, func(c *recordjson.FoldChunk) {
		x := c.Aux.(*chunkFold)
		l.ext.merge(x.ext)
		index = append(index, x.index)
		l.records += len(x.index)
	})
	if err != nil {
		l.reset() // part of it was folded in: the next refresh starts over
		return fmt.Errorf("view: read %s: %w", l.path, err)
	}
	if l.index == nil {
		l.index = slices.Concat(index...) // a log opened: its index, allocated once
	} else {
		for _, x := range index {
			l.index = append(l.index, x...)
		}
	}
	l.off = from + end
	l.lines += lines
	l.tail = size - l.off
	if l.tail > 0 {
		// A whole line here is not a record; an unfinished one is judged
		// below, or when it is finished.
		if line, err := jsonl.ReadLineFrom(f, l.off, nil); err == nil {
			l.badLine(line, l.off+int64(len(line))+1 == size)
		}
	}
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

// badLine judges the whole line at l.off, which is not a record; last
// says nothing follows it.
func (l *logState) badLine(line []byte, last bool) {
	var r sink.Record
	err := recordjson.DecodeLine(line, &r, nil)
	schema := 0 // of a whole record of another schema
	if err == nil {
		schema = r.Schema
		err = fmt.Errorf("record schema %d, this version of proctor reads schema %d", r.Schema, sink.SchemaVersion)
	}
	switch {
	case schema != 0:
		// A whole record of another schema is never a torn tail, last or
		// not: resume and report refuse it too (jsonl.SchemaError).
		l.err = fmt.Errorf("view: %s:%d: %v", l.path, l.lines+1, err)
	case l.records == 0 && !looksLikeRecord(line) || l.records == 0 && !last:
		l.err = fmt.Errorf("view: %s:%d: %w: %v", l.path, l.lines+1, errNotLog, err)
	case last:
		// The last line, complete but not a record: a torn tail if nothing
		// follows it, corrupt if something does later.
	default:
		l.err = fmt.Errorf("view: %s:%d: corrupt record: %v", l.path, l.lines+1, err)
	}
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
		// What the run's manifest holds: its resources and versions (a
		// comparison reads them), the eliminations it decided.
		rep.AddManifest(l.path)
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
