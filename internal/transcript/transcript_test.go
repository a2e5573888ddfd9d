package transcript_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/transcript"
)

func TestConfine(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "runs")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	log := filepath.Join(dir, "run.jsonl")
	for _, name := range []string{filepath.Join(dir, "run.traces.jsonl"), filepath.Join(dir, "sub", "t.jsonl"), filepath.Join(root, "secret")} {
		require.NoError(t, os.WriteFile(name, []byte("{}\n"), 0o644))
	}
	_, err := transcript.Confine(log, filepath.Join(dir, "run.traces.jsonl"))
	require.NoError(t, err)
	_, err = transcript.Confine(log, filepath.Join(dir, "sub", "t.jsonl"))
	require.NoError(t, err)
	_, err = transcript.Confine(log, filepath.Join(root, "secret"))
	require.ErrorIs(t, err, transcript.ErrOutside)
	_, err = transcript.Confine(log, filepath.Join(dir, "..", "secret"))
	require.ErrorIs(t, err, transcript.ErrOutside)
	if os.Symlink(filepath.Join(root, "secret"), filepath.Join(dir, "link.jsonl")) == nil {
		_, err = transcript.Confine(log, filepath.Join(dir, "link.jsonl"))
		require.ErrorIs(t, err, transcript.ErrOutside, "a symbolic link out of the directory")
	}
}

// FuzzCheck: a line of a trace store is whatever is on disk: Check never
// panics, accepts a transcript of the episode asked for and refuses any
// other.
func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"run_id":"r","sample_id":"q1","epoch":0,"attempt":0,"events":[]}`), "q1", 0)
	f.Add([]byte(`{"sample_id":"q1"}`), "q1", 0)
	f.Add([]byte("\x00\x00"), "", 0)
	f.Add([]byte(`{"sample_id":"q1","epoch":1,"sample_id":"q2"}`), "q2", 1)
	f.Fuzz(func(t *testing.T, line []byte, sampleID string, epoch int) {
		err := transcript.Check(line, sampleID, epoch)
		if err != nil && !errors.Is(err, transcript.ErrOtherEpisode) {
			t.Fatalf("Check: %v does not wrap ErrOtherEpisode", err)
		}
		var tr harness.Transcript
		if json.Unmarshal(line, &tr) == nil && err == nil && (tr.SampleID != sampleID || tr.Epoch != epoch) {
			t.Fatalf("Check accepted %q epoch %d's transcript for %q epoch %d", tr.SampleID, tr.Epoch, sampleID, epoch)
		}
		if !utf8.ValidString(sampleID) {
			return // not a sample ID (dataset.CheckID)
		}
		own, _ := json.Marshal(harness.Transcript{SampleID: sampleID, Epoch: epoch})
		if err := transcript.Check(own, sampleID, epoch); err != nil {
			t.Fatalf("Check refused the episode's own transcript %s: %v", own, err)
		}
	})
}
