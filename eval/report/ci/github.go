package ci

import (
	"fmt"
	"io"
	"strings"

	"github.com/proctor-evals/proctor/eval/report"
)

// AnnotationOptions tune [WriteAnnotations]. The zero value is valid.
type AnnotationOptions struct {
	// Log is the path of the run's log, named in each annotation's
	// command to read a transcript.
	Log string
	// File, when set, is the repository file the annotations are attached
	// to (the eval's source, say): a pull request then shows them on it.
	File string
	// Max bounds the error and the warning annotations each (default 10:
	// GitHub shows at most 10 of each kind per step); a notice counts the
	// rest.
	Max int
}

// WriteAnnotations writes r as GitHub Actions workflow commands, one per
// line, for a step's output: an error per failing sample (failed or
// errored in every epoch), a warning per flaky one (passed in some epochs,
// not in others), an error when the report fails its gates, and a notice
// with the pass rate. Messages and properties are escaped as GitHub's
// toolkit escapes them (% → %25, CR → %0D, LF → %0A; in properties also
// : → %3A and , → %2C), so a hostile sample ID or reason cannot end a
// command or forge another.
func WriteAnnotations(w io.Writer, r *report.Report, opts *AnnotationOptions) error {
	var o AnnotationOptions
	if opts != nil {
		o = *opts
	}
	if o.Max <= 0 {
		o.Max = 10
	}
	var b strings.Builder
	title := "proctor " + r.Eval
	errs, warns, moreErrs, moreWarns := 0, 0, 0, 0
	if why := r.GateFailure(); why != "" {
		b.WriteString(command("error", o.File, title+": gate failed", why))
		errs++
	}
	// A run of variants: each variant's samples on their own, never one
	// sample's outcomes pooled over variants.
	type part struct {
		rep   *report.Report
		title string
	}
	parts := []part{{r, title}}
	if r.Leaderboard != nil {
		parts = nil
		for _, name := range r.VariantNames() {
			parts = append(parts, part{r.VariantReport(name), title + " [" + name + "]"})
		}
	}
	for _, p := range parts {
		byID := map[string][]report.Failure{}
		for _, f := range p.rep.Failures {
			byID[f.SampleID] = append(byID[f.SampleID], f)
		}
		for _, s := range p.rep.SampleResults() {
			out := outcomeOf(s)
			if out == passed {
				continue
			}
			level, count, more := "error", &errs, &moreErrs
			if out == flaky {
				level, count, more = "warning", &warns, &moreWarns
			}
			if *count >= o.Max {
				*more++
				continue
			}
			*count++
			msg := fmt.Sprintf("%s: passed %d, failed %d, errored %d, unscored %d", out, s.Passed, s.Failed, s.Errored, s.Unscored)
			for _, f := range byID[s.ID] {
				msg += fmt.Sprintf("\nepoch %d: %s: %s", f.Epoch, kind(f), clipText(f.Reason, 1024))
				if f.Transcript != "" {
					msg += fmt.Sprintf("\n  proctor trace %s %s", orLOG(o.Log), f.Transcript)
				}
				if f.TraceURL != "" {
					msg += "\n  " + f.TraceURL
				}
			}
			b.WriteString(command(level, o.File, p.title+": "+s.ID, clipText(msg, 16<<10)))
		}
	}
	summary := fmt.Sprintf("pass rate %.1f%% [%.1f%%, %.1f%%] over %d samples × %d epochs: %d passed, %d failed, %d errored, %d unscored",
		100*r.PassRate, 100*r.Interval.Lo, 100*r.Interval.Hi, r.Samples, r.Epochs, r.Passed, r.Failed, r.Errored, r.Unscored)
	if r.Leaderboard != nil {
		summary = r.Headline()
	}
	if moreErrs+moreWarns > 0 {
		summary += fmt.Sprintf("; %d failing and %d flaky samples more than annotated (see the report)", moreErrs, moreWarns)
	}
	b.WriteString(command("notice", o.File, title, summary))
	_, err := io.WriteString(w, b.String())
	return err
}

func orLOG(log string) string {
	if log == "" {
		return "LOG"
	}
	return log
}

// command is one workflow command line: ::level file=F,title=T::message.
func command(level, file, title, msg string) string {
	props := "title=" + escapeProperty(title)
	if file != "" {
		props = "file=" + escapeProperty(file) + "," + props
	}
	return "::" + level + " " + props + "::" + escapeData(msg) + "\n"
}

// escapeData escapes a workflow command's message as @actions/core does.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// escapeProperty escapes a workflow command's property value as
// @actions/core does: as a message, and ':' and ',' too, which end a
// property.
func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// outcome is a sample's result over its epochs, as CI shows it.
type outcome string

const (
	passed  outcome = "passed"
	failed  outcome = "failed"  // failed in every scored epoch
	errored outcome = "errored" // never scored: every epoch errored or unscored
	flaky   outcome = "flaky"   // passed in some epoch and not in another
)

func outcomeOf(s report.SampleResult) outcome {
	notPassed := s.Failed + s.Errored + s.Unscored
	switch {
	case notPassed == 0:
		return passed
	case s.Passed > 0:
		return flaky
	case s.Failed > 0:
		return failed
	}
	return errored
}
