package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/harness/atif"
)

// proctor trace -format atif prints an episode's transcript as an ATIF
// trajectory that imports back to the transcript -json prints.
func TestTraceFormatATIF(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	runEval(t, log, 4)
	code, out, errs := cli("trace", "-format", "atif", log, "s01", "1")
	require.Zero(t, code, errs)
	tr, err := atif.Decode([]byte(out))
	require.NoError(t, err, out)
	require.Equal(t, "ATIF-v1.4", tr.SchemaVersion)
	require.Len(t, tr.Steps, 1)
	require.Equal(t, int64(7), *tr.Steps[0].Metrics.PromptTokens)

	code, out, errs = cli("trace", "-json", log, "s01", "1")
	require.Zero(t, code, errs)
	var want struct {
		Trace transcript `json:"trace"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &want))
	got, err := atif.Events(tr)
	require.NoError(t, err)
	if diff := cmp.Diff(want.Trace.Events, got); diff != "" {
		t.Fatalf("(-trace -json +imported ATIF):\n%s", diff)
	}

	code, _, errs = cli("trace", "-format", "yaml", log, "s01")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "-format must be text, json or atif")
}
