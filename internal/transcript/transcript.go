// Package transcript holds the two checks every reader of a record's
// transcript link makes: the store it names lies beside the log (a log
// may be hostile, and its links must not read or copy the rest of the
// disk), and the transcript found there is the record's episode's (a
// trace store deleted or cut, then appended to, holds other episodes at
// the offsets older records name).
package transcript

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrOutside is the error for a link to a file outside the log's
// directory.
var ErrOutside = errors.New("the transcript is outside the log's directory")

// ErrOtherEpisode is the error for a link to another episode's transcript
// (or to what is not a transcript).
var ErrOtherEpisode = errors.New("the transcript at the link is not this record's")

// Confine returns the real path of path, the trace store a record of the
// log at logPath links to, when it lies in the log's directory or below,
// symbolic links resolved; otherwise an error that wraps ErrOutside.
func Confine(logPath, path string) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(logPath))
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	// A relative log with an absolute link (or the other way round) is
	// compared as absolute paths: Rel cannot relate the two.
	if dir, err = filepath.Abs(dir); err != nil {
		return "", err
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(dir, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%w: %s", ErrOutside, path)
	}
	return real, nil
}

// Check returns an error wrapping ErrOtherEpisode unless line, a line of
// a trace store, is the transcript of the episode (sampleID, epoch).
func Check(line []byte, sampleID string, epoch int) error {
	var h struct {
		SampleID *string `json:"sample_id"`
		Epoch    *int    `json:"epoch"`
	}
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &h) != nil || h.SampleID == nil || h.Epoch == nil {
		return fmt.Errorf("%w: not a transcript", ErrOtherEpisode)
	}
	if *h.SampleID != sampleID || *h.Epoch != epoch {
		return fmt.Errorf("%w: it is %q epoch %d's, not %q epoch %d's", ErrOtherEpisode, *h.SampleID, *h.Epoch, sampleID, epoch)
	}
	return nil
}
