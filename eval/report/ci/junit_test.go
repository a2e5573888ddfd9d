package ci_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/eval/report/ci"
	"github.com/proctor-evals/proctor/sink"
)

// runOf builds a report: outcomes[i] is a sample ID and one letter per
// epoch: P pass, F fail, E error, U unscored.
func runOf(t *testing.T, reason func(id string, epoch int) string, outcomes ...[2]string) *report.Report {
	t.Helper()
	var recs []sink.Record
	for _, o := range outcomes {
		for ep, c := range o[1] {
			r := sink.Record{Schema: 1, RunID: "run1", Eval: "harbor", SampleID: o[0], Epoch: ep,
				Transcript: fmt.Sprintf("run.traces.jsonl#%d", 100*len(recs)), Tags: map[string]string{"difficulty": "easy"}}
			switch c {
			case 'P':
				r.Status, r.Score = sink.Pass, 1
			case 'F':
				r.Status, r.Reason = sink.Fail, reason(o[0], ep)
			case 'E':
				r.Status, r.ErrorKind, r.Error, r.Reason = sink.Error, sink.KindJudge, reason(o[0], ep), reason(o[0], ep)
			case 'U':
				r.Status, r.Reason = sink.Unscored, reason(o[0], ep)
			}
			recs = append(recs, r)
		}
	}
	rep, err := report.FromRecords(func(yield func(sink.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}, &report.Options{MaxFailures: 1 << 20})
	require.NoError(t, err)
	return rep
}

// junitCase is a test case as checkJUnit decodes it.
type junitCase struct {
	Name, Classname        string
	Failure, Error         *junitResult
	FlakyFailures, FlakyEr []junitResult
	SystemOut              string
}

type junitResult struct{ Message, Type, Text string }

// The structure of the JUnit schema (Ant's, as Jenkins publishes it in
// junit-10.xsd, with Maven Surefire's flaky and rerun elements): for each
// element, its attributes (required ones marked !) and its children; an
// element with no children entry holds text only.
var junitSchema = map[string]struct {
	attrs    []string
	children []string
	text     bool
}{
	"testsuites":   {attrs: []string{"name", "tests", "failures", "errors", "skipped", "disabled", "time", "timestamp"}, children: []string{"testsuite"}},
	"testsuite":    {attrs: []string{"!name", "!tests", "failures", "errors", "skipped", "disabled", "time", "timestamp", "hostname", "id", "package"}, children: []string{"properties", "testcase", "system-out", "system-err"}},
	"properties":   {children: []string{"property"}},
	"property":     {attrs: []string{"!name", "!value"}},
	"testcase":     {attrs: []string{"!name", "classname", "time", "assertions", "status", "file", "line"}, children: []string{"skipped", "error", "failure", "flakyFailure", "flakyError", "rerunFailure", "rerunError", "system-out", "system-err"}},
	"failure":      {attrs: []string{"message", "type"}, text: true},
	"error":        {attrs: []string{"message", "type"}, text: true},
	"skipped":      {attrs: []string{"message"}, text: true},
	"flakyFailure": {attrs: []string{"message", "!type"}, children: []string{"stackTrace", "system-out", "system-err"}},
	"flakyError":   {attrs: []string{"message", "!type"}, children: []string{"stackTrace", "system-out", "system-err"}},
	"stackTrace":   {text: true},
	"system-out":   {text: true},
	"system-err":   {text: true},
}

var intAttrs = []string{"tests", "failures", "errors", "skipped", "disabled", "assertions"}

// checkJUnit decodes doc strictly (well-formed XML 1.0, every character
// legal) and checks it against junitSchema: no unknown element or
// attribute, required attributes present, numbers numbers, text only where
// text goes, at most one result per case, and the suites' counts equal to
// their cases. It returns the cases.
func checkJUnit(t *testing.T, doc []byte) []junitCase {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	type open struct {
		name                          string
		tests, failures, errors, seen int
		results                       int
	}
	var stack []*open
	var cases []junitCase
	var text *string
	var res *junitResult
	counts := map[string]int{}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "not well-formed")
		switch tok := tok.(type) {
		case xml.StartElement:
			name := tok.Name.Local
			el, ok := junitSchema[name]
			require.True(t, ok, "unknown element <%s>", name)
			require.Empty(t, tok.Name.Space, "namespaced element %v", tok.Name)
			if len(stack) == 0 {
				require.Equal(t, "testsuites", name, "root element")
			} else {
				parent := stack[len(stack)-1]
				require.Contains(t, junitSchema[parent.name].children, name, "<%s> inside <%s>", name, parent.name)
			}
			attrs := map[string]string{}
			for _, a := range tok.Attr {
				require.True(t, slices.Contains(el.attrs, a.Name.Local) || slices.Contains(el.attrs, "!"+a.Name.Local), "attribute %s of <%s>", a.Name.Local, name)
				_, dup := attrs[a.Name.Local]
				require.False(t, dup, "attribute %s twice", a.Name.Local)
				attrs[a.Name.Local] = a.Value
				if slices.Contains(intAttrs, a.Name.Local) {
					_, err := strconv.Atoi(a.Value)
					require.NoError(t, err, "attribute %s of <%s>", a.Name.Local, name)
				}
				if a.Name.Local == "time" {
					_, err := strconv.ParseFloat(a.Value, 64)
					require.NoError(t, err, "time")
				}
			}
			for _, a := range el.attrs {
				if strings.HasPrefix(a, "!") {
					require.Contains(t, attrs, a[1:], "<%s> lacks %s", name, a[1:])
				}
			}
			o := &open{name: name}
			o.tests, _ = strconv.Atoi(attrs["tests"])
			o.failures, _ = strconv.Atoi(attrs["failures"])
			o.errors, _ = strconv.Atoi(attrs["errors"])
			stack = append(stack, o)
			switch name {
			case "testcase":
				cases = append(cases, junitCase{Name: attrs["name"], Classname: attrs["classname"]})
				counts = map[string]int{}
			case "failure", "error", "flakyFailure", "flakyError":
				res = &junitResult{Message: attrs["message"], Type: attrs["type"]}
				text = &res.Text
				if name == "failure" || name == "error" {
					stack[len(stack)-2].results++
					require.LessOrEqual(t, stack[len(stack)-2].results, 1, "a case with two results")
				}
			case "stackTrace":
				text = &res.Text
			case "system-out":
				if stack[len(stack)-2].name == "testcase" {
					text = &cases[len(cases)-1].SystemOut
				}
			}
			counts[name]++
		case xml.CharData:
			if len(stack) > 0 && !junitSchema[stack[len(stack)-1].name].text {
				require.Empty(t, strings.TrimSpace(string(tok)), "text inside <%s>", stack[len(stack)-1].name)
			} else if text != nil {
				*text += string(tok)
			}
		case xml.EndElement:
			o := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			c := &cases
			switch o.name {
			case "failure":
				(*c)[len(*c)-1].Failure = res
			case "error":
				(*c)[len(*c)-1].Error = res
			case "flakyFailure":
				(*c)[len(*c)-1].FlakyFailures = append((*c)[len(*c)-1].FlakyFailures, *res)
			case "flakyError":
				(*c)[len(*c)-1].FlakyEr = append((*c)[len(*c)-1].FlakyEr, *res)
			case "testsuite":
				require.Equal(t, o.tests, o.seen, "tests of the suite")
				fails, errs := 0, 0
				for _, k := range cases {
					if k.Failure != nil {
						fails++
					}
					if k.Error != nil {
						errs++
					}
				}
				require.Equal(t, o.failures, fails, "failures of the suite")
				require.Equal(t, o.errors, errs, "errors of the suite")
			case "testcase":
				stack[len(stack)-1].seen++
			}
			if o.name != "stackTrace" {
				text = nil
			}
		case xml.ProcInst, xml.Comment:
		case xml.Directive:
			t.Fatalf("directive %q", tok)
		}
	}
	require.Empty(t, stack, "unclosed elements")
	return cases
}

func TestJUnitCasePerSampleWithFlaky(t *testing.T) {
	t.Parallel()
	rep := runOf(t, func(id string, ep int) string { return fmt.Sprintf("%s went wrong in epoch %d", id, ep) },
		[2]string{"all-pass", "PPP"}, [2]string{"all-fail", "FFF"}, [2]string{"flaky", "PFP"},
		[2]string{"broken", "EEU"}, [2]string{"fail-and-error", "FEF"}, [2]string{"pass-and-error", "PPE"})
	var buf bytes.Buffer
	require.NoError(t, ci.WriteJUnit(&buf, rep, &ci.JUnitOptions{Log: "runs/harbor.jsonl"}))
	cases := checkJUnit(t, buf.Bytes())
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.Name
		require.Equal(t, "harbor", c.Classname)
	}
	require.Equal(t, []string{"all-pass", "all-fail", "flaky", "broken", "fail-and-error", "pass-and-error"}, names)
	byName := map[string]junitCase{}
	for _, c := range cases {
		byName[c.Name] = c
	}
	pass := byName["all-pass"]
	require.Nil(t, pass.Failure)
	require.Nil(t, pass.Error)
	require.Empty(t, pass.FlakyFailures)

	fail := byName["all-fail"]
	require.NotNil(t, fail.Failure)
	require.Equal(t, "all-fail went wrong in epoch 0", fail.Failure.Message)
	for ep := range 3 {
		require.Contains(t, fail.Failure.Text, fmt.Sprintf("epoch %d (attempt 0): fail: all-fail went wrong in epoch %d", ep, ep))
	}
	require.Contains(t, fail.Failure.Text, "transcript: proctor trace runs/harbor.jsonl run.traces.jsonl#300")

	fl := byName["flaky"]
	require.Nil(t, fl.Failure, "a flaky case passes")
	require.Len(t, fl.FlakyFailures, 1)
	require.Equal(t, "flaky went wrong in epoch 1", fl.FlakyFailures[0].Message)
	require.Contains(t, fl.FlakyFailures[0].Text, "proctor trace runs/harbor.jsonl")
	require.Contains(t, fl.SystemOut, "passed 2, failed 1")

	broken := byName["broken"]
	require.Nil(t, broken.Failure)
	require.NotNil(t, broken.Error, "a sample never scored is an error")
	require.Equal(t, "error/judge", broken.Error.Type)
	require.Contains(t, broken.Error.Text, "epoch 2 (attempt 0): unscored: broken went wrong in epoch 2")

	fe := byName["fail-and-error"]
	require.NotNil(t, fe.Failure, "failed in every scored epoch: a failure")
	require.Contains(t, fe.Failure.Text, "epoch 1 (attempt 0): error/judge")

	pe := byName["pass-and-error"]
	require.Nil(t, pe.Failure)
	require.Nil(t, pe.Error)
	require.Len(t, pe.FlakyEr, 1, "passed, and errored once: flaky")
}

// Sample IDs and reasons are the dataset's and the agent's: anything.
// Whatever they hold, the document stays well-formed and valid, and what
// XML can carry reads back as it was.
func TestJUnitHostileTextStaysWellFormed(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("<&>\"'", 300_000) // 1.5 MB
	hostile := []string{
		`<script>&amp;"quoted" 'single'</script>`,
		"]]><injected/><![CDATA[",
		"ctl\x00\x01\x08\x0b\x0c\x1b[31m\x7f",
		"bad utf8 \xff\xfe end",
		"nonchars \uFFFE \uFFFF",
		"tab\tnew\nline\rcr",
		"<!-- comment --> <?pi?> <!DOCTYPE x>",
		strings.Repeat("x", 5000),
	}
	var outcomes [][2]string
	for i, id := range hostile {
		outcomes = append(outcomes, [2]string{id, []string{"F", "E", "PF"}[i%3]})
	}
	rep := runOf(t, func(id string, ep int) string { return id + " " + long + "\x00\x1b" }, outcomes...)
	var buf bytes.Buffer
	require.NoError(t, ci.WriteJUnit(&buf, rep, nil))
	cases := checkJUnit(t, buf.Bytes())
	require.Len(t, cases, len(hostile))
	require.Equal(t, `<script>&amp;"quoted" 'single'</script>`, cases[0].Name, "XML specials read back as they were")
	require.Equal(t, "]]><injected/><![CDATA[", cases[1].Name)
	require.Equal(t, `ctl\u0000\u0001\u0008\u000B\u000C\u001B[31m`+"\x7f", cases[2].Name, "C0 controls replaced by escapes")
	require.Equal(t, `bad utf8 \xFF\xFE end`, cases[3].Name)
	require.Equal(t, `nonchars \uFFFE \uFFFF`, cases[4].Name)
	require.Equal(t, "tab\tnew\nline\rcr", cases[5].Name, "white space kept, as character references")
	require.Equal(t, hostile[7], cases[7].Name, "a long ID whole")
	require.NotNil(t, cases[0].Failure)
	require.Less(t, len(cases[0].Failure.Text), 70<<10, "the text is bounded")
	require.Contains(t, cases[0].Failure.Text, "bytes more)")
	require.Less(t, len(cases[0].Failure.Message), 1100, "the message is bounded")
}

// TestJUnitSuitePerVariant: a run of variants writes a suite per variant
// (eval/variant), each with a case per sample and that variant's
// failures: a sample that passes in one variant and fails in the other
// is not one flaky case.
func TestJUnitSuitePerVariant(t *testing.T) {
	t.Parallel()
	var recs []sink.Record
	for i := range 4 {
		for _, v := range []string{"a", "b"} {
			r := sink.Record{Schema: 1, RunID: "run1", Eval: "harbor", Variant: v, SampleID: fmt.Sprintf("s%d", i), Status: sink.Pass, Score: 1}
			if v == "b" && i == 0 {
				r.Status, r.Score, r.Reason = sink.Fail, 0, "wrong in b"
			}
			recs = append(recs, r)
		}
	}
	rep, err := report.FromRecords(func(yield func(sink.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}, nil)
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, ci.WriteJUnit(&b, rep, nil))
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Cases    []struct {
				Name      string     `xml:"name,attr"`
				Classname string     `xml:"classname,attr"`
				Failure   *struct{}  `xml:"failure"`
				Flaky     []struct{} `xml:"flakyFailure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(b.Bytes(), &doc))
	require.Equal(t, 8, doc.Tests)
	require.Equal(t, 1, doc.Failures)
	require.Len(t, doc.Suites, 2)
	for _, su := range doc.Suites {
		require.Equal(t, 4, su.Tests)
		for _, c := range su.Cases {
			require.Equal(t, su.Name, c.Classname)
			require.Empty(t, c.Flaky, "no case mixes variants")
		}
	}
	b0 := doc.Suites[0]
	if b0.Name != "harbor/b" {
		b0 = doc.Suites[1]
	}
	require.Equal(t, "harbor/b", b0.Name)
	require.Equal(t, 1, b0.Failures)
	require.Contains(t, b.String(), "wrong in b")
}
