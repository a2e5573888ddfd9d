package eval_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// TestReadTranscriptParsesLinksAsEveryReader: ReadTranscript reads links as
// jsonl.ParseTranscriptLink does, as the trace command and the viewer do.
// It used to take "file://" as part of a relative path, and a negative
// offset as an offset to seek to.
func TestReadTranscriptParsesLinksAsEveryReader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "run.traces.jsonl")
	w, err := jsonl.Create(store, nil)
	require.NoError(t, err)
	want := harness.Transcript{RunID: "r", SampleID: "s", Events: []harness.Event{{Kind: "note", Name: "hello"}}}
	b, err := json.Marshal(want)
	require.NoError(t, err)
	off, err := w.WriteLine(b)
	require.NoError(t, err)
	require.NoError(t, w.Close(context.Background()))

	for _, link := range []string{
		jsonl.TranscriptLink{Path: "run.traces.jsonl", Offset: off}.String(),
		jsonl.TranscriptLink{Path: store, Offset: off}.String(),
		"file://" + filepath.ToSlash(store) + "#0",
	} {
		got, err := eval.ReadTranscript(link, dir)
		require.NoError(t, err, link)
		require.Equal(t, "s", got.SampleID, link)
	}
	for _, link := range []string{"run.traces.jsonl#-1", "#0", "run.traces.jsonl"} {
		_, err := eval.ReadTranscript(link, dir)
		require.ErrorContains(t, err, "is not a transcript link", link)
	}
}
