package ci

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
)

// JUnitMark is the comment that opens every document [WriteJUnit]
// writes, after the XML declaration: a tool that would replace a file
// checks it is there first, so that it never overwrites a file proctor
// did not write.
const JUnitMark = "<!-- written by proctor report -junit -->"

// JUnitOptions tune [WriteJUnit]. The zero value is valid.
type JUnitOptions struct {
	// Log is the path of the run's log: each failed epoch names the
	// command that prints its transcript, proctor trace LOG LINK.
	Log string
	// MaxText bounds the text of one test case's failure in bytes
	// (default 64 KiB); a longer one is cut and says how much was.
	MaxText int
}

// WriteJUnit writes r as JUnit XML: one test suite, the eval, with a test
// case per sample (named by its ID, in the report's order):
//
//   - a sample that passed in every epoch it was scored passes;
//   - one that failed in every scored epoch has a <failure> listing each
//     failed epoch's reason and transcript link;
//   - one never scored (every epoch errored or unscored) has an <error>;
//   - one that both passed and failed (or errored) across epochs is flaky:
//     it passes, with a <flakyFailure> (<flakyError>) per epoch that did
//     not, as Maven Surefire marks a test that passed on a rerun, which
//     Jenkins, GitLab and the JUnit report actions read.
//
// The reasons come from r.Failures, so build r with Options.MaxFailures
// large enough to hold them all; a sample whose reasons were left out
// says so. Text that XML 1.0 cannot carry (most C0 controls, unpaired
// surrogates, U+FFFE/U+FFFF) is replaced by its \uXXXX escape, so every
// sample ID and reason gives a well-formed document.
func WriteJUnit(w io.Writer, r *report.Report, opts *JUnitOptions) error {
	var o JUnitOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxText <= 0 {
		o.MaxText = 64 << 10
	}
	var suites []junitSuite
	if r.Leaderboard != nil {
		// A run of variants: a suite per variant, of its own samples and
		// failures, named eval/variant; never one pooled suite.
		for _, name := range r.VariantNames() {
			suite, err := o.suite(r.VariantReport(name), r.Eval+"/"+name)
			if err != nil {
				return err
			}
			suites = append(suites, suite)
		}
	} else {
		suite, err := o.suite(r, r.Eval)
		if err != nil {
			return err
		}
		suites = append(suites, suite)
	}
	doc := junitSuites{Name: xmlSafe(r.Eval), Time: seconds(r.Wall.Seconds()), Suites: suites}
	for _, su := range suites {
		doc.Tests, doc.Failures, doc.Errors = doc.Tests+su.Tests, doc.Failures+su.Failures, doc.Errors+su.Errors
	}
	if _, err := io.WriteString(w, xml.Header+JUnitMark+"\n"); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// suite is the test suite of report r, named name: a test case per
// sample.
func (o JUnitOptions) suite(r *report.Report, name string) (junitSuite, error) {
	samples := r.SampleResults()
	if samples == nil && r.Samples > 0 {
		return junitSuite{}, errors.New("ci: the report has no per-sample results (a report decoded from JSON has none): build it from the log")
	}
	byID := map[string][]report.Failure{}
	for _, f := range r.Failures {
		byID[f.SampleID] = append(byID[f.SampleID], f)
	}
	suite := junitSuite{
		Name:  xmlSafe(name),
		Tests: len(samples),
		Time:  seconds(r.Wall.Seconds()),
		Properties: &junitProperties{Props: []junitProperty{
			{Name: "run_id", Value: xmlSafe(r.RunID)},
			{Name: "epochs", Value: strconv.Itoa(r.Epochs)},
			{Name: "pass_rate", Value: strconv.FormatFloat(r.PassRate, 'f', -1, 64)},
			{Name: "interval", Value: fmt.Sprintf("[%g, %g] %s", r.Interval.Lo, r.Interval.Hi, r.Interval.Method)},
		}},
	}
	if !r.StartedAt.IsZero() {
		suite.Timestamp = r.StartedAt.UTC().Format("2006-01-02T15:04:05")
	}
	for _, s := range samples {
		c := o.testCase(r, s, byID[s.ID])
		switch {
		case c.Failure != nil:
			suite.Failures++
		case c.Error != nil:
			suite.Errors++
		}
		suite.Cases = append(suite.Cases, c)
	}
	return suite, nil
}

// testCase is the test case of sample s, whose failed, errored and
// unscored episodes r lists in fs.
func (o JUnitOptions) testCase(r *report.Report, s report.SampleResult, fs []report.Failure) junitCase {
	class := r.Eval
	if r.Variant != "" {
		class += "/" + r.Variant
	}
	c := junitCase{Name: xmlSafe(s.ID), Classname: xmlSafe(class)}
	noVerdict := s.Errored + s.Unscored
	summary := fmt.Sprintf("passed %d, failed %d, errored %d, unscored %d of %d epochs",
		s.Passed, s.Failed, s.Errored, s.Unscored, s.Passed+s.Failed+noVerdict)
	listed := s.Failed + noVerdict
	missing := listed - len(fs)
	if missing > 0 {
		summary += fmt.Sprintf("; the reasons of %d are not in the report (raise its failure limit)", missing)
	}
	c.SystemOut = summary
	switch outcomeOf(s) {
	case flaky:
		for _, f := range fs {
			flaky := junitFlaky{Message: xmlSafe(clipText(oneLine(f.Reason), 1024)), Type: kind(f),
				StackTrace: xmlSafe(clipText(o.epochText(f), o.MaxText))}
			if f.Status == sink.Fail {
				c.FlakyFailures = append(c.FlakyFailures, flaky)
			} else {
				c.FlakyErrors = append(c.FlakyErrors, flaky)
			}
		}
	case failed:
		c.Failure = o.result(summary, fs)
	case errored:
		c.Error = o.result(summary, fs)
	}
	return c
}

// result is the <failure> or <error> of a sample with the episodes fs.
func (o JUnitOptions) result(summary string, fs []report.Failure) *junitResult {
	res := &junitResult{Message: summary, Type: "fail"}
	var b strings.Builder
	for i, f := range fs {
		if i == 0 {
			res.Message = clipText(oneLine(f.Reason), 1024)
			res.Type = kind(f)
		}
		b.WriteString(o.epochText(f))
	}
	res.Message = xmlSafe(res.Message)
	res.Text = xmlSafe(clipText(b.String(), o.MaxText))
	return res
}

// epochText describes one failed episode: its status, reason and where to
// read its transcript.
func (o JUnitOptions) epochText(f report.Failure) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d (attempt %d): %s: %s\n", f.Epoch, f.Attempt, kind(f), f.Reason)
	if f.Transcript != "" {
		fmt.Fprintf(&b, "  transcript: proctor trace %s %s\n", orLOG(o.Log), f.Transcript)
	}
	if f.TraceURL != "" {
		fmt.Fprintf(&b, "  trace: %s\n", f.TraceURL)
	}
	return b.String()
}

func kind(f report.Failure) string {
	if f.ErrorKind != "" {
		return string(f.Status) + "/" + string(f.ErrorKind)
	}
	return string(f.Status)
}

func seconds(s float64) string {
	if s <= 0 {
		return ""
	}
	return strconv.FormatFloat(s, 'f', 3, 64)
}

// xmlSafe replaces what XML 1.0 cannot carry, even as a character
// reference (its Char production: #x9 | #xA | #xD | [#x20-#xD7FF] |
// [#xE000-#xFFFD] | [#x10000-#x10FFFF]), and bytes that are not UTF-8,
// with a visible \uXXXX (\xNN for a byte) escape. encoding/xml escapes the
// rest.
func xmlSafe(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !xmlChar(r) }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02X`, s[i])
		case !xmlChar(r):
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func xmlChar(r rune) bool {
	return r == 0x9 || r == 0xA || r == 0xD ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

// The document, as the JUnit schema Jenkins, GitLab and the report actions
// read it (Ant's testsuites/testsuite/testcase), with Maven Surefire's
// flakyFailure and flakyError for flaky cases.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr,omitempty"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string           `xml:"name,attr"`
	Tests      int              `xml:"tests,attr"`
	Failures   int              `xml:"failures,attr"`
	Errors     int              `xml:"errors,attr"`
	Skipped    int              `xml:"skipped,attr"`
	Time       string           `xml:"time,attr,omitempty"`
	Timestamp  string           `xml:"timestamp,attr,omitempty"`
	Properties *junitProperties `xml:"properties,omitempty"`
	Cases      []junitCase      `xml:"testcase"`
}

type junitProperties struct {
	Props []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name          string       `xml:"name,attr"`
	Classname     string       `xml:"classname,attr"`
	Error         *junitResult `xml:"error,omitempty"`
	Failure       *junitResult `xml:"failure,omitempty"`
	FlakyFailures []junitFlaky `xml:"flakyFailure"`
	FlakyErrors   []junitFlaky `xml:"flakyError"`
	SystemOut     string       `xml:"system-out,omitempty"`
}

type junitResult struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitFlaky struct {
	Message    string `xml:"message,attr"`
	Type       string `xml:"type,attr"`
	StackTrace string `xml:"stackTrace"`
}
