package jsonl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/proctor-evals/proctor/sink"
)

// OpenOptions tune Open. The zero value (or nil) keeps error records,
// collects Recovery.Done and uses the default writer Options.
type OpenOptions struct {
	Options
	// DropErrors removes records whose status is error (the file is
	// rewritten atomically) so that a resumed run retries those episodes
	// and the log still holds each episode once.
	DropErrors bool
	// Visit, when set, receives the key of every kept record instead of
	// Recovery.Done being filled: a caller with its own index of episodes
	// (the engine's bitset over the dataset) saves a map of every key.
	// sampleID is valid only during the call.
	Visit func(sampleID []byte, epoch int)
}

// Recovery is what Open found in an existing log.
type Recovery struct {
	RunID   string                // the run the log belongs to; "" for an empty log
	Records int                   // committed records kept
	Done    map[sink.Key]struct{} // episodes with a final record (any status but error); nil with OpenOptions.Visit
	Dropped int                   // error records removed so that their episodes run again
	Torn    *TornTailError        // the torn tail that was cut off, if any
}

// Open recovers the log at path and opens it for appending, creating it if
// missing. A torn tail is cut off and reported in Recovery.Torn. With
// DropErrors, error records are removed (see OpenOptions). A log holding
// more than one run, a corrupt line with records after it, or a record of
// another schema is an error: nothing is cut or rewritten then.
//
// Open reads only each line's key fields, not its outputs, so that resuming
// a log of a million records starts new work in well under a second.
func Open(path string, opts *OpenOptions) (*Writer, *Recovery, error) {
	if opts == nil {
		opts = &OpenOptions{}
	}
	visit := opts.Visit
	rec := &Recovery{}
	if visit == nil {
		rec.Done = map[sink.Key]struct{}{}
		visit = func(id []byte, epoch int) { rec.Done[sink.Key{SampleID: string(id), Epoch: epoch}] = struct{}{} }
	}
	err := scanIndex(path, rec, visit)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	if rec.Torn != nil {
		if err := os.Truncate(path, rec.Torn.Offset); err != nil {
			return nil, nil, fmt.Errorf("jsonl: cutting torn tail: %w", err)
		}
	}
	if opts.DropErrors && rec.Dropped > 0 {
		if err := dropErrorRecords(path); err != nil {
			return nil, nil, err
		}
	} else {
		rec.Records += rec.Dropped
		rec.Dropped = 0
	}
	w, err := Append(path, &opts.Options)
	if err != nil {
		return nil, nil, err
	}
	return w, rec, nil
}

// scanIndex reads the key fields of every line.
func scanIndex(path string, rec *Recovery, visit func([]byte, int)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = scanLines(path, f, func(l line) error {
		if len(bytes.TrimSpace(l.data)) == 0 {
			return nil
		}
		k, err := parseKey(l.data)
		if err == nil && l.last && !json.Valid(l.data) {
			err = errors.New("invalid JSON")
		}
		if err != nil {
			if l.last {
				return &TornTailError{Path: path, Line: l.num, Offset: l.offset}
			}
			return &CorruptError{Path: path, Line: l.num, Err: err}
		}
		if k.schema != sink.SchemaVersion {
			return &SchemaError{Path: path, Line: l.num, Schema: k.schema}
		}
		if rec.RunID == "" {
			rec.RunID = string(k.runID)
		} else if string(k.runID) != rec.RunID {
			return fmt.Errorf("jsonl: %s:%d: record of run %q in the log of run %q: one log holds one run", path, l.num, k.runID, rec.RunID)
		}
		if k.status == sink.Error {
			rec.Dropped++
			return nil
		}
		rec.Records++
		visit(k.sampleID, k.epoch)
		return nil
	})
	var torn *TornTailError
	if errors.As(err, &torn) {
		if st, serr := f.Stat(); serr == nil {
			torn.Bytes = st.Size() - torn.Offset
		}
		rec.Torn = torn
		return nil
	}
	return err
}

// dropErrorRecords rewrites the log without its error records: a new file
// beside it, fsynced, renamed over it, and the directory fsynced.
func dropErrorRecords(path string) error {
	tmp := path + ".rewrite"
	w, err := Create(tmp, nil)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		w.Close(context.Background())
		return fmt.Errorf("jsonl: %w", err)
	}
	err = scanLines(path, f, func(l line) error {
		k, err := parseKey(l.data)
		if err == nil && k.status == sink.Error {
			return nil
		}
		_, err = w.WriteLine(l.data)
		return err
	})
	f.Close()
	if cerr := w.Close(context.Background()); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("jsonl: dropping error records: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

type lineKey struct {
	schema   int
	runID    []byte // aliases the line
	sampleID []byte // aliases the line
	epoch    int
	status   sink.Status
}

// parseKey reads the key fields of a record line. Lines written by
// Record.AppendJSON start with them in a fixed order, which is read without
// a JSON decoder; any other valid record line takes the slow path.
func parseKey(b []byte) (lineKey, error) {
	if k, ok := parseKeyFast(b); ok {
		return k, nil
	}
	var r struct {
		Schema   int         `json:"schema"`
		RunID    string      `json:"run_id"`
		SampleID string      `json:"sample_id"`
		Epoch    int         `json:"epoch"`
		Status   sink.Status `json:"status"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return lineKey{}, err
	}
	if r.SampleID == "" {
		return lineKey{}, errors.New(`record without "sample_id"`)
	}
	return lineKey{r.Schema, []byte(r.RunID), []byte(r.SampleID), r.Epoch, r.Status}, nil
}

func parseKeyFast(b []byte) (k lineKey, ok bool) {
	if len(b) < 2 || b[len(b)-1] != '}' {
		return k, false
	}
	p := fieldParser{b: b, ok: true}
	k.schema = p.int(`{"schema":`)
	k.runID = p.str(`,"run_id":`)
	p.str(`,"eval":`)
	k.sampleID = p.str(`,"sample_id":`)
	k.epoch = p.int(`,"epoch":`)
	p.int(`,"attempt":`)
	k.status = statusOf(p.str(`,"status":`))
	return k, p.ok && len(k.sampleID) > 0
}

type fieldParser struct {
	b  []byte
	ok bool
	i  int
}

func (p *fieldParser) prefix(name string) bool {
	if !p.ok || !bytes.HasPrefix(p.b[p.i:], []byte(name)) {
		p.ok = false
		return false
	}
	p.i += len(name)
	return true
}

func (p *fieldParser) int(name string) int {
	if !p.prefix(name) {
		return 0
	}
	j := p.i
	for j < len(p.b) && (p.b[j] == '-' || p.b[j] >= '0' && p.b[j] <= '9') {
		j++
	}
	n, err := strconv.Atoi(string(p.b[p.i:j]))
	if err != nil {
		p.ok = false
	}
	p.i = j
	return n
}

// str reads a JSON string without escapes; one with escapes sends the line
// to the slow path. The result aliases the line.
func (p *fieldParser) str(name string) []byte {
	if !p.prefix(name) || p.i >= len(p.b) || p.b[p.i] != '"' {
		p.ok = false
		return nil
	}
	rest := p.b[p.i+1:]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		p.ok = false
		return nil
	}
	p.i += j + 2
	return rest[:j]
}

// statusOf maps a status to its constant without allocating.
func statusOf(b []byte) sink.Status {
	for _, s := range [...]sink.Status{sink.Pass, sink.Fail, sink.Error, sink.Unscored} {
		if string(b) == string(s) {
			return s
		}
	}
	return sink.Status(b)
}
