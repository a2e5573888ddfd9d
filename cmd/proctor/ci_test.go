package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/report/ci"
)

// proctor report -junit writes a JUnit file a test case per sample, with
// the failures' reasons and transcript links, and replaces only a file it
// wrote; -github prints the annotations before the report.
func TestReportJUnitAndAnnotations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	runEval(t, log, 4) // s00, s04… fail in both epochs
	out := filepath.Join(dir, "junit.xml")

	code, stdout, errs := cli("report", "-junit", out, "-github", log)
	require.Zero(t, code, errs)
	require.True(t, strings.HasPrefix(stdout, "::error title=proctor cli%3A s00::failed: passed 0, failed 2"), stdout)
	require.Contains(t, stdout, "pass rate", "the report follows the annotations")

	data, err := os.ReadFile(out)
	require.NoError(t, err)
	var doc struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(data, &doc))
	require.Len(t, doc.Suites, 1)
	require.Len(t, doc.Suites[0].Cases, 40)
	require.Equal(t, 40, doc.Suites[0].Tests)
	require.Equal(t, 10, doc.Suites[0].Failures)
	c := doc.Suites[0].Cases[0]
	require.Equal(t, "s00", c.Name)
	require.NotNil(t, c.Failure)
	require.Equal(t, "got -1", c.Failure.Message)
	require.Contains(t, c.Failure.Text, "transcript: proctor trace "+log+" run.traces.jsonl#")
	require.Nil(t, doc.Suites[0].Cases[1].Failure)

	// Its own file it replaces; another's it refuses, untouched.
	code, _, errs = cli("report", "-junit", out, log)
	require.Zero(t, code, errs)
	other := filepath.Join(dir, "results.xml")
	require.NoError(t, os.WriteFile(other, []byte("<testsuites/>"), 0o644))
	code, _, errs = cli("report", "-junit", other, log)
	require.NotZero(t, code)
	require.Contains(t, errs, "not a file proctor wrote")
	data, _ = os.ReadFile(other)
	require.Equal(t, "<testsuites/>", string(data))

	code, _, errs = cli("report", "-junit", out, log, log)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "-junit writes the report of one RUN, got 2")
	code, _, errs = cli("report", "-github-file", "x.go", log)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "-github-file goes with -github")
}

func TestComparePullRequestComment(t *testing.T) {
	dir := t.TempDir()
	base, head := filepath.Join(dir, "base.jsonl"), filepath.Join(dir, "head.jsonl")
	runEval(t, base, 40) // s00 fails
	runEval(t, head, 3)  // s00, s03, s06… fail
	t.Setenv("GITHUB_SERVER_URL", "https://github.example")
	t.Setenv("GITHUB_REPOSITORY", "o/r")
	t.Setenv("GITHUB_RUN_ID", "99")
	code, out, errs := cli("compare", "-pr-comment", "-fail-on-regression", base, head)
	require.Equal(t, exitRegression, code, errs)
	require.True(t, strings.HasPrefix(out, ci.Marker("cli")+"\n"), out)
	require.Contains(t, out, "#### Regressed samples (13)")
	require.Contains(t, out, "[CI run](https://github.example/o/r/actions/runs/99)")
	require.Contains(t, out, "proctor trace "+head+" SAMPLE")
}
