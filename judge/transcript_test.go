package judge_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./judge -run %s -update to create it", t.Name())
	require.Empty(t, cmp.Diff(string(want), got), "%s (-want +got); go test ./judge -update rewrites it", path)
}

// promptOf runs a rubric with opts over ep and returns the prompt it sent.
func promptOf(t *testing.T, opts *judge.RubricOptions[string], ep *harness.Episode[string]) string {
	t.Helper()
	var prompt string
	m := judge.ModelFunc(func(_ context.Context, req judge.Request) (judge.Response, error) {
		prompt = req.Messages[0].Content
		return judge.Response{Text: "Fine.\nGRADE: C", StopReason: judge.StopEnd}, nil
	})
	_, err := judge.Rubric[string, string](m, opts).Judge(context.Background(), ep, "Paris")
	require.NoError(t, err)
	return prompt
}

func episode(events ...harness.Event) *harness.Episode[string] {
	ep := &harness.Episode[string]{Sample: dataset.Sample[string]{ID: "q1", Input: "What is the capital of France?"}}
	for _, ev := range events {
		ev.Time = time.Unix(0, 0)
		ep.AddEvent(ev)
	}
	return ep
}

// TestRubricPromptWithoutTranscript: the default prompt of a rubric that
// does not ask for the transcript is the one it was before the
// transcript existed (the golden file was written by that code).
func TestRubricPromptWithoutTranscript(t *testing.T) {
	t.Parallel()
	ep := episode(harness.Event{Kind: "tool", Name: "search", Input: json.RawMessage(`{"q":"capital of France"}`)})
	golden(t, "rubric_default", promptOf(t, &judge.RubricOptions[string]{Reference: func(string) string { return "Paris" }}, ep))
}

func TestRubricPromptWithTranscript(t *testing.T) {
	t.Parallel()
	ep := episode(
		harness.Event{Kind: "model", Name: "chat", Input: json.RawMessage(`{"messages":[{"role":"user","content":"What is the capital of France?"}]}`),
			Output: json.RawMessage(`{"tool_call":"search"}`), Usage: harness.Usage{Model: "m", InputTokens: 20}},
		harness.Event{Kind: "tool", Name: "search", Input: json.RawMessage(`{"q": "capital of France"}`),
			Output: json.RawMessage(`"` + strings.Repeat("Paris is the capital and largest city of France. ", 8) + `"`)},
		harness.Event{Kind: "command", Name: "curl", Input: json.RawMessage(`["curl","-s","https://example.org"]`), Error: "exit status 6:\ncould not resolve host"},
		harness.Event{Kind: "judge", Name: "rubric", Input: json.RawMessage(`"an earlier judge's prompt"`)},
		harness.Event{Kind: "note", Output: json.RawMessage(`not json`)},
	)
	golden(t, "rubric_transcript", promptOf(t, &judge.RubricOptions[string]{Transcript: &judge.TranscriptOptions{}}, ep))
}

// TestRubricTranscriptCut: a transcript over its budget keeps its start
// and its end, says what it left out, and fits the budget.
func TestRubricTranscriptCut(t *testing.T) {
	t.Parallel()
	var events []harness.Event
	for i := range 60 {
		events = append(events, harness.Event{Kind: "tool", Name: "read_file",
			Input:  json.RawMessage(fmt.Sprintf(`{"path":"src/file%02d.go"}`, i)),
			Output: json.RawMessage(fmt.Sprintf(`"package main // file %d: %s"`, i, strings.Repeat("x", 300)))})
	}
	opts := &judge.TranscriptOptions{MaxTokens: 400, MaxCallBytes: 60}
	golden(t, "rubric_transcript_cut", promptOf(t, &judge.RubricOptions[string]{Transcript: opts}, episode(events...)))

	got := judge.RenderTranscript(events, opts)
	lines := strings.Split(got, "\n")
	require.True(t, strings.HasPrefix(lines[0], "(This transcript is shortened to fit its budget of 400 tokens: "), lines[0])
	require.True(t, strings.HasPrefix(lines[1], "1. tool read_file "), "the start is kept")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "60. tool read_file "), "the end is kept")
	require.Contains(t, got, " events left out (")
	require.LessOrEqual(t, len(got)-len(lines[0]), 400*4, "the events shown fit the budget")

	require.NotContains(t, judge.RenderTranscript(events[:3], opts), "shortened", "a transcript within its budget is whole")
	only := judge.RenderTranscript(append(events[:2:2], harness.Event{Kind: "judge", Name: "j"}), &judge.TranscriptOptions{Kinds: []string{"judge"}})
	require.Equal(t, "1. judge j", only)
	rejudged := judge.RenderTranscript([]harness.Event{{Kind: "note", Name: "rejudged", Input: json.RawMessage(`{"run_id":"r"}`)}}, nil)
	require.Contains(t, rejudged, "Not available", "a rejudged output has no transcript of its own, and the grader is told")
}
