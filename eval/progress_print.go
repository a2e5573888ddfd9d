package eval

// The terminal half of progress: the line a run prints on stderr, redrawn
// in place on a terminal and printed now and then elsewhere, and when it
// stays quiet. The numbers are the tracker's (progress.go).

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/proctor-evals/proctor/internal/numfmt"
)

// goTestQuiet reports whether this is a `go test` binary run without -v:
// the test binary registers test.v (found through lookup, flag.Lookup,
// without importing package testing). -v=test2json (go test -json) is
// quiet too: its reader asked for events, not a progress line.
func goTestQuiet(lookup func(string) *flag.Flag) bool {
	f := lookup("test.v")
	return f != nil && f.Value.String() != "true"
}

func isTerminal(f *os.File) bool {
	if os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressPrinter writes the progress line: on a terminal, one line
// rewritten in place at every snapshot (cut to the terminal's width, so
// that it never wraps and \r always returns to its start); elsewhere a
// plain line every plainProgressEvery. Nothing is written for a run that
// ends before its first line, and the last line stays.
type progressPrinter struct {
	w        io.Writer
	terminal bool
	width    int
	last     time.Time // of the latest plain line (the start at first)
	shown    bool
	buf      []byte
}

func newProgressPrinter(w io.Writer, terminal bool, width int, start time.Time) *progressPrinter {
	if width <= 0 {
		width = 80
	}
	return &progressPrinter{w: w, terminal: terminal, width: width, last: start}
}

func (pr *progressPrinter) print(p Progress, now time.Time) {
	switch {
	case p.Final && !pr.shown:
		return
	case pr.terminal:
		pr.buf = append(pr.buf[:0], '\r')
		pr.buf = append(pr.buf, p.line(pr.width-1)...)
		pr.buf = append(pr.buf, "\x1b[K"...) // clear what a longer line left
		if p.Final {
			pr.buf = append(pr.buf, '\n')
		}
	case p.Final || now.Sub(pr.last) >= plainProgressEvery:
		pr.buf = append(append(pr.buf[:0], p.String()...), '\n')
		pr.last = now
	default:
		return
	}
	pr.shown = true
	pr.w.Write(pr.buf) // a progress line that cannot be written is not worth stopping for
}

// String returns the progress as one plain line, as a run prints it where
// it cannot update a line in place.
func (p Progress) String() string { return p.line(0) }

// line renders p on one line of at most width characters (0: no limit),
// leaving out the least useful parts first.
func (p Progress) line(width int) string {
	type part struct {
		text string
		rank int // 0 is kept longest
	}
	var parts []part
	add := func(rank int, format string, args ...any) {
		parts = append(parts, part{fmt.Sprintf(format, args...), rank})
	}
	done := fmt.Sprintf("%d/%d", p.Done, p.Total)
	if p.Resumed > 0 {
		done += fmt.Sprintf(" (%d resumed)", p.Resumed)
	}
	add(0, "%s", done)
	if !p.Final {
		add(2, "%d running", p.Running)
	}
	statuses := fmt.Sprintf("%d pass %d fail", p.Pass, p.Fail)
	if p.Error > 0 {
		statuses += fmt.Sprintf(" %d error", p.Error)
	}
	if p.Unscored > 0 {
		statuses += fmt.Sprintf(" %d unscored", p.Unscored)
	}
	add(3, "%s", statuses)
	if p.ETA.Known() {
		lo, hi := shortDuration(p.ETA.Low), shortDuration(p.ETA.High)
		if lo == hi {
			add(1, "ETA ~%s", hi)
		} else {
			add(1, "ETA %s–%s", lo, hi)
		}
	}
	add(5, "%s/min", shortCount(p.PerMinute))
	if p.CostUSD > 0 {
		add(6, "%s", numfmt.USD(p.CostUSD))
	}
	p.budgetParts(add)
	p.rateLimitPart(add)
	add(7, "%s", shortDuration(p.Elapsed))
	if p.InputTokens > 0 || p.OutputTokens > 0 {
		add(8, "tokens %s in %s out", shortCount(float64(p.InputTokens)), shortCount(float64(p.OutputTokens)))
	}
	if len(p.Longest) > 0 && p.Longest[0].Elapsed >= progressLongestShown {
		l := p.Longest[0]
		add(4, "longest %s%s epoch %d attempt %d %s", l.SampleID, variantOf(l.Variant), l.Epoch, l.Attempt, shortDuration(l.Elapsed))
	}
	prefix := "proctor: "
	if p.Eval != "" {
		prefix += p.Eval + ": "
	}
	const sep = " · "
	join := func() string {
		var b strings.Builder
		b.WriteString(prefix)
		for i, pt := range parts {
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(pt.text)
		}
		return b.String()
	}
	s := join()
	for width > 0 && utf8.RuneCountInString(s) > width && len(parts) > 1 {
		worst := 0
		for i, pt := range parts {
			if pt.rank > parts[worst].rank {
				worst = i
			}
		}
		parts = slices.Delete(parts, worst, worst+1)
		s = join()
	}
	if width > 0 && utf8.RuneCountInString(s) > width {
		s = string([]rune(s)[:width])
	}
	return s
}

// shortDuration writes d in at most two units: 850ms, 42s, 3m05s, 12m, 3h12m.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d < 10*time.Minute:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	case d < time.Hour:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
}

// shortCount writes n compactly: 950, 12.3k, 456k, 4.6M.
func shortCount(n float64) string {
	switch {
	case n < 1e3:
		return strconv.FormatFloat(n, 'f', 0, 64)
	case n < 1e4:
		return strconv.FormatFloat(n/1e3, 'f', 1, 64) + "k"
	case n < 1e6:
		return strconv.FormatFloat(n/1e3, 'f', 0, 64) + "k"
	case n < 1e7:
		return strconv.FormatFloat(n/1e6, 'f', 1, 64) + "M"
	}
	return strconv.FormatFloat(n/1e6, 'f', 0, 64) + "M"
}
