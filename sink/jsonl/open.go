package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/proctor-evals/proctor/sink"
)

// Recovery is what Open found in an existing log.
type Recovery struct {
	RunID   string                // the run the log belongs to; "" for an empty log
	Records int                   // committed records kept
	Done    map[sink.Key]struct{} // episodes with a final record (any status but error)
	Dropped int                   // error records removed so that their episodes run again
	Torn    *TornTailError        // the torn tail that was cut off, if any
}

// Open recovers the log at path and opens it for appending, creating it if
// missing. A torn tail is cut off and reported in Recovery.Torn. With
// dropErrors, records whose status is error are removed (the file is
// rewritten atomically) so that a resumed run retries those episodes and the
// log still holds each episode once. A log holding more than one run, a
// corrupt line with records after it, or a record of another schema is an
// error: nothing is cut or rewritten then.
//
// Open reads only each line's key fields, not its outputs, so that resuming
// a log of a million records starts new work in well under a second.
func Open(path string, dropErrors bool, opts *Options) (*Writer, *Recovery, error) {
	rec, err := scanIndex(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	if rec.Torn != nil {
		if err := os.Truncate(path, rec.Torn.Offset); err != nil {
			return nil, nil, fmt.Errorf("jsonl: cutting torn tail: %w", err)
		}
	}
	if dropErrors && rec.Dropped > 0 {
		if err := dropErrorRecords(path); err != nil {
			return nil, nil, err
		}
	} else {
		rec.Records += rec.Dropped
		rec.Dropped = 0
	}
	w, err := Append(path, opts)
	if err != nil {
		return nil, nil, err
	}
	return w, rec, nil
}

// scanIndex reads the key fields of every line.
func scanIndex(path string) (*Recovery, error) {
	rec := &Recovery{Done: map[sink.Key]struct{}{}}
	f, err := os.Open(path)
	if err != nil {
		return rec, err
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
			rec.RunID = k.runID
		} else if k.runID != rec.RunID {
			return fmt.Errorf("jsonl: %s:%d: record of run %q in the log of run %q: one log holds one run", path, l.num, k.runID, rec.RunID)
		}
		if k.status == sink.Error {
			rec.Dropped++
			return nil
		}
		rec.Records++
		rec.Done[sink.Key{SampleID: k.sampleID, Epoch: k.epoch}] = struct{}{}
		return nil
	})
	var torn *TornTailError
	if errors.As(err, &torn) {
		if st, serr := f.Stat(); serr == nil {
			torn.Bytes = st.Size() - torn.Offset
		}
		rec.Torn = torn
		return rec, nil
	}
	return rec, err
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
		w.Close(nil)
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
	if cerr := w.Close(nil); err == nil {
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
	runID    string
	sampleID string
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
	return lineKey{r.Schema, r.RunID, r.SampleID, r.Epoch, r.Status}, nil
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
	k.status = sink.Status(p.str(`,"status":`))
	return k, p.ok && k.sampleID != ""
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
// to the slow path.
func (p *fieldParser) str(name string) string {
	if !p.prefix(name) || p.i >= len(p.b) || p.b[p.i] != '"' {
		p.ok = false
		return ""
	}
	rest := p.b[p.i+1:]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		p.ok = false
		return ""
	}
	p.i += j + 2
	return string(rest[:j])
}
