package replay

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/dataset"
)

// Window is a span of production time, [Start, Start+Length): the traffic
// one run of a periodic job judges. Its run ID and log path derive from it
// alone, so running the job again for the same window resumes the same
// run instead of judging (and paying for) the window twice.
type Window struct {
	Start  time.Time
	Length time.Duration
}

// WindowAt returns the window of the given length that holds t, aligned
// on multiples of length since the zero time in UTC: WindowAt(t, time.Hour)
// is t's hour, WindowAt(t, 24*time.Hour) its UTC day. length must be
// positive; WindowAt panics otherwise.
func WindowAt(t time.Time, length time.Duration) Window {
	if length <= 0 {
		panic(fmt.Sprintf("replay: window length %v is not positive", length))
	}
	return Window{Start: t.UTC().Truncate(length), Length: length}
}

// End returns the end of the window, which is not in it.
func (w Window) End() time.Time { return w.Start.Add(w.Length) }

// Contains reports whether t falls in the window: Start ≤ t < End.
func (w Window) Contains(t time.Time) bool {
	return !t.Before(w.Start) && t.Before(w.End())
}

// RunID returns the run ID of eval's run over the window:
// "support-bot-2026-11-23T10-1h" for the hour from 10:00 UTC. It uses the
// UTC start (to the hour, minute or second, as the start needs) and the
// length, and no character that a file name cannot hold.
func (w Window) RunID(eval string) string {
	start := w.Start.UTC()
	layout := "2006-01-02T150405"
	switch {
	case start.Equal(start.Truncate(time.Hour)):
		layout = "2006-01-02T15"
	case start.Equal(start.Truncate(time.Minute)):
		layout = "2006-01-02T1504"
	}
	return eval + "-" + start.Format(layout) + "-" + shortDuration(w.Length)
}

// Log returns the path of the log of eval's run over the window in dir:
// dir/RUNID.jsonl. A job that runs with this log and [Window.RunID]
// resumes on a re-run.
func (w Window) Log(dir, eval string) string {
	return filepath.Join(dir, w.RunID(eval)+".jsonl")
}

// Filter returns the cases of d whose Time falls in the window. A case
// without a time is in no window.
func (w Window) Filter(d dataset.Dataset[Case]) dataset.Dataset[Case] {
	return dataset.Filter(d, func(s dataset.Sample[Case]) bool {
		return !s.Input.Time.IsZero() && w.Contains(s.Input.Time)
	})
}

// shortDuration writes d without zero units: 1h, 90m → 1h30m, 30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
