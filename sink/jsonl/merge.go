package jsonl

// Merging logs: the shards of one run, each logged on its own machine,
// become the one log of the run.

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/internal/filelock"
	"github.com/proctor-evals/proctor/internal/natural"
	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/internal/sidecar"
	"github.com/proctor-evals/proctor/internal/transcript"
	"github.com/proctor-evals/proctor/sink"
)

// MergeOptions tune Merge. The zero value (or nil) never replaces an
// existing output.
type MergeOptions struct {
	// Force replaces an existing output log, and its transcript store, when it
	// is a proctor log (an earlier merge, say); any other file is left as
	// it is and the merge fails.
	Force bool
}

// Merged is what Merge did.
type Merged struct {
	RunID      string           // the run of every merged record; "" when there were none
	Records    int              // records written
	Duplicates int              // records of an episode already kept, dropped
	Torn       []*TornTailError // torn tails of inputs: cut from what was read, never written
	// Warnings say what was kept with less than it had: a transcript that
	// could not be read is left out and the record's transcript link cleared.
	Warnings []string
}

// RunMismatchError reports logs of different runs given to Merge: shards
// of one run share its run ID.
type RunMismatchError struct {
	Log, OtherLog     string
	RunID, OtherRunID string
}

func (e *RunMismatchError) Error() string {
	if e.Log == e.OtherLog {
		return fmt.Sprintf("jsonl: merge: %s holds records of two runs, %q and %q: one log holds one run", e.Log, e.RunID, e.OtherRunID)
	}
	return fmt.Sprintf("jsonl: merge: %s holds run %q and %s run %q: only logs of one run merge (shards of a run share its run ID)",
		e.Log, e.RunID, e.OtherLog, e.OtherRunID)
}

// Merge writes the records of logs, the logs of one run (its shards, or a
// run and a rerun of part of it), into a new log out, with one record per
// episode key (sample ID, epoch):
//
//   - Of several records of one key, a record that is not an error is
//     kept over an error record, and otherwise the first one, in the
//     order of logs and then of lines. The others count as Duplicates;
//     a final result (not an error) that differs from the kept one in
//     status or score is a conflict, one warning each in Merged.Warnings.
//   - Records are written in a deterministic order: by sample ID, digits
//     compared by value ("q5" before "q10"), then by epoch. The bytes
//     written depend only on the records kept, so logs without
//     conflicting duplicates merge to the same bytes in any order.
//   - Each record's transcript is copied into out's transcript store (out's
//     name with ".traces.jsonl" for its extension) and its transcript link
//     rewritten to it, so that every link of out resolves.
//   - A torn tail of an input (a shard killed mid-write) is reported in
//     Merged.Torn and left out; any other line that is not a record (a
//     corrupt line, a file that is not a log) fails the merge.
//
// Records of different runs fail the merge with a *RunMismatchError; so
// does an input another process is writing, with a *LockedError (merge a
// shard after it ended). out is written whole or not at all: into
// temporary files beside it, renamed into place at the end. An existing
// out is an error unless opts.Force is set, and even then is replaced
// only if it is a proctor log. Merge holds out's writer lock while it
// works.
//
// Memory holds each input record's key and offset, not the records: the
// records are read again, one at a time, to be written.
func Merge(out string, logs []string, opts *MergeOptions) (*Merged, error) {
	if opts == nil {
		opts = &MergeOptions{}
	}
	if len(logs) == 0 {
		return nil, errors.New("jsonl: merge: no logs to merge")
	}
	store := sidecar.Transcripts(out)
	if err := checkMergeOutput(out, store, logs, opts.Force); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, fmt.Errorf("jsonl: merge: %w", err)
	}
	lk, err := lock(out)
	if err != nil {
		return nil, err
	}
	defer unlock(out, lk)

	res := &Merged{}
	var keys []mergeKey
	runOf := "" // the log res.RunID was first seen in
	for i, path := range logs {
		if err := filelock.Held(path); err != nil {
			return nil, err
		}
		n := len(keys)
		var err error
		keys, err = indexLog(path, i, keys)
		var torn *TornTailError
		if errors.As(err, &torn) {
			res.Torn = append(res.Torn, torn)
			err = nil
		}
		if err != nil {
			return nil, err
		}
		for _, k := range keys[n:] {
			switch {
			case res.RunID == "":
				res.RunID, runOf = k.runID, path
			case k.runID != res.RunID:
				return nil, &RunMismatchError{Log: runOf, RunID: res.RunID, OtherLog: path, OtherRunID: k.runID}
			}
		}
	}

	// Sorted by key and then by preference, the first of each key is the
	// one kept. The sort is stable: input order breaks ties.
	slices.SortStableFunc(keys, func(a, b mergeKey) int {
		return cmp.Or(natural.Compare(a.sampleID, b.sampleID), strings.Compare(a.sampleID, b.sampleID),
			cmp.Compare(a.epoch, b.epoch), strings.Compare(a.variant, b.variant), boolOrder(a.isError, b.isError))
	})
	kept := keys[:0]
	var conflicts conflictReader
	defer conflicts.close()
	for _, k := range keys {
		if n := len(kept); n > 0 && k.sampleID == kept[n-1].sampleID && k.epoch == kept[n-1].epoch && k.variant == kept[n-1].variant {
			res.Duplicates++
			if w, err := conflicts.check(logs, kept[n-1], k); err != nil {
				return nil, err
			} else if w != "" {
				res.Warnings = append(res.Warnings, w)
			}
			continue
		}
		kept = append(kept, k)
	}

	if err := writeMerged(out, store, logs, kept, res); err != nil {
		return nil, err
	}
	res.Records = len(kept)
	return res, nil
}

// conflictReader reads the records of one key that two inputs hold, to
// tell a conflict (two final results that differ) from a duplicate.
type conflictReader struct {
	files map[int]*os.File
	buf   []byte
}

// check returns a warning when kept and dropped, two records of one key,
// are final results (not errors, which a rerun is meant to replace) that
// differ in status or score.
func (c *conflictReader) check(logs []string, kept, dropped mergeKey) (string, error) {
	if kept.isError || dropped.isError {
		return "", nil
	}
	var rs [2]sink.Record
	for i, k := range [2]mergeKey{kept, dropped} {
		if c.files == nil {
			c.files = map[int]*os.File{}
		}
		f := c.files[k.log]
		if f == nil {
			var err error
			if f, err = safeopen.Open(logs[k.log]); err != nil {
				return "", fmt.Errorf("jsonl: merge: %w", err)
			}
			c.files[k.log] = f
		}
		var err error
		if c.buf, err = ReadLineFrom(f, k.offset, c.buf); err == nil {
			err = recordjson.DecodeLine(c.buf, &rs[i], &recordjson.DecodeOptions{NoRaw: true, NoMaps: true})
		}
		if err != nil {
			return "", fmt.Errorf("jsonl: merge: %s at offset %d: %w", logs[k.log], k.offset, err)
		}
	}
	a, b := &rs[0], &rs[1]
	if a.Status == b.Status && (a.Score == b.Score || a.Score != a.Score && b.Score != b.Score) {
		return "", nil
	}
	return fmt.Sprintf("conflict: %s epoch %d is %s (score %g) in %s and %s (score %g) in %s: the first is kept",
		a.SampleID, a.Epoch, a.Status, a.Score, logs[kept.log], b.Status, b.Score, logs[dropped.log]), nil
}

func (c *conflictReader) close() {
	for _, f := range c.files {
		f.Close()
	}
}

// mergeKey is where an input record is: its key, status and line.
type mergeKey struct {
	variant  string
	sampleID string
	epoch    int
	isError  bool
	log      int // index in the inputs
	offset   int64
	runID    string // shared with the log's other keys
}

func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// indexLog appends the key of every committed record of the log at path,
// by the rule Open and Records apply. A torn tail is returned as a
// *TornTailError after the records before it.
func indexLog(path string, i int, keys []mergeKey) ([]mergeKey, error) {
	f, err := safeopen.Open(path)
	if err != nil {
		return keys, fmt.Errorf("jsonl: merge: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return keys, fmt.Errorf("jsonl: merge: %w", err)
	} else if !st.Mode().IsRegular() {
		return keys, &NotLogError{Path: path, Err: fmt.Errorf("not a regular file (%v)", st.Mode().Type())}
	}
	committed := 0
	runID := ""
	err = scanLines(path, f, func(l line) error {
		if blank(l.data) && !l.incomplete {
			return nil
		}
		k, err := checkLine(path, l, committed)
		if err != nil {
			return err
		}
		committed++
		if string(k.RunID) != runID {
			if runID != "" {
				return &RunMismatchError{Log: path, RunID: runID, OtherLog: path, OtherRunID: string(k.RunID)}
			}
			runID = string(k.RunID)
		}
		keys = append(keys, mergeKey{variant: string(k.Variant), sampleID: string(k.SampleID), epoch: k.Epoch, isError: k.Status == sink.Error,
			log: i, offset: l.offset, runID: runID})
		return nil
	})
	return keys, err
}

// checkMergeOutput refuses an output that is one of the inputs, or that
// exists without force, or that is not a log.
func checkMergeOutput(out, store string, logs []string, force bool) error {
	st, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Lstat(store); err == nil {
			return fmt.Errorf("jsonl: merge: %s exists without the log %s it belongs to: not replacing it", store, out)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("jsonl: merge: %w", err)
	}
	for _, l := range logs {
		if lst, err := os.Stat(l); err == nil && os.SameFile(st, lst) {
			return fmt.Errorf("jsonl: merge: the output %s is one of the logs merged", out)
		}
	}
	if !force {
		return fmt.Errorf("jsonl: merge: %s already exists (force replaces an earlier merge)", out)
	}
	if !st.Mode().IsRegular() {
		return &NotLogError{Path: out, Err: fmt.Errorf("not a regular file (%v): not replacing it", st.Mode().Type())}
	}
	for _, err := range Records(out) {
		var notLog *NotLogError
		if errors.As(err, &notLog) {
			return fmt.Errorf("jsonl: merge: not replacing %s: %w", out, err)
		}
		break // its first line is a record: a log
	}
	return nil
}

// writeMerged writes the kept records, in order, to a temporary log and
// their transcripts to a temporary transcript store, then renames both into
// place: the store first, so that no link of the log ever dangles.
func writeMerged(out, store string, logs []string, kept []mergeKey, res *Merged) (err error) {
	dir := filepath.Dir(out)
	tmpLog, err := os.CreateTemp(dir, "."+filepath.Base(out)+".merge-*")
	if err != nil {
		return fmt.Errorf("jsonl: merge: %w", err)
	}
	tmpStore, err := os.CreateTemp(dir, "."+filepath.Base(store)+".merge-*")
	if err != nil {
		tmpLog.Close()
		os.Remove(tmpLog.Name())
		return fmt.Errorf("jsonl: merge: %w", err)
	}
	defer func() {
		tmpLog.Close()
		tmpStore.Close()
		if err != nil {
			os.Remove(tmpLog.Name())
			os.Remove(tmpStore.Name())
		}
	}()

	inputs := make([]*os.File, len(logs))
	traceFiles := map[string]*os.File{}
	defer func() {
		for _, f := range inputs {
			if f != nil {
				f.Close()
			}
		}
		for _, f := range traceFiles {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i, path := range logs {
		if inputs[i], err = safeopen.Open(path); err != nil {
			return fmt.Errorf("jsonl: merge: %w", err)
		}
	}

	lw, sw := bufio.NewWriterSize(tmpLog, 1<<20), bufio.NewWriterSize(tmpStore, 1<<20)
	var storeSize int64
	storeName := filepath.Base(store)
	var buf, tbuf, enc []byte
	missing := 0
	var r sink.Record
	for _, k := range kept {
		buf, err = ReadLineFrom(inputs[k.log], k.offset, buf)
		if err != nil {
			return fmt.Errorf("jsonl: merge: %s at offset %d: %w", logs[k.log], k.offset, err)
		}
		r = sink.Record{}
		if err := recordjson.DecodeLine(buf, &r, nil); err != nil { // indexLog accepted it: changed since
			return fmt.Errorf("jsonl: merge: %s at offset %d: the log changed while being merged: %w", logs[k.log], k.offset, err)
		}
		if r.Transcript != "" {
			tbuf, err = readTranscript(logs[k.log], r.Transcript, r.SampleID, r.Epoch, traceFiles, tbuf)
			if err != nil {
				if missing == 0 {
					res.Warnings = append(res.Warnings, fmt.Sprintf("transcript of %s epoch %d in %s: %v", r.SampleID, r.Epoch, logs[k.log], err))
				}
				missing++
				r.Transcript = ""
			} else {
				r.Transcript = TranscriptLink{Path: storeName, Offset: storeSize}.String()
				sw.Write(tbuf)
				sw.WriteByte('\n')
				storeSize += int64(len(tbuf) + 1)
			}
		}
		enc = r.AppendJSON(enc[:0])
		lw.Write(enc)
		if err := lw.WriteByte('\n'); err != nil {
			return fmt.Errorf("jsonl: merge: %w", err)
		}
	}
	if missing > 1 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d transcripts could not be read in all: their records are kept without a transcript link", missing))
	}
	for _, step := range []func() error{
		sw.Flush, lw.Flush,
		func() error { return tmpStore.Chmod(0o644) }, func() error { return tmpLog.Chmod(0o644) },
		tmpStore.Sync, tmpLog.Sync,
		func() error { return os.Rename(tmpStore.Name(), store) },
		func() error { return os.Rename(tmpLog.Name(), out) },
	} {
		if err = step(); err != nil {
			return fmt.Errorf("jsonl: merge: writing %s: %w", out, err)
		}
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// readTranscript reads the transcript a record's transcript link points to.
// files caches the transcript stores opened (nil for one that failed to).
func readTranscript(log, link, sampleID string, epoch int, files map[string]*os.File, buf []byte) ([]byte, error) {
	path, off, err := ResolveTranscript(log, link)
	if err != nil {
		return buf, err
	}
	f, ok := files[path]
	if !ok {
		// Only a store beside the log is copied: a planted link to
		// another file would copy it into the output.
		var real string
		real, err = transcript.Confine(log, path)
		if err == nil {
			f, err = safeopen.Open(real)
		}
		if err != nil {
			files[path] = nil
			return buf, err
		}
		files[path] = f
	}
	if f == nil {
		return buf, fmt.Errorf("%s cannot be read", path)
	}
	buf, err = ReadLineFrom(f, off, buf)
	if err == nil {
		err = transcript.Check(buf, sampleID, epoch)
	}
	return buf, err
}
