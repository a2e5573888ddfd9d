package jsonl

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// TranscriptLink is a record's transcript field: the transcript store (a
// JSONL file beside the log) and the byte offset of the transcript's line
// in it, written PATH#OFFSET. The engine writes the store's base name, so
// that a runs directory can move; merge and export write absolute paths.
type TranscriptLink struct {
	Path   string // relative to the log's directory, or absolute
	Offset int64
}

// String returns the link as a record holds it: PATH#OFFSET.
func (l TranscriptLink) String() string {
	return l.Path + "#" + strconv.FormatInt(l.Offset, 10)
}

// ParseTranscriptLink parses PATH#OFFSET: PATH not empty (a "file://"
// prefix is dropped, slashes are the system's separators), OFFSET a
// decimal byte offset, not negative. The last '#' splits, so a path may
// hold one.
func ParseTranscriptLink(s string) (TranscriptLink, error) {
	i := strings.LastIndexByte(s, '#')
	if i < 0 {
		return TranscriptLink{}, fmt.Errorf("jsonl: %q is not a transcript link (PATH#OFFSET)", s)
	}
	path := strings.TrimPrefix(s[:i], "file://")
	off, err := strconv.ParseInt(s[i+1:], 10, 64)
	if path == "" || err != nil || off < 0 {
		return TranscriptLink{}, fmt.Errorf("jsonl: %q is not a transcript link (PATH#OFFSET)", s)
	}
	return TranscriptLink{filepath.FromSlash(path), off}, nil
}

// In returns l with a relative path taken relative to dir.
func (l TranscriptLink) In(dir string) TranscriptLink {
	if !filepath.IsAbs(l.Path) {
		l.Path = filepath.Join(dir, l.Path)
	}
	return l
}

// ResolveTranscript resolves a record's transcript link read from the log
// at logPath to the file and byte offset of the transcript (which
// ReadLineAt reads): a relative path is relative to the log's directory,
// so that a runs directory can move; an absolute one, as older logs hold,
// is taken as it is.
func ResolveTranscript(logPath, link string) (path string, offset int64, err error) {
	if link == CompactedLink {
		return "", 0, ErrCompacted
	}
	l, err := ParseTranscriptLink(link)
	if err != nil {
		return "", 0, err
	}
	l = l.In(filepath.Dir(logPath))
	return l.Path, l.Offset, nil
}

// ReadTranscript reads the transcript a record's link names, a relative
// path taken relative to dir (the log's directory), and decodes its JSON
// line into v (a *harness.Transcript).
func ReadTranscript(link, dir string, v any) error {
	l, err := ParseTranscriptLink(link)
	if err != nil {
		return err
	}
	l = l.In(dir)
	line, err := ReadLineAt(l.Path, l.Offset)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("jsonl: transcript at %s: %w", l, err)
	}
	return nil
}
