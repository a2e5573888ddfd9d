package eval

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// transcriptLink is a record's transcript field: the transcript store's
// file name, relative to the log's directory (the store lives beside the
// log), so that moving a runs directory keeps every link working, and the
// transcript's byte offset in it. Resolving it is one seek.
func transcriptLink(path string, offset int64) string {
	return jsonl.TranscriptLink{Path: filepath.Base(path), Offset: offset}.String()
}

// ReadTranscript resolves a record's transcript link to the transcript. A
// relative path in the link is taken relative to dir (the log's directory).
func ReadTranscript(link, dir string) (*harness.Transcript, error) {
	l, err := jsonl.ParseTranscriptLink(link)
	if err != nil {
		return nil, err
	}
	l = l.In(dir)
	line, err := jsonl.ReadLineAt(l.Path, l.Offset)
	if err != nil {
		return nil, err
	}
	var t harness.Transcript
	if err := json.Unmarshal(line, &t); err != nil {
		return nil, fmt.Errorf("eval: transcript at %s: %w", l, err)
	}
	return &t, nil
}
