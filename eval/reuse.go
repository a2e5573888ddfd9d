package eval

// Reuse: a run that names earlier logs (Config.ReuseFrom) takes from them
// the results whose key matches instead of running those episodes again.
// The logs are the store: they are read without a lock (a log is only
// appended to, or replaced whole by a rename, so a reader holding one
// open file reads one consistent version), and nothing is cached
// elsewhere.
//
// The key of a result is what decides it: the eval's name, the sample's
// ID and input, the epoch, the episode's seed, and the versions of the
// harness, the judge and the sandbox. Layered, because the agent is what
// costs: with only the judge's version changed, the recorded output is
// judged again (a rejudge of that episode); with anything else changed,
// the episode runs.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/jsontext"
	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/internal/transcript"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// reuse is what a run took from Config.ReuseFrom: the earlier logs, held
// open, and the episodes whose recorded output is judged again.
type reuse struct {
	sources []*reuseSource
	// rejudge maps an episode (sample index × epochs + epoch) to its
	// recorded output: an offset, never the output itself, so that memory
	// stays with the number of episodes, not their outputs' size.
	rejudge map[int64]reuseLoc
}

// reuseSource is one earlier log.
type reuseSource struct {
	path  string
	f     *os.File // held for the run: offsets stay valid whatever happens to the path
	runID string
	// judgeOnly: the log's judge version differs from this eval's, the
	// harness and sandbox versions do not: its outputs are judged again.
	judgeOnly   bool
	transcripts map[string]*windowReader // transcript stores opened, by path
	// variants are those of this run whose harness version the log's
	// manifest gives too: only their records are reused ("" without
	// variants).
	variants map[string]bool
}

// sameHarnesses returns the variants of plan whose harness version is
// the same in m (a variant absent from m has none of its records), or
// why there are none. An eval without variants is the variant "", its
// version Versions.Harness.
func sameHarnesses(m *manifest.Manifest, plan *variantPlan) (map[string]bool, string) {
	there := map[string]string{"": m.Versions.Harness}
	if len(m.Variants) > 0 {
		there = map[string]string{}
		for _, v := range m.Variants {
			there[v.Name] = v.Harness
		}
	}
	same := map[string]bool{}
	var why string
	for i, name := range plan.names {
		h, ok := there[name]
		switch {
		case ok && h == plan.versions[i]:
			same[name] = true
		case !ok && why == "":
			why = fmt.Sprintf("it has no variant %q", name)
		case ok && why == "" && name == "":
			why = fmt.Sprintf("harness version %q there, %q now", h, plan.versions[i])
		case ok && why == "":
			why = fmt.Sprintf("variant %s's harness version %q there, %q now", name, h, plan.versions[i])
		}
	}
	return same, why
}

type reuseLoc struct {
	src    int32
	offset int64
}

// reuseEarlier reads the logs of Config.ReuseFrom, before anything is
// scheduled: an episode whose result matches is copied into the run (its
// record, marked reused_from, and its transcript) and marked done; an
// episode whose output can be judged again is planned: the plan it
// returns (nil when there is none) is what [rejudging] wraps the harness
// with, so that only its judge runs. Episodes already done (resumed from
// the run's own log, or of another shard) are left alone. It runs before
// the recorder starts, so it writes the log itself.
func reuseEarlier[T, O any](r *run, setup *runSetup[T, O]) (_ *reuse, err error) {
	cfg := setup.cfg
	if len(cfg.ReuseFrom) == 0 {
		return nil, nil
	}
	ru := &reuse{rejudge: map[int64]reuseLoc{}}
	defer func() {
		if err != nil {
			ru.close()
			if r.opened != nil {
				ctx := context.Background()
				r.opened.w.Close(ctx)
				r.opened.transcripts.Close(ctx)
			}
		}
	}()
	c := &reuseCopier{r: r}
	for _, path := range cfg.ReuseFrom {
		src, why, err := openReuseSource(path, setup)
		if err != nil {
			return nil, err
		}
		if src == nil {
			r.warnings = append(r.warnings, fmt.Sprintf("nothing reused from %s: %s", path, why))
			continue
		}
		srcIndex := int32(len(ru.sources))
		ru.sources = append(ru.sources, src)
		reused, planned := 0, 0
		// Decoding and comparing run in a goroutine of their own, beside
		// the copying, handing over batches: two cores share the work.
		batches, stop := make(chan []reuseItem, 4), make(chan struct{})
		var scanErr error
		go func() {
			defer close(batches)
			scanErr = scanSource(setup, src, r.done, stop, batches)
		}()
		var copyErr error
		for batch := range batches {
			for k := range batch {
				it := &batch[k]
				if copyErr != nil {
					break
				}
				switch it.kind {
				case reuseWhole:
					if !r.done.add(it.ep) {
						continue // an episode the log holds twice: the first counts
					}
					if copyErr = c.copy(src, it.sample, &it.rec, setup.samples.tagsOf(it.sample)); copyErr != nil {
						close(stop)
					}
					reused++
				case reuseOutput:
					if _, planned := ru.rejudge[it.ep]; !planned {
						ru.rejudge[it.ep] = reuseLoc{srcIndex, it.offset}
					}
					planned++
				}
			}
		}
		if err := cmp.Or(copyErr, scanErr); err != nil {
			return nil, err
		}
		cfg.Logger.Debug("proctor: reused earlier results", "log", path, "run", src.runID, "reused", reused, "outputs to judge again", planned)
	}
	c.closeTraces(ru)
	if c.missing > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("%d reused records' transcripts could not be read (the first: %s): they are kept without a transcript link", c.missing, c.firstMissing))
	}
	// An episode planned for a rejudge and then reused whole from a later
	// log is done: it needs no plan.
	for ep := range ru.rejudge {
		if r.done.has(ep) {
			delete(ru.rejudge, ep)
		}
	}
	if len(ru.rejudge) == 0 {
		ru.close()
		return nil, nil
	}
	return ru, nil
}

// rejudging returns h wrapped so that the episodes the rejudge plan ru
// plans replay their recorded output instead of running; h itself when
// ru is nil.
func rejudging[T, O any](ru *reuse, hs []harness.Harness[T, O], index *sampleIndex, plan *variantPlan) []harness.Harness[T, O] {
	if ru == nil {
		return hs
	}
	out := make([]harness.Harness[T, O], len(hs))
	for v, h := range hs {
		out[v] = &replayHarness[T, O]{inner: h, reuse: ru, index: index, plan: plan}
	}
	return out
}

// reuseItem is an earlier record that serves an episode of this run.
type reuseItem struct {
	sample int   // index in the run's samples
	ep     int64 // the episode: sample × epochs + epoch
	kind   int   // reuseWhole or reuseOutput
	offset int64 // of the record's line
	rec    sink.Record
}

// scanSource reads the committed records of src and sends, in batches,
// those that serve an episode of this run not done yet, until stop is
// closed. It reads nothing but the log, setup and done (concurrently with
// done's writer).
func scanSource[T, O any](setup *runSetup[T, O], src *reuseSource, done *doneSet, stop <-chan struct{}, out chan<- []reuseItem) error {
	const batchSize = 256
	epochs, plan := int64(setup.cfg.Epochs), setup.cfg.plan
	batch := make([]reuseItem, 0, batchSize)
	send := func() bool {
		select {
		case out <- batch:
			batch = make([]reuseItem, 0, batchSize)
			return true
		case <-stop:
			return false
		}
	}
	for e, err := range jsonl.ReadEntries(src.f, src.path) {
		if torn := (*jsonl.TornTailError)(nil); errors.As(err, &torn) {
			break // a log being written: what is committed before it is all there is
		}
		if err != nil {
			return fmt.Errorf("eval: reusing results: %w", err)
		}
		if src.runID == "" {
			src.runID = e.RunID // before the first batch is sent: the receiver reads it after
		}
		i, ok := setup.samples.index.get(e.SampleID)
		slot, known := plan.recordSlot(&e.Record)
		if !ok || !known || !src.variants[e.Variant] {
			continue
		}
		ep := int64(i)*epochs + int64(slot)
		if done.has(ep) {
			continue
		}
		if kind := reusable(setup, src, i, &e.Record); kind != reuseNone {
			batch = append(batch, reuseItem{sample: i, ep: ep, kind: kind, offset: e.Offset, rec: e.Record})
			if len(batch) == batchSize && !send() {
				return nil
			}
		}
	}
	if len(batch) > 0 {
		send()
	}
	return nil
}

// openReuseSource opens an earlier log and checks its manifest against
// this run. It returns nil and the reason when nothing of the log can be
// reused: another eval, or another harness or sandbox version.
func openReuseSource[T, O any](path string, setup *runSetup[T, O]) (*reuseSource, string, error) {
	cfg := setup.cfg
	if cfg.Log != "" && sameFile(path, cfg.Log) {
		return nil, "", &ConfigError{fmt.Sprintf("Config.ReuseFrom names the run's own log %s: running with the same log resumes it", path)}
	}
	m, err := manifest.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		if st, serr := os.Stat(path); serr != nil {
			return nil, "", fmt.Errorf("eval: reusing results: %w", serr)
		} else if !st.Mode().IsRegular() {
			return nil, "", fmt.Errorf("eval: reusing results: %s is not a regular file (%v)", path, st.Mode().Type())
		}
		return nil, "it has no manifest (written before manifests existed), so the versions that produced it are unknown", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("eval: reusing results from %s: %w", path, err)
	}
	v := setup.e.Versions
	variants, why := sameHarnesses(m, setup.cfg.plan)
	switch {
	case m.Eval != setup.e.Name:
		return nil, fmt.Sprintf("it is a run of eval %q, not %q", m.Eval, setup.e.Name), nil
	case len(variants) == 0:
		return nil, why, nil
	case m.Versions.Sandbox != v.Sandbox:
		return nil, fmt.Sprintf("sandbox version %q there, %q now", m.Versions.Sandbox, v.Sandbox), nil
	}
	src := &reuseSource{path: path, runID: m.RunID, variants: variants, judgeOnly: m.Versions.Judge != v.Judge, transcripts: map[string]*windowReader{}}
	if src.judgeOnly && cfg.Sandbox != nil {
		return nil, fmt.Sprintf("judge version %q there, %q now, and episodes have sandboxes: a judge may need the world the harness left, which a log does not keep, so they run again", m.Versions.Judge, v.Judge), nil
	}
	if src.f, err = safeopen.Open(path); err != nil {
		return nil, "", fmt.Errorf("eval: reusing results: %w", err)
	}
	return src, "", nil
}

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	if err1 == nil && err2 == nil {
		return os.SameFile(sa, sb)
	}
	pa, err1 := filepath.Abs(a)
	pb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && pa == pb
}

// How an earlier record serves an episode of this run.
const (
	reuseNone   = iota // the episode runs
	reuseWhole         // its result is this run's
	reuseOutput        // its output is judged again
)

// reusable decides how the earlier record rec serves the episode (sample
// i, rec.Epoch) of this run. Only final results are reused whole: pass,
// fail and unscored — not_sampled included, since a sampling judge's
// choice is part of its verdict and the weights of the episodes it did
// judge assume it — and never an error, which runs again as on resume.
// An output is judged again when only the judge changed, or when the
// judge failed (an error of kind judge, as a retry would).
func reusable[T, O any](setup *runSetup[T, O], src *reuseSource, i int, rec *sink.Record) int {
	s := &setup.samples.all[i] // a run that reuses holds its samples in memory
	if rec.Eval != setup.e.Name || rec.Seed != episodeSeed(setup.cfg.Seed, s.ID, rec.Epoch) {
		return reuseNone
	}
	final := rec.Status == sink.Pass || rec.Status == sink.Fail || rec.Status == sink.Unscored
	judgeable := len(rec.Output) > 0 && setup.cfg.Sandbox == nil &&
		(final || rec.Status == sink.Error && rec.ErrorKind == sink.KindJudge)
	want := reuseNone
	switch {
	case final && !src.judgeOnly:
		want = reuseWhole
	case judgeable && (src.judgeOnly || rec.Status == sink.Error):
		want = reuseOutput
	}
	if want == reuseNone || !sameInput(rec.Input, encodeJSON(s.Input)) {
		return reuseNone
	}
	return want
}

// sameInput compares a recorded input with this run's, both in the log's
// one form (jsontext.AppendRawJSON: compacted, with its escaping). That is
// enough: both are the encoding of the input by one deterministic encoder
// (encoding/json writes struct fields in order, map keys sorted, numbers
// in their shortest form), so equal inputs give equal bytes. Two encodings
// of one value that differ otherwise (a json.RawMessage input whose keys
// moved) compare unequal, which costs a run, never a wrong reuse. What is
// not in the input's JSON (unexported fields) is not in the key.
func sameInput(recorded, now []byte) bool {
	if bytes.Equal(recorded, now) {
		return true
	}
	return bytes.Equal(jsontext.AppendRawJSON(nil, recorded), jsontext.AppendRawJSON(nil, now))
}

// reuseCopier writes reused records into the run, with their transcripts.
type reuseCopier struct {
	r            *run
	line         []byte
	missing      int
	firstMissing string
}

// copy writes the earlier record rec as a record of this run: its result,
// attempt, timing and usage as they were (they are what the result took),
// its run ID this run's, reused_from the run that produced it, its tags
// this dataset's, its transcript copied into this run's transcript store.
func (c *reuseCopier) copy(src *reuseSource, i int, rec *sink.Record, tags map[string]string) error {
	r := c.r
	rec.ReusedFrom = cmp.Or(rec.ReusedFrom, rec.RunID)
	rec.RunID = r.runID
	rec.Tags = tags
	if rec.Transcript != "" {
		rec.Transcript = c.copyTranscript(src, rec)
	}
	if r.rec.log != nil {
		c.line = rec.AppendJSON(c.line[:0])
		if _, err := r.rec.log.WriteLine(c.line); err != nil {
			return fmt.Errorf("eval: recording reused results: %w", err)
		}
	}
	for _, s := range r.rec.sinks {
		if err := s.Write(context.Background(), *rec); err != nil {
			return fmt.Errorf("eval: recording reused results: %w", err)
		}
	}
	r.agg.AddAt(i, rec)
	if slot, ok := r.rec.plan.recordSlot(rec); ok {
		r.elim.add(i, slot, rec)
	}
	return nil
}

// copyTranscript copies the transcript rec's link points to into this run's
// transcript store and returns its new link. Without a store (a run without a
// log) the link points into the earlier store, by absolute path. A
// transcript that cannot be read is left out, and counted.
func (c *reuseCopier) copyTranscript(src *reuseSource, rec *sink.Record) string {
	path, off, err := jsonl.ResolveTranscript(src.path, rec.Transcript)
	if err == nil && c.r.rec.transcripts == nil {
		if abs, aerr := filepath.Abs(path); aerr == nil {
			return jsonl.TranscriptLink{Path: abs, Offset: off}.String()
		}
	}
	var w *windowReader
	if err == nil {
		w, err = src.transcript(path)
	}
	var line []byte
	if err == nil {
		line, err = w.lineAt(off)
	}
	if err == nil {
		err = transcript.Check(line, rec.SampleID, rec.Epoch)
	}
	if err == nil {
		off, err = c.r.rec.transcripts.WriteLine(line)
	}
	if err != nil {
		if c.missing == 0 {
			c.firstMissing = fmt.Sprintf("%s epoch %d in %s: %v", rec.SampleID, rec.Epoch, src.path, err)
		}
		c.missing++
		return ""
	}
	return transcriptLink(c.r.rec.transcripts.Path(), off)
}

// closeTraces closes the transcript stores the copies read: a rejudge links
// to transcripts, it does not read them.
func (c *reuseCopier) closeTraces(ru *reuse) {
	for _, s := range ru.sources {
		s.closeTraces()
	}
}

func (s *reuseSource) closeTraces() {
	for _, w := range s.transcripts {
		if w != nil {
			w.f.Close()
		}
	}
	s.transcripts = nil
}

func (s *reuseSource) transcript(path string) (*windowReader, error) {
	w, ok := s.transcripts[path]
	if !ok {
		// Only a store beside the log is copied: a planted link to
		// another file would copy it into this run's store.
		real, err := transcript.Confine(s.path, path)
		var f *os.File
		if err == nil {
			f, err = safeopen.Open(real)
		}
		if err != nil {
			s.transcripts[path] = nil
			return nil, err
		}
		w = &windowReader{f: f}
		s.transcripts[path] = w
	}
	if w == nil {
		return nil, fmt.Errorf("%s cannot be opened", path)
	}
	return w, nil
}

// windowReader reads lines at offsets of a file through a window of it
// kept in memory: transcripts are stored in about the order of their
// records, so that copying a run's transcripts reads the store almost
// sequentially, a window at a time, instead of a read per transcript.
type windowReader struct {
	f     *os.File
	buf   []byte
	start int64 // the file offset of buf[0]
}

const windowSize = 1 << 20

func (w *windowReader) lineAt(off int64) ([]byte, error) {
	if off >= w.start && off < w.start+int64(len(w.buf)) {
		rest := w.buf[off-w.start:]
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			return rest[:i], nil
		}
	}
	if cap(w.buf) < windowSize {
		w.buf = make([]byte, windowSize)
	}
	w.buf = w.buf[:cap(w.buf)]
	n, err := w.f.ReadAt(w.buf, off)
	w.buf, w.start = w.buf[:n], off
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		return w.buf[:i], nil
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	// A line longer than the window: read it whole.
	line, err := jsonl.ReadLineFrom(w.f, off, nil)
	w.buf, w.start = nil, 0
	return line, err
}

// close closes the earlier logs; nil-safe.
func (ru *reuse) close() {
	if ru == nil {
		return
	}
	for _, s := range ru.sources {
		if s.f != nil {
			s.f.Close()
		}
		s.closeTraces()
	}
}

// committer is out, with the records of episodes judged again linked to
// the run whose output they judged (parent_run_id); nil-safe.
func (ru *reuse) committer(out committer, plan *variantPlan) committer {
	if ru == nil {
		return out
	}
	return &rejudgeCommitter{out: out, reuse: ru, plan: plan}
}

type rejudgeCommitter struct {
	out   committer
	reuse *reuse
	plan  *variantPlan
}

func (c *rejudgeCommitter) commit(f *finished) {
	slot, _ := c.plan.recordSlot(&f.rec)
	if loc, ok := c.reuse.rejudge[int64(f.sample)*int64(c.plan.slots())+int64(slot)]; ok && f.rec.Output != nil && f.rec.ParentRunID == "" {
		f.rec.ParentRunID = c.reuse.sources[loc.src].runID
	}
	c.out.commit(f)
}

// replayHarness returns the recorded output of the episodes planned for a
// rejudge, and runs the eval's harness for the others.
type replayHarness[T, O any] struct {
	inner harness.Harness[T, O]
	reuse *reuse
	index *sampleIndex
	plan  *variantPlan
}

func (h *replayHarness[T, O]) Run(ctx context.Context, ep *harness.Episode[T]) (O, error) {
	i, _ := h.index.get(ep.Sample.ID)
	slot, _ := h.plan.slotOf(ep.Variant, ep.Epoch)
	loc, ok := h.reuse.rejudge[int64(i)*int64(h.plan.slots())+int64(slot)]
	if !ok {
		return h.inner.Run(ctx, ep)
	}
	src := h.reuse.sources[loc.src]
	var out O
	line, err := jsonl.ReadLineFrom(src.f, loc.offset, nil)
	if err != nil {
		return out, fmt.Errorf("reading the output to judge again: %w", err)
	}
	rec, err := replayed(line, src.path, loc.offset, &out)
	if err != nil {
		return out, err
	}
	if rec.SampleID != ep.Sample.ID || rec.Epoch != ep.Epoch || rec.Variant != ep.Variant {
		return out, fmt.Errorf("reading the output to judge again: %s at offset %d holds %s epoch %d, not %s epoch %d", src.path, loc.offset, rec.SampleID, rec.Epoch, ep.Sample.ID, ep.Epoch)
	}
	ep.AddEvent(rejudgedNote(src.path, rec))
	return out, nil
}

// replayed decodes a recorded line and its output into out.
func replayed[O any](line []byte, path string, offset int64, out *O) (*sink.Record, error) {
	var rec sink.Record
	if err := recordjson.DecodeLine(line, &rec, nil); err != nil {
		return nil, fmt.Errorf("rejudging: %s at %d: %w", path, offset, err)
	}
	if err := json.Unmarshal(rec.Output, out); err != nil {
		return nil, fmt.Errorf("rejudging: output of %s epoch %d: %w", rec.SampleID, rec.Epoch, err)
	}
	return &rec, nil
}

// rejudgedNote is the first event of a transcript whose output was
// recorded by an earlier run: a link to that run and its transcript (an
// absolute link, so that it resolves from anywhere).
func rejudgedNote(log string, rec *sink.Record) harness.Event {
	link := map[string]string{"run_id": cmp.Or(rec.ReusedFrom, rec.RunID), "trace": rec.Transcript}
	if rec.Transcript != "" {
		if path, off, err := jsonl.ResolveTranscript(log, rec.Transcript); err == nil {
			if abs, err := filepath.Abs(path); err == nil {
				link["trace"] = jsonl.TranscriptLink{Path: abs, Offset: off}.String()
			}
		}
	}
	b, _ := json.Marshal(link)
	return harness.Event{Kind: "note", Name: "rejudged", Input: b}
}
