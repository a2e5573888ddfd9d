package eval

import (
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
	var t harness.Transcript
	if err := jsonl.ReadTranscript(link, dir, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
