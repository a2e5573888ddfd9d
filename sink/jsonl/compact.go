package jsonl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/internal/sidecar"
	"github.com/proctor-evals/proctor/sink"
)

// CompactedLink is the trace link of a record whose transcript Compact
// dropped: the record stays, and says so.
const CompactedLink = "compacted"

// ErrCompacted is what ResolveTranscript returns for CompactedLink.
var ErrCompacted = errors.New("jsonl: the transcript was compacted (proctor compact dropped it; the record is kept)")

// Compacted is what Compact did to a log.
type Compacted struct {
	Records int // records in the log
	Kept    int // transcripts kept
	Dropped int // transcripts dropped now (links set to CompactedLink)
	// Freed is the bytes of transcript stores removed, less the new
	// store's.
	Freed int64
	// Store is the new transcript store, empty when no transcript is kept.
	Store string
}

// Compact drops the transcripts of the log at path whose record keep
// rejects (nil keeps none): the records stay, their links to a dropped
// transcript become CompactedLink, and the transcripts kept move to a new
// store, path's name with ".traces.cN.jsonl" (N one more than the last).
// The model gateway's call store of the log (sidecar.Calls) is removed.
//
// It holds the log's lock, so it never runs on a log being written (a
// *LockedError), and it refuses a log with a torn tail or a corrupt line.
// It is atomic: the new store is written and renamed into place first (no
// record links to it yet), then the log is rewritten to a temporary file
// and renamed over the old one, which is the commit; only then are the
// old stores removed. A crash (even kill -9) at any moment leaves the old
// log with its old stores, or the new log with its new store; stores a
// crash leaves unlinked (and stores of the log that no record links to)
// are removed by the next Compact. A store that another log in the
// directory links to (a copy of this one) is kept.
func Compact(path string, keep func(*sink.Record) bool) (res *Compacted, err error) {
	lk, err := lock(path)
	if err != nil {
		return nil, err
	}
	defer unlock(path, lk)
	defer func() {
		if err != nil {
			err = fmt.Errorf("jsonl: compact %s: %w", path, err)
		}
	}()
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	stores, next, err := ownStores(dir, base)
	if err != nil {
		return nil, err
	}
	// A store another log beside this one links to (a copy of it, say)
	// is not this log's to remove.
	for p := range linkedByOthers(dir, path, stores) {
		delete(stores, p)
	}
	c := &compaction{path: path, dir: dir, storeName: sidecar.CompactedTranscripts(path, next), files: map[string]*os.File{}}
	res = &Compacted{Freed: removeTemporaries(dir, base, filepath.Base(path))}
	defer c.close()
	if err := c.createTemporaries(); err != nil {
		return nil, err
	}
	if err := c.rewrite(keep, res); err != nil {
		return nil, err
	}
	if res.Dropped == 0 {
		// Nothing to drop: the log stays as it is. Only stores of the log
		// that no record links to (left by a crash between the two renames,
		// say) go.
		res.Freed += removeUnlinked(stores, c.files) + removeCallStore(path)
		return res, nil
	}
	if err := c.commit(fi.Mode().Perm(), res); err != nil {
		return nil, err
	}
	// Committed: the log's old stores are unlinked now (only its own, in
	// its directory: a link elsewhere is not ours to remove).
	res.Freed += removeStores(stores, res.Store) + removeCallStore(path)
	res.Freed -= c.storeSize
	return res, nil
}

// removeCallStore removes the model gateway's call store of the log at
// path, and its lock, and returns the bytes freed: it serves only to
// resume the run (and as a development cache), and a run being compacted
// is over (Compact holds the log's lock, which every run holds while it
// may write the store). Only a regular file is removed.
func removeCallStore(path string) int64 {
	var freed int64
	for _, p := range []string{sidecar.Calls(path), sidecar.Lock(sidecar.Calls(path))} {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && os.Remove(p) == nil {
			freed += fi.Size()
		}
	}
	return freed
}

// compaction is one Compact's work in progress: the new store and the
// rewritten log, both temporary files until commit renames them.
type compaction struct {
	path, dir string
	storeName string              // the new store's name, in dir
	files     map[string]*os.File // the old stores read, by path
	tmpStore  *os.File
	store     *bufio.Writer
	storeSize int64
	// The log is rewritten in one pass; the new store must be in place
	// before it, so the log's new lines are kept in a temporary file that
	// is renamed once the store is.
	tmpLog    *os.File
	log       *bufio.Writer
	committed bool // tmpLog renamed over the log
}

func (c *compaction) createTemporaries() (err error) {
	if c.tmpStore, err = os.CreateTemp(c.dir, "."+c.storeName+".*.tmp"); err != nil {
		return err
	}
	c.store = bufio.NewWriterSize(c.tmpStore, 1<<20)
	if c.tmpLog, err = os.CreateTemp(c.dir, "."+filepath.Base(c.path)+".compact-*"); err != nil {
		return err
	}
	c.log = bufio.NewWriterSize(c.tmpLog, 1<<20)
	return nil
}

// close closes every file and removes the temporary ones not renamed.
func (c *compaction) close() {
	if c.tmpLog != nil {
		c.tmpLog.Close()
		if !c.committed {
			os.Remove(c.tmpLog.Name())
		}
	}
	for _, f := range c.files {
		if f != nil {
			f.Close()
		}
	}
	if c.tmpStore != nil {
		c.tmpStore.Close()
		os.Remove(c.tmpStore.Name()) // renamed already when all went well
	}
}

// rewrite writes every record of the log to the temporary log: a kept
// transcript is copied to the new store and linked there, a dropped one's
// link becomes CompactedLink.
func (c *compaction) rewrite(keep func(*sink.Record) bool, res *Compacted) error {
	var tbuf, enc []byte
	for r, err := range Records(c.path) {
		if err != nil {
			var torn *TornTailError
			if errors.As(err, &torn) {
				return fmt.Errorf("%w: resume the run (or cut the tail) before compacting", err)
			}
			return err
		}
		res.Records++
		if r.Transcript != "" && r.Transcript != CompactedLink {
			if keep != nil && keep(&r) {
				if tbuf, err = c.copyTranscript(&r, tbuf); err != nil {
					return err
				}
				res.Kept++
			} else {
				r.Transcript = CompactedLink
				res.Dropped++
			}
		}
		enc = r.AppendJSON(enc[:0])
		c.log.Write(enc)
		c.log.WriteByte('\n')
	}
	return nil
}

// copyTranscript appends r's transcript to the new store and links r to it.
func (c *compaction) copyTranscript(r *sink.Record, buf []byte) ([]byte, error) {
	buf, err := readTranscript(c.path, r.Transcript, r.SampleID, r.Epoch, c.files, buf)
	if err != nil {
		return buf, fmt.Errorf("transcript of %s epoch %d: %w", r.SampleID, r.Epoch, err)
	}
	r.Transcript = c.storeName + "#" + strconv.FormatInt(c.storeSize, 10)
	c.store.Write(buf)
	c.store.WriteByte('\n')
	c.storeSize += int64(len(buf) + 1)
	return buf, nil
}

// commit flushes and syncs the new store and log, then renames the store
// into place (when a transcript is kept) and the log over the old one,
// which is the commit.
func (c *compaction) commit(perm os.FileMode, res *Compacted) error {
	steps := []func() error{c.store.Flush, c.log.Flush,
		func() error { return c.tmpLog.Chmod(perm) }, c.tmpLog.Sync}
	if res.Kept > 0 {
		res.Store = filepath.Join(c.dir, c.storeName)
		steps = append(steps, func() error { return c.tmpStore.Chmod(0o644) }, c.tmpStore.Sync,
			func() error { return os.Rename(c.tmpStore.Name(), res.Store) }, func() error { return syncDir(c.dir) })
	}
	steps = append(steps, func() error {
		err := os.Rename(c.tmpLog.Name(), c.path)
		c.committed = err == nil
		return err
	}, func() error { return syncDir(c.dir) })
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// removeUnlinked removes the stores no record links to (those never
// opened while reading the log), and returns their size.
func removeUnlinked(stores map[string]bool, linked map[string]*os.File) int64 {
	abs := map[string]bool{}
	for p := range linked {
		abs[absPath(p)] = true
	}
	var freed int64
	for p := range stores {
		if !abs[absPath(p)] {
			freed += removeSize(p)
		}
	}
	return freed
}

// removeStores removes every store but except, and returns their size.
func removeStores(stores map[string]bool, except string) int64 {
	var freed int64
	for p := range stores {
		if p != except {
			freed += removeSize(p)
		}
	}
	return freed
}

// removeSize removes the file at p and returns its size, 0 when it could
// not be removed.
func removeSize(p string) int64 {
	if st, err := os.Stat(p); err == nil && os.Remove(p) == nil {
		return st.Size()
	}
	return 0
}

// linkedByOthers returns those of stores (paths in dir) that another log
// in dir links to. A log's links are read once per version of it (size
// and modification time) in a process, so that compacting every log of a
// directory reads each once, not once per log compacted.
func linkedByOthers(dir, self string, stores map[string]bool) map[string]bool {
	logs, _ := filepath.Glob(filepath.Join(escapeGlob(dir), "*.jsonl"))
	shared := map[string]bool{}
	for _, l := range logs {
		if absPath(l) == absPath(self) || isStoreName(filepath.Base(l)) {
			continue
		}
		for p := range storesLinkedBy(l) {
			for s := range stores {
				if absPath(s) == p {
					shared[s] = true
				}
			}
		}
	}
	return shared
}

// isStoreName reports a transcript store's name (NAME.traces.jsonl,
// NAME.traces.cN.jsonl) by its shape.
func isStoreName(name string) bool {
	i := strings.LastIndex(name, ".traces")
	if i < 0 {
		return false
	}
	_, ok := storeNumber(name[:i], name)
	return ok
}

type linkedStores struct {
	size   int64
	mod    time.Time
	stores map[string]bool // absolute paths
}

var linkCache sync.Map // absolute log path → *linkedStores

// storesLinkedBy returns the absolute paths of the transcript stores the
// records of the log at path link to; none for a file that is not a log.
func storesLinkedBy(path string) map[string]bool {
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	key := absPath(path)
	if c, ok := linkCache.Load(key); ok {
		if c := c.(*linkedStores); c.size == st.Size() && c.mod.Equal(st.ModTime()) {
			return c.stores
		}
	}
	f, err := safeopen.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	found := map[string]bool{}
	dir := filepath.Dir(path)
	scanLines(path, f, func(l line) error {
		if !bytes.Contains(l.data, []byte(".traces")) {
			return nil
		}
		k, err := recordjson.ScanLine(l.data)
		if err != nil {
			return nil
		}
		if t, err := ParseTranscriptLink(string(k.Transcript)); err == nil {
			found[absPath(t.In(dir).Path)] = true
		}
		return nil
	})
	linkCache.Store(key, &linkedStores{st.Size(), st.ModTime(), found})
	return found
}

// ownStores returns the transcript stores of the log named base (without
// its extension) in dir, base.traces.jsonl and base.traces.cN.jsonl, as a
// set of paths, and the N a new store takes.
func ownStores(dir, base string) (map[string]bool, int, error) {
	matches, err := filepath.Glob(filepath.Join(dir, escapeGlob(base)+".traces*.jsonl"))
	if err != nil {
		return nil, 0, err
	}
	stores, next := map[string]bool{}, 1
	for _, m := range matches {
		if n, ok := storeNumber(base, filepath.Base(m)); ok {
			if st, err := os.Lstat(m); err == nil && st.Mode().IsRegular() {
				stores[m] = true
			}
			next = max(next, n+1)
		}
	}
	return stores, next, nil
}

// storeNumber parses a store's name: 0 for base.traces.jsonl, N for
// base.traces.cN.jsonl.
func storeNumber(base, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, base+".traces")
	if !ok {
		return 0, false
	}
	if rest == ".jsonl" {
		return 0, true
	}
	num, ok := strings.CutSuffix(strings.TrimPrefix(rest, ".c"), ".jsonl")
	n, err := strconv.Atoi(num)
	if !ok || !strings.HasPrefix(rest, ".c") || err != nil || n < 1 || strconv.Itoa(n) != num {
		return 0, false
	}
	return n, true
}

// removeTemporaries removes the temporary files a killed Compact of the
// log left (its new store and log, not yet renamed), and returns their
// size. The caller holds the log's lock: no other Compact of it runs.
func removeTemporaries(dir, base, logName string) int64 {
	var freed int64
	for _, pattern := range []string{"." + escapeGlob(base) + ".traces.c*.jsonl.*.tmp", "." + escapeGlob(logName) + ".compact-*"} {
		matches, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, m := range matches {
			if st, err := os.Lstat(m); err == nil && st.Mode().IsRegular() && os.Remove(m) == nil {
				freed += st.Size()
			}
		}
	}
	return freed
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	d.Sync() // not every file system syncs a directory; the rename stands
	return nil
}
