package review

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// Episode is what review reads of a record: which episode of which run,
// the judge's verdict, and what a design weighs. Load keeps one for each
// record of a log, without its input, output and transcript.
type Episode struct {
	RunID    string
	Eval     string
	Variant  string // empty in a run of one harness
	SampleID string
	Epoch    int
	Status   sink.Status
	// Tags are the record's tags, shared by the episodes with the same
	// tags: whoever is given them must not change them.
	Tags map[string]string
	// Agreement is the record's Scores["agreement"] (as judge.Vote
	// records it), 1 when it has none.
	Agreement float64
}

// Key returns the episode's key.
func (e *Episode) Key() Key { return Key{e.Variant, e.SampleID, e.Epoch} }

// Episodes returns the episodes of records.
func Episodes(records []sink.Record) []Episode {
	out := make([]Episode, len(records))
	for i := range records {
		out[i] = episodeOf(&records[i])
	}
	return out
}

func episodeOf(r *sink.Record) Episode {
	e := Episode{RunID: r.RunID, Eval: r.Eval, Variant: r.Variant, SampleID: r.SampleID, Epoch: r.Epoch, Status: r.Status, Tags: r.Tags, Agreement: 1}
	if a, ok := r.Scores["agreement"]; ok {
		e.Agreement = a
	}
	return e
}

// Files is what review keeps beside a log, read together.
type Files struct {
	RunID, Eval string        // the log's, from its first record
	Episodes    []Episode     // the log's committed records, in log order
	Queued      []sink.Record // the records of the queue's episodes, whole
	Queue       *Queue        // nil when no queue was picked
	Reviews     []Review
	// Torn lists the torn tails skipped (the log's, the review file's):
	// what a writer was writing, or a crash left.
	Torn []*jsonl.TornTailError
	// Ignored says what was left beside the log by another run (a queue,
	// reviews) and does not count for this one.
	Ignored []string
}

// Load reads the log at log, its queue and its reviews, those of the
// log's run and eval only: a queue picked from another run, or reviews of
// another run, left at the same path, are named in Files.Ignored and left
// out. It keeps of each
// record only its Episode, and the whole record of the queue's episodes
// alone: a log of a million records takes a fraction of the memory its
// records would. A log that is whole is decoded on every core
// (recordjson.ScanChunks, as the report reads); one that is not (a torn
// tail, a corrupt line) is read record by record, which says what is
// wrong with it.
func Load(log string) (*Files, error) {
	f := &Files{}
	q, err := ReadQueue(QueuePath(log))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	f.Queue = q
	if !f.readFast(log) {
		if err := f.readRecords(log); err != nil {
			return nil, err
		}
	}
	rs, torn, err := Read(FilePath(log))
	if err != nil {
		return nil, err
	}
	if torn != nil {
		f.Torn = append(f.Torn, torn)
	}
	f.Reviews = rs
	f.dropOtherRuns(log)
	return f, nil
}

// dropOtherRuns leaves out the queue and the reviews of another run than
// the log's.
func (f *Files) dropOtherRuns(log string) {
	if len(f.Episodes) == 0 {
		return
	}
	f.RunID, f.Eval = f.Episodes[0].RunID, f.Episodes[0].Eval
	if q := f.Queue; q != nil && (q.RunID != f.RunID || (q.Eval != "" && q.Eval != f.Eval)) {
		f.Ignored = append(f.Ignored, fmt.Sprintf("%s was picked from run %s of eval %q, not from this log's run %s of eval %q: ignored (pick again with -replace)",
			QueuePath(log), q.RunID, q.Eval, f.RunID, f.Eval))
		f.Queue, f.Queued = nil, nil
	}
	other := map[string]int{}
	f.Reviews = slices.DeleteFunc(f.Reviews, func(r Review) bool {
		if r.RunID != "" && r.RunID != f.RunID {
			other[r.RunID]++
			return true
		}
		return false
	})
	for _, id := range slices.Sorted(maps.Keys(other)) {
		f.Ignored = append(f.Ignored, fmt.Sprintf("%s: %d reviews of run %s, not of this log's run %s: ignored", FilePath(log), other[id], id, f.RunID))
	}
}

// queued returns the set of the queue's episodes.
func (f *Files) queued() map[Key]bool {
	set := map[Key]bool{}
	if f.Queue != nil {
		for _, e := range f.Queue.Entries {
			set[e.Key()] = true
		}
	}
	return set
}

// readRecords reads the log record by record.
func (f *Files) readRecords(log string) error {
	f.Episodes, f.Queued = nil, nil
	queued := f.queued()
	for r, err := range jsonl.Records(log) {
		var torn *jsonl.TornTailError
		if errors.As(err, &torn) {
			f.Torn = append(f.Torn, torn)
			break
		}
		if err != nil {
			return err
		}
		f.Episodes = append(f.Episodes, episodeOf(&r))
		if queued[Key{r.Variant, r.SampleID, r.Epoch}] {
			f.Queued = append(f.Queued, r)
		}
	}
	return nil
}

// loadLine is a record line as readFast decodes it.
type loadLine struct {
	recordjson.Light
	agreement float64
	whole     *sink.Record // the record, when its episode is queued
}

var agreementKey = []byte(`"agreement"`)

// readFast reads a whole log on every core, and reports whether it could:
// false for a log that is not whole, or not a regular file.
func (f *Files) readFast(log string) bool {
	lf, err := safeopen.Open(log)
	if err != nil {
		return false
	}
	defer lf.Close()
	st, err := lf.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	queued := f.queued()
	var (
		tags      recordjson.TagSets
		runID, ev string
		variants  = map[string]string{} // a log's few variants, interleaved: each copied once
	)
	end, _, err := recordjson.ScanChunks(lf, func(c *recordjson.Chunk[loadLine]) {
		c.EachLine(func(line []byte, _, _ int) bool {
			c.Out = append(c.Out, loadLine{})
			l := &c.Out[len(c.Out)-1]
			if err := recordjson.DecodeLight(line, &l.Light); err != nil || l.Schema != sink.SchemaVersion {
				c.Out = c.Out[:len(c.Out)-1]
				return false
			}
			l.agreement = 1
			if bytes.Contains(line, agreementKey) {
				// Scores are left out of the light decode: this line's
				// are decoded apart, the rare line that has one.
				var r sink.Record
				recordjson.DecodeLine(line, &r, &recordjson.DecodeOptions{NoRaw: true, Alias: true})
				if a, ok := r.Scores["agreement"]; ok {
					l.agreement = a
				}
			}
			if queued[Key{l.Variant, l.SampleID, l.Epoch}] {
				l.whole = &sink.Record{}
				recordjson.DecodeLine(line, l.whole, nil)
			}
			return true
		})
	}, func(c *recordjson.Chunk[loadLine]) error {
		if f.Episodes == nil && len(c.Out) > 0 {
			// Room for the whole log at the first chunk's line length (no
			// record is under 128 bytes): the slice of a million episodes
			// is not copied as it grows.
			n := min(st.Size()/int64(len(c.Data))*int64(len(c.Out)), st.Size()/128)
			f.Episodes = make([]Episode, 0, int(n)+len(c.Out))
		}
		for i := range c.Out {
			l := &c.Out[i]
			// The chunk's memory is reused: what is kept is copied.
			if l.RunID != runID {
				runID = strings.Clone(l.RunID)
			}
			if l.Eval != ev {
				ev = strings.Clone(l.Eval)
			}
			variant, ok := variants[l.Variant]
			if !ok && l.Variant != "" {
				variant = strings.Clone(l.Variant)
				variants[variant] = variant
			}
			f.Episodes = append(f.Episodes, Episode{RunID: runID, Eval: ev, Variant: variant, SampleID: strings.Clone(l.SampleID), Epoch: l.Epoch,
				Status: status(l.Status), Tags: tags.Of(&l.Light), Agreement: l.agreement})
			if l.whole != nil {
				f.Queued = append(f.Queued, *l.whole)
			}
		}
		return nil
	})
	return err == nil && end == st.Size()
}

// status returns s as one of the statuses' constants, or a copy.
func status(s sink.Status) sink.Status {
	for _, c := range [...]sink.Status{sink.Pass, sink.Fail, sink.Error, sink.Unscored} {
		if s == c {
			return c
		}
	}
	return sink.Status(strings.Clone(string(s)))
}
