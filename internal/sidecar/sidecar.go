// Package sidecar names the files proctor keeps beside a log. Every
// writer and reader builds their paths here, from one table (Files), which
// docs/files.md lists and a test holds to it.
//
// A file beside the log LOG, named NAME.EXT (run.jsonl), follows one of two
// rules, kept as they are so that every log already written still reads:
// the run's own files replace the log's extension (run.manifest.json,
// run.traces.jsonl), the files added to a finished log keep it
// (run.jsonl.lock, run.jsonl.reviews.jsonl).
package sidecar

import (
	"path/filepath"
	"strconv"
	"strings"
)

// Rule is how a sidecar's name is made from its log's.
type Rule int

const (
	Stem  Rule = iota // NAME + Suffix: the log's extension replaced
	Whole             // LOG + Suffix: the log's name kept whole
)

// File is one kind of file beside a log.
type File struct {
	What   string // what it holds, as docs/files.md says
	Suffix string // after NAME or LOG; "N" stands for a number
	Rule   Rule
	Writer string // who writes it
}

// Files is every kind of file proctor keeps beside a log, in the order
// docs/files.md lists them.
var Files = []File{
	{"the run's manifest: what the run is, for resume, history and gates", ".manifest.json", Stem, "the engine, when the log is created"},
	{"the transcript store: the episodes' transcripts, one JSON line each", ".traces.jsonl", Stem, "the engine, merge"},
	{"a compacted transcript store (N counts the compactions)", ".traces.cN.jsonl", Stem, "proctor compact"},
	{"the workers' token of a distributed run (0600)", ".token", Stem, "the coordinator"},
	{"the embedded NATS server's store, a directory", ".nats", Stem, "the coordinator"},
	{"the writer's lock: \"pid host\" under an flock", ".lock", Whole, "whoever writes the log: a run, merge, compact"},
	{"the human reviews, one JSON line each", ".reviews.jsonl", Whole, "proctor review import, proctor view -review"},
	{"the review queue", ".queue.json", Whole, "proctor review pick"},
	{"the model gateway's call store: each model call's request digest and response, one JSON line each", ".calls.jsonl", Stem, "the model gateway, during a run"},
	{"the oracle's run: its reference solution once per sample, a log of its own (with its manifest and transcripts beside it)", ".oracle.jsonl", Stem, "the engine, with Config.Oracle (-oracle)"},
}

// Path returns the path of the sidecar f of the log at log. A file whose
// suffix holds N (a compacted store) takes n in its place.
func (f File) Path(log string, n int) string {
	suffix := strings.Replace(f.Suffix, "N", strconv.Itoa(n), 1)
	if f.Rule == Whole {
		return log + suffix
	}
	return stem(log) + suffix
}

func stem(log string) string { return log[:len(log)-len(filepath.Ext(log))] }

// Manifest is the path of the run's manifest.
func Manifest(log string) string { return stem(log) + ".manifest.json" }

// Transcripts is the path of the run's transcript store.
func Transcripts(log string) string { return stem(log) + ".traces.jsonl" }

// CompactedTranscripts is the name (without directory) of the n-th
// compacted transcript store of the log at log.
func CompactedTranscripts(log string, n int) string {
	return filepath.Base(stem(log)) + ".traces.c" + strconv.Itoa(n) + ".jsonl"
}

// Calls is the path of the run's call store (package gateway's Store).
func Calls(log string) string { return stem(log) + ".calls.jsonl" }

// Oracle is the path of the log of the run's oracle pass.
func Oracle(log string) string { return stem(log) + ".oracle.jsonl" }

// Token is the path of a distributed run's workers' token.
func Token(log string) string { return stem(log) + ".token" }

// NATSStore is the directory of a distributed run's embedded server.
func NATSStore(log string) string { return stem(log) + ".nats" }

// Lock is the path of the writer's lock of the file at path (a log, or a
// file beside it).
func Lock(path string) string { return path + ".lock" }

// Reviews is the path of the log's human reviews.
func Reviews(log string) string { return log + ".reviews.jsonl" }

// Queue is the path of the log's review queue.
func Queue(log string) string { return log + ".queue.json" }

// LogOf returns the log the file at path would be a sidecar of, by its
// name alone (a Stem file's log is taken to be NAME.jsonl), and which
// sidecar; ok is false for a name no sidecar has.
func LogOf(path string) (log string, f File, ok bool) {
	for _, f := range Files {
		name, ok := cutSuffix(path, f.Suffix)
		if !ok || name == "" || strings.HasSuffix(name, "/") || strings.HasSuffix(name, string(filepath.Separator)) {
			continue
		}
		if f.Rule == Stem {
			name += ".jsonl"
		}
		return name, f, true
	}
	return "", File{}, false
}

// cutSuffix is strings.CutSuffix where an N in suffix matches one or more
// digits.
func cutSuffix(s, suffix string) (string, bool) {
	before, after, numbered := strings.Cut(suffix, "N")
	if !numbered {
		return strings.CutSuffix(s, suffix)
	}
	s, ok := strings.CutSuffix(s, after)
	if !ok {
		return "", false
	}
	digits := len(s) - len(strings.TrimRight(s, "0123456789"))
	if digits == 0 {
		return "", false
	}
	return strings.CutSuffix(s[:len(s)-digits], before)
}
