package report

import (
	"cmp"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/sink"
)

// Compare orders failures as a report lists them: by sample ID (bytewise),
// variant, epoch and attempt, then status and reason for records of one key.
func (f Failure) Compare(g Failure) int {
	return cmp.Or(strings.Compare(f.SampleID, g.SampleID), strings.Compare(f.Variant, g.Variant), cmp.Compare(f.Epoch, g.Epoch), cmp.Compare(f.Attempt, g.Attempt),
		strings.Compare(string(f.Status), string(g.Status)), strings.Compare(f.Reason, g.Reason))
}

// failureList keeps the failures a report lists: the first max of them by
// [Failure.Compare], whatever order they come in, so that a report lists
// the same failures in the same order however its episodes finished and
// its aggregators were merged. It holds at most twice max, keeping the
// first max when full: adding costs O(log max) amortized, and nothing for
// a failure after the last of a full list.
type failureList struct {
	list    []Failure
	omitted int
	full    bool // list[:max] is sorted: a failure after list[max-1] is never listed
}

// add adds f, keeping copies of its strings (a record's may share a
// reader's buffer).
func (l *failureList) add(f Failure, max int) {
	if max <= 0 || l.full && f.Compare(l.list[max-1]) > 0 {
		l.omitted++
		return
	}
	f.SampleID, f.Reason, f.Transcript = strings.Clone(f.SampleID), strings.Clone(f.Reason), strings.Clone(f.Transcript)
	f.Variant = strings.Clone(f.Variant)
	f.Status, f.ErrorKind = sink.Status(strings.Clone(string(f.Status))), sink.ErrorKind(strings.Clone(string(f.ErrorKind)))
	f.TraceID, f.SpanID, f.TraceURL = strings.Clone(f.TraceID), strings.Clone(f.SpanID), strings.Clone(f.TraceURL)
	l.list = append(l.list, f)
	if len(l.list) >= 2*max {
		l.trim(max)
	}
}

// trim sorts the list and keeps its first max, counting the rest omitted.
func (l *failureList) trim(max int) {
	slices.SortFunc(l.list, Failure.Compare)
	if len(l.list) >= max {
		l.omitted += len(l.list) - max
		clear(l.list[max:])
		l.list = l.list[:max]
		l.full = true
	}
}

// listed returns a copy of the failures listed, in order, and how many
// more there are.
func (l *failureList) listed(max int) ([]Failure, int) {
	l.trim(max)
	return slices.Clone(l.list), l.omitted
}
