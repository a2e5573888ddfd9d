package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink/jsonl"
)

// relink rewrites the trace link of sample id, epoch 0, in the log.
func relink(t *testing.T, log, id, link string) {
	t.Helper()
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	re := regexp.MustCompile(`("sample_id":"` + id + `","epoch":0,[^\n]*"trace":)"[^"]*"`)
	require.True(t, re.Match(b), id)
	b = re.ReplaceAll(b, []byte(`${1}"`+link+`"`))
	require.NoError(t, os.WriteFile(log, b, 0o644))
}

func linkOf(t *testing.T, log, id string) string {
	t.Helper()
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		if r.SampleID == id && r.Epoch == 0 {
			return r.Transcript
		}
	}
	t.Fatalf("no %s in %s", id, log)
	return ""
}

// TestTranscriptLinksAreCheckedAndConfined: a link to another episode's
// transcript (a trace store deleted or cut, then appended to) is refused
// by trace and left out by merge; a link out of the log's directory (a
// planted absolute path) is not followed by merge, which copied the file
// it named into its output.
func TestTranscriptLinksAreCheckedAndConfined(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "runs")
	log := filepath.Join(dir, "run.jsonl")
	runEval(t, log, 4)
	relink(t, log, "s00", linkOf(t, log, "s01"))
	secret := filepath.Join(root, "secret.jsonl")
	require.NoError(t, os.WriteFile(secret, []byte(`{"run_id":"x","sample_id":"s02","epoch":0,"events":[{"kind":"note","name":"SECRET-TOKEN"}]}`+"\n"), 0o600))
	relink(t, log, "s02", secret+"#0")

	code, out, errs := cli("trace", log, "s00", "0")
	require.NotZero(t, code, out)
	require.Contains(t, errs, `is "s01" epoch 0's, not this record's`)
	code, out, errs = cli("trace", log, "s01", "0")
	require.Zero(t, code, errs)
	require.Contains(t, out, "s01")

	merged := filepath.Join(dir, "merged.jsonl")
	code, _, errs = cli("merge", "-o", merged, log)
	require.Zero(t, code, errs)
	require.Contains(t, errs, "not this record's")
	store, err := os.ReadFile(filepath.Join(dir, "merged.traces.jsonl"))
	require.NoError(t, err)
	require.NotContains(t, string(store), "SECRET-TOKEN", "merge copied a file outside the log's directory")
	for _, id := range []string{"s00", "s02"} {
		require.Empty(t, linkOf(t, merged, id), "%s keeps no link to a transcript that is not its own", id)
	}
	require.NotEmpty(t, linkOf(t, merged, "s01"))
	require.True(t, strings.HasPrefix(linkOf(t, merged, "s01"), "merged.traces.jsonl#"))
}
