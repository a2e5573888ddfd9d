package judge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/harness"
)

// TranscriptOptions says how much of an episode's transcript a grader
// sees ([RubricOptions].Transcript, [RenderTranscript]). The zero value
// is valid.
type TranscriptOptions struct {
	// MaxTokens is the transcript's budget in the prompt, in tokens
	// counted as 4 bytes each (an estimate: tokenizers differ); 0: 4000.
	MaxTokens int
	// Kinds are the kinds of events shown; nil: all but "judge" (a
	// grader does not see other judges' grading).
	Kinds []string
	// MaxCallBytes bounds what each event shows of its input and of its
	// output; 0: 200.
	MaxCallBytes int
}

// RenderTranscript shows events to a grader, one numbered line per
// event: its kind, name, input and output (each cut to MaxCallBytes, the
// size of what was cut stated) and error. A transcript over its budget
// keeps its start and its end, half the budget each, the first and last
// events always; the events between are replaced by a line that says how
// many were left out, and a first line tells the grader the transcript
// is shortened. An output judged again from a log (eval's Rejudge) has no
// transcript of its own, and the grader is told so.
func RenderTranscript(events []harness.Event, o *TranscriptOptions) string {
	var opts TranscriptOptions
	if o != nil {
		opts = *o
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = 4000
	}
	if opts.MaxCallBytes <= 0 {
		opts.MaxCallBytes = 200
	}
	if len(events) > 0 && events[0].Kind == "note" && events[0].Name == "rejudged" {
		// Judged again from a log: the agent's calls are in the original
		// transcript, not here, and the grader must not take none for none.
		return "(Not available: this answer is judged again from a log, without the transcript of how it was reached.)"
	}
	var lines []string
	for _, ev := range events {
		if opts.Kinds == nil && ev.Kind == "judge" || opts.Kinds != nil && !slices.Contains(opts.Kinds, ev.Kind) {
			continue
		}
		lines = append(lines, eventLine(len(lines)+1, ev, opts.MaxCallBytes))
	}
	budget := opts.MaxTokens * 4
	total := 0
	for _, l := range lines {
		total += len(l) + 1
	}
	if total <= budget {
		return strings.Join(lines, "\n")
	}
	head, used := 1, len(lines[0])+1
	for head < len(lines)-1 && used+len(lines[head])+1 <= budget/2 {
		used += len(lines[head]) + 1
		head++
	}
	tail, used := len(lines)-1, len(lines[len(lines)-1])+1
	for tail > head && used+len(lines[tail-1])+1 <= budget/2 {
		tail--
		used += len(lines[tail]) + 1
	}
	cut := tail - head
	if cut == 0 { // the first and last events alone are over the budget
		return strings.Join(lines, "\n")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "(This transcript is shortened to fit its budget of %d tokens: %d of its %d events, %d to %d, are left out where marked.)\n",
		opts.MaxTokens, cut, len(lines), head+1, tail)
	for _, l := range lines[:head] {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[… %d events left out (%d to %d) …]", cut, head+1, tail)
	for _, l := range lines[tail:] {
		b.WriteByte('\n')
		b.WriteString(l)
	}
	return b.String()
}

func eventLine(n int, ev harness.Event, maxBytes int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d. %s", n, ev.Kind)
	if ev.Name != "" {
		b.WriteString(" " + ev.Name)
	}
	if len(ev.Input) > 0 {
		b.WriteString(" " + summarize(ev.Input, maxBytes))
	}
	if len(ev.Output) > 0 {
		b.WriteString(" → " + summarize(ev.Output, maxBytes))
	}
	if ev.Error != "" {
		b.WriteString(" [error: " + cutText(oneLine(ev.Error), maxBytes) + "]")
	}
	return b.String()
}

// summarize shows raw JSON on one line, cut to about n bytes.
func summarize(raw json.RawMessage, n int) string {
	var c bytes.Buffer
	if json.Compact(&c, raw) != nil {
		return cutText(oneLine(string(raw)), n)
	}
	return cutText(c.String(), n)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// cutText keeps about the first n bytes of s, on a rune boundary, and
// says how many were cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return fmt.Sprintf("%s…[%d more bytes]", s[:i], len(s)-i)
}
