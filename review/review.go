// Package review is human review of a run's episodes: a queue of episodes
// picked at random for people to grade, with known inclusion
// probabilities; the reviews, append-only records in a file beside the
// log; and the numbers that use them: the judge's agreement with people,
// and a prediction-powered pass rate whose interval stays valid when the
// judge is biased (see [stats.PPIMean]).
//
// In a log of variants an episode is its variant's, sample's and epoch's
// ([Key]), as in the run: each variant is a stratum of the queue ([Design])
// and has its own numbers ([Summary].Variants); none is pooled.
//
// # Files
//
// Beside the log LOG:
//
//   - LOG.queue.json: the queue [Pick] drew, with its design and each
//     pick's inclusion probability. Picking again replaces it (with the
//     same seed, a larger count picks a superset: see [Design]).
//   - LOG.reviews.jsonl: the reviews, one JSON object a line, appended by
//     one [Writer] at a time (the log's lock) and never rewritten. Several
//     reviewers may grade an episode; each reviewer's last review of it
//     counts ([Final]). A torn tail, what a crash in the middle of a write
//     leaves, is cut when the file is next opened for writing, as the log's
//     is.
package review

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/proctor-evals/proctor/internal/filelock"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/internal/sidecar"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// Version is the version of a review's serialized form, its "review"
// field.
const Version = 1

// Key is an episode of a run: a variant (empty in a run of one harness),
// a sample and an epoch, as sink.Key is.
type Key struct {
	Variant  string
	SampleID string
	Epoch    int
}

func (k Key) String() string {
	if k.Variant != "" {
		return fmt.Sprintf("[%s] %s/%d", k.Variant, k.SampleID, k.Epoch)
	}
	return fmt.Sprintf("%s/%d", k.SampleID, k.Epoch)
}

// compareKeys orders keys by sample, epoch, then variant: a sample's
// variants side by side.
func compareKeys(a, b Key) int {
	return cmp.Or(strings.Compare(a.SampleID, b.SampleID), cmp.Compare(a.Epoch, b.Epoch), strings.Compare(a.Variant, b.Variant))
}

// Review is one person's grade of one episode.
type Review struct {
	// Variant is the episode's variant in a run of variants (see
	// docs/comparing-agents.md); empty otherwise, and in reviews written
	// before it was recorded.
	Variant  string
	SampleID string
	Epoch    int
	Reviewer string
	Time     time.Time
	Pass     bool
	Score    *float64 // optional, in [0, 1]
	Note     string   // optional
	// SawVerdict says whether the reviewer had seen the judge's verdict
	// before grading: a blind review is the unbiased kind.
	SawVerdict bool
	// RunID is the run whose episode was graded: reviews of another run
	// left at the same log path do not count ([Load]). Empty in reviews
	// written before it was recorded, which count.
	RunID string
}

// Key returns the episode the review grades.
func (r *Review) Key() Key { return Key{r.Variant, r.SampleID, r.Epoch} }

// reviewJSON is a review's line: "review" (the version) first, so that
// every line starts the same way and a torn tail can be told from garbage.
type reviewJSON struct {
	Review     int       `json:"review"`
	Variant    string    `json:"variant,omitempty"`
	SampleID   string    `json:"sample_id"`
	Epoch      int       `json:"epoch"`
	Reviewer   string    `json:"reviewer"`
	Time       time.Time `json:"time"`
	Pass       bool      `json:"pass"`
	Score      *float64  `json:"score,omitempty"`
	Note       string    `json:"note,omitempty"`
	SawVerdict bool      `json:"saw_verdict"`
	RunID      string    `json:"run_id,omitempty"`
}

const lineStart = `{"review":`

// MarshalJSON writes the review as one line of a review file.
func (r Review) MarshalJSON() ([]byte, error) {
	return json.Marshal(reviewJSON{Version, r.Variant, r.SampleID, r.Epoch, r.Reviewer, r.Time.UTC(), r.Pass, r.Score, r.Note, r.SawVerdict, r.RunID})
}

// UnmarshalJSON reads a review and checks it (see [Review.Validate]).
func (r *Review) UnmarshalJSON(b []byte) error {
	var j reviewJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.Review != Version {
		return fmt.Errorf("review version %d, this version of proctor reads %d", j.Review, Version)
	}
	*r = Review{j.Variant, j.SampleID, j.Epoch, j.Reviewer, j.Time, j.Pass, j.Score, j.Note, j.SawVerdict, j.RunID}
	return r.Validate()
}

// Validate reports what makes a review unusable: no sample, a negative
// epoch, no reviewer, no time, a score outside [0, 1].
func (r *Review) Validate() error {
	switch {
	case r.SampleID == "":
		return errors.New("no sample_id")
	case r.Epoch < 0:
		return fmt.Errorf("epoch %d < 0", r.Epoch)
	case strings.TrimSpace(r.Reviewer) == "":
		return errors.New("no reviewer")
	case r.Time.IsZero():
		return errors.New("no time")
	case r.Score != nil && !(*r.Score >= 0 && *r.Score <= 1):
		return fmt.Errorf("score %v outside [0, 1]", *r.Score)
	}
	return nil
}

// FilePath returns the review file of the log at log.
func FilePath(log string) string { return sidecar.Reviews(log) }

// LineError reports a line of a file that is not a review (or, in an
// imported file, not a row): its file and line.
type LineError struct {
	Path string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("review: %s:%d: %v", e.Path, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Read returns the committed reviews of the review file at path, in the
// order they were written; a missing file holds none. An incomplete last
// line (a review being written, or a torn tail) is not a review: it is
// skipped and returned as torn. Any other line that is not a review is a
// *LineError. What is not a regular file (a FIFO, say) is refused without
// waiting, as a log is (safeopen.ErrNotRegular).
func Read(path string) (reviews []Review, torn *jsonl.TornTailError, err error) {
	f, err := safeopen.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("review: %w", err)
	}
	defer f.Close()
	torn, err = scan(path, f, func(r Review) { reviews = append(reviews, r) })
	return reviews, torn, err
}

// scan reads the review file f, named path, line by line. A torn tail is
// the last line when it has no newline and starts as a review line (or a
// prefix of one), or when it is complete, does not parse, and starts as a
// review line does: what a killed writer leaves.
func scan(path string, f io.Reader, visit func(Review)) (*jsonl.TornTailError, error) {
	r := bufio.NewReaderSize(f, 64<<10)
	var off int64
	for num := 1; ; num++ {
		b, err := r.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("review: read %s: %w", path, err)
		}
		if len(b) == 0 {
			return nil, nil
		}
		complete := b[len(b)-1] == '\n'
		line := bytes.TrimSpace(b)
		torn := &jsonl.TornTailError{Path: path, Line: num, Offset: off, Bytes: int64(len(b))}
		if !complete {
			if startsAsReview(line) {
				return torn, nil
			}
			return nil, &LineError{path, num, errors.New("incomplete line that is not a review")}
		}
		off += int64(len(b))
		if len(line) == 0 {
			continue
		}
		var rv Review
		if err := json.Unmarshal(line, &rv); err != nil {
			if _, perr := r.Peek(1); perr == io.EOF && startsAsReview(line) && !json.Valid(line) {
				return torn, nil
			}
			return nil, &LineError{path, num, err}
		}
		visit(rv)
	}
}

func startsAsReview(b []byte) bool {
	if len(b) < len(lineStart) {
		return len(b) > 0 && lineStart[:len(b)] == string(b)
	}
	return string(b[:len(lineStart)]) == lineStart
}

// Writer appends reviews to a review file. It holds the file's lock (the
// log's kind: one writer at a time, dropped by the kernel if the process
// dies), so a second Writer of the same file fails at once with a
// *jsonl.LockedError. Its methods may be called concurrently.
type Writer struct {
	mu   sync.Mutex
	path string
	f    *os.File
	lock *os.File
	size int64 // the end of the last whole line
	err  error // a failed write that could not be cut back: every Append fails
}

// Open opens the review file at path for appending, creating it if
// missing. A torn tail is cut off and returned; any other line that is not
// a review fails Open with a *LineError, and nothing is cut.
func Open(path string) (*Writer, *jsonl.TornTailError, error) {
	lk, err := filelock.Lock(path)
	if err != nil {
		return nil, nil, fmt.Errorf("review: %w", err)
	}
	w, torn, err := open(path, lk)
	if err != nil {
		filelock.Unlock(path, lk)
		return nil, nil, err
	}
	return w, torn, nil
}

func open(path string, lk *os.File) (*Writer, *jsonl.TornTailError, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("review: %w", err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = &fs.PathError{Op: "open", Path: path, Err: safeopen.ErrNotRegular}
		}
		return nil, nil, fmt.Errorf("review: %w", err)
	}
	torn, err := scan(path, f, func(Review) {})
	if err == nil && torn != nil {
		err = f.Truncate(torn.Offset)
	}
	var size int64
	if err == nil {
		size, err = f.Seek(0, io.SeekEnd)
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("review: opening %s: %w", path, err)
	}
	return &Writer{path: path, f: f, lock: lk, size: size}, torn, nil
}

// Append validates the reviews and writes them, one line each, in one
// write, then syncs the file: when Append returns nil they are durable.
// A write that fails (a full disk) is cut back to the last whole line, as
// the log's is, so that later reviews are not glued to half of one; when
// it cannot be, every later Append fails.
func (w *Writer) Append(reviews ...Review) error {
	var buf []byte
	for i := range reviews {
		if err := reviews[i].Validate(); err != nil {
			return fmt.Errorf("review: review of %s by %q: %w", reviews[i].Key(), reviews[i].Reviewer, err)
		}
		b, err := json.Marshal(reviews[i])
		if err != nil {
			return fmt.Errorf("review: %w", err)
		}
		buf = append(append(buf, b...), '\n')
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return errors.New("review: append to a closed Writer")
	}
	if w.err != nil {
		return w.err
	}
	if _, err := w.f.Write(buf); err != nil {
		if cerr := w.cutBack(); cerr != nil {
			w.err = fmt.Errorf("review: %s: a write failed (%v) and could not be cut back: %w", w.path, err, cerr)
		}
		return fmt.Errorf("review: %w", err)
	}
	w.size += int64(len(buf))
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("review: %w", err)
	}
	return nil
}

// cutBack removes what a failed write left past the last whole line.
func (w *Writer) cutBack() error {
	if err := w.f.Truncate(w.size); err != nil {
		return err
	}
	_, err := w.f.Seek(w.size, io.SeekStart)
	return err
}

// Path returns the file the Writer appends to.
func (w *Writer) Path() string { return w.path }

// Close closes the file and drops its lock.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if uerr := filelock.Unlock(w.path, w.lock); err == nil {
		err = uerr
	}
	return err
}

// Final returns the reviews that count: each reviewer's last review of
// each episode (a later review replaces an earlier one in the numbers,
// never in the file), ordered by episode, then reviewer.
func Final(reviews []Review) []Review {
	type who struct {
		Key
		reviewer string
	}
	last := map[who]int{}
	for i := range reviews {
		last[who{reviews[i].Key(), reviews[i].Reviewer}] = i
	}
	out := make([]Review, 0, len(last))
	for _, i := range last {
		out = append(out, reviews[i])
	}
	slices.SortFunc(out, func(a, b Review) int {
		return cmp.Or(compareKeys(a.Key(), b.Key()), strings.Compare(a.Reviewer, b.Reviewer))
	})
	return out
}

// Grade is the people's grade of an episode: the share of its reviewers
// (by their last word) who passed it.
func Grade(final []Review) map[Key]float64 {
	pass, n := map[Key]float64{}, map[Key]int{}
	for _, r := range final {
		n[r.Key()]++
		if r.Pass {
			pass[r.Key()]++
		}
	}
	grade := make(map[Key]float64, len(n))
	for k, c := range n {
		grade[k] = pass[k] / float64(c)
	}
	return grade
}
