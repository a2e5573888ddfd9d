package eval

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// transcriptLink is a record's trace field: the transcript store's file name and the
// transcript's byte offset in it, "NAME#OFFSET". The name is relative to
// the log's directory (the store lives beside the log), so that moving a
// runs directory keeps every link working. Resolving it is one seek.
func transcriptLink(path string, offset int64) string {
	return filepath.Base(path) + "#" + strconv.FormatInt(offset, 10)
}

// ReadTranscript resolves a record's transcript link to the transcript. A relative
// path in the link is taken relative to dir (the log's directory).
func ReadTranscript(link, dir string) (*harness.Transcript, error) {
	i := strings.LastIndexByte(link, '#')
	if i < 0 {
		return nil, fmt.Errorf("eval: %q is not a transcript link (PATH#OFFSET)", link)
	}
	path := link[:i]
	off, err := strconv.ParseInt(link[i+1:], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("eval: %q is not a transcript link (PATH#OFFSET)", link)
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	line, err := jsonl.ReadLineAt(path, off)
	if err != nil {
		return nil, err
	}
	var t harness.Transcript
	if err := json.Unmarshal(line, &t); err != nil {
		return nil, fmt.Errorf("eval: trace at %s: %w", link, err)
	}
	return &t, nil
}
