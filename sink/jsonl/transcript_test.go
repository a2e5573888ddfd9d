package jsonl_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink/jsonl"
)

func TestResolveTranscript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "run.traces.jsonl")
	w, err := jsonl.Create(store, nil)
	require.NoError(t, err)
	_, err = w.WriteLine([]byte(`{"first":true}`))
	require.NoError(t, err)
	off, err := w.WriteLine([]byte(`{"second":true}`))
	require.NoError(t, err)
	require.NoError(t, w.Close(context.Background()))
	log := filepath.Join(dir, "run.jsonl")

	for _, link := range []string{
		"run.traces.jsonl#" + itoa(off),     // relative to the log: what new logs hold
		"./run.traces.jsonl#" + itoa(off),   // the same, spelled out
		store + "#" + itoa(off),             // absolute: what older logs hold
		"file://" + store + "#" + itoa(off), // a URL of the same file
	} {
		path, o, err := jsonl.ResolveTranscript(log, link)
		require.NoError(t, err, link)
		require.Equal(t, store, path, link)
		require.Equal(t, off, o, link)
		line, err := jsonl.ReadLineAt(path, o)
		require.NoError(t, err)
		require.Equal(t, `{"second":true}`, string(line))
	}

	// Relative links survive moving the runs directory; nested ones too.
	path, _, err := jsonl.ResolveTranscript("/moved/runs/run.jsonl", "traces/run.traces.jsonl#7")
	require.NoError(t, err)
	require.Equal(t, filepath.FromSlash("/moved/runs/traces/run.traces.jsonl"), path)

	for _, bad := range []string{"", "no-offset", "#12", "x#", "x#-1", "x#1e3", "x#12a"} {
		_, _, err := jsonl.ResolveTranscript(log, bad)
		require.ErrorContains(t, err, "is not a transcript link (PATH#OFFSET)", bad)
	}
}

func itoa(n int64) string { return fmt.Sprint(n) }

// FuzzResolveTranscript: any link either fails with an error or resolves to a
// path and the offset it ends with.
func FuzzResolveTranscript(f *testing.F) {
	for _, s := range []string{"run.traces.jsonl#12", "/abs/t.jsonl#0", "file:///t#3", "#", "a#b#4", "x#-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, link string) {
		path, off, err := jsonl.ResolveTranscript("/runs/run.jsonl", link)
		if err != nil {
			return
		}
		if off < 0 || path == "" || !filepath.IsAbs(path) {
			t.Fatalf("ResolveTrace(%q) = %q, %d", link, path, off)
		}
	})
}

// TestTranscriptLink: one parser for every reader of a link (the engine's
// ReadTranscript, the trace command, the viewer, merge, export, reuse), and
// String writes what it reads. Before, three parsers disagreed on "#12"
// (an empty path), "x#-1" (a negative offset) and "file://" links.
func TestTranscriptLink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want jsonl.TranscriptLink // zero: not a link
	}{
		{"run.traces.jsonl#12", jsonl.TranscriptLink{Path: "run.traces.jsonl", Offset: 12}},
		{"/abs/run.traces.jsonl#0", jsonl.TranscriptLink{Path: filepath.FromSlash("/abs/run.traces.jsonl")}},
		{"file:///abs/t.jsonl#3", jsonl.TranscriptLink{Path: filepath.FromSlash("/abs/t.jsonl"), Offset: 3}},
		{"a#b#4", jsonl.TranscriptLink{Path: "a#b", Offset: 4}},
		{"#12", jsonl.TranscriptLink{}},
		{"file://#12", jsonl.TranscriptLink{}},
		{"x#-1", jsonl.TranscriptLink{}},
		{"x#", jsonl.TranscriptLink{}},
		{"x", jsonl.TranscriptLink{}},
		{"x#1.5", jsonl.TranscriptLink{}},
		{"x#99999999999999999999", jsonl.TranscriptLink{}},
	} {
		got, err := jsonl.ParseTranscriptLink(tc.in)
		if tc.want == (jsonl.TranscriptLink{}) {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
		again, err := jsonl.ParseTranscriptLink(got.String())
		require.NoError(t, err)
		require.Equal(t, got, again, "String writes what Parse reads")
	}
	require.Equal(t, jsonl.TranscriptLink{Path: filepath.Join("/runs", "t.jsonl"), Offset: 5},
		jsonl.TranscriptLink{Path: "t.jsonl", Offset: 5}.In("/runs"))
	require.Equal(t, jsonl.TranscriptLink{Path: "/abs/t.jsonl", Offset: 5},
		jsonl.TranscriptLink{Path: "/abs/t.jsonl", Offset: 5}.In("/runs"), "an absolute path stays")
}
