package jsonl

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// ResolveTranscript resolves a record's transcript link, "PATH#OFFSET", read from the
// log at logPath, to the file and byte offset of the transcript (which
// ReadLineAt reads). A relative PATH is relative to the log's directory,
// so that a runs directory can move; an absolute one, as older logs hold,
// is taken as it is. A "file://" prefix is accepted.
func ResolveTranscript(logPath, link string) (path string, offset int64, err error) {
	i := strings.LastIndexByte(link, '#')
	if i <= 0 {
		return "", 0, fmt.Errorf("jsonl: transcript link %q is not PATH#OFFSET", link)
	}
	offset, err = strconv.ParseInt(link[i+1:], 10, 64)
	if err != nil || offset < 0 {
		return "", 0, fmt.Errorf("jsonl: transcript link %q is not PATH#OFFSET", link)
	}
	path = strings.TrimPrefix(link[:i], "file://")
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(logPath), filepath.FromSlash(path))
	}
	return path, offset, nil
}
