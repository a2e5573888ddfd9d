package atif_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/harness/atif"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

func readExample(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/rfc-example.json")
	require.NoError(t, err)
	return data
}

// jsonEqual compares two JSON documents as values.
func jsonEqual(t *testing.T, want, got []byte) {
	t.Helper()
	var w, g any
	require.NoError(t, json.Unmarshal(want, &w))
	require.NoError(t, json.Unmarshal(got, &g))
	if diff := cmp.Diff(w, g); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestImportRecordsStepsAndUsage(t *testing.T) {
	t.Parallel()
	ep := &harness.Episode[string]{Sample: dataset.Sample[string]{ID: "q"}}
	require.NoError(t, atif.Import(ep, readExample(t), true))
	evs := ep.Events()
	require.Len(t, evs, 5, "the header and four steps")
	require.Equal(t, "note", evs[0].Kind)
	require.Equal(t, []string{"message", "model", "model", "message"}, []string{evs[1].Kind, evs[2].Kind, evs[3].Kind, evs[4].Kind})
	require.Equal(t, "user", evs[1].Name)
	require.Equal(t, time.Date(2025, 10, 11, 10, 30, 2, 0, time.UTC), evs[2].Time.UTC())
	require.Equal(t, harness.Usage{InputTokens: 520, OutputTokens: 80, CacheReadTokens: 200, CostUSD: 0.00045, Model: "gemini-2.5-flash"}, evs[2].Usage)
	require.Equal(t, harness.Usage{InputTokens: 600, OutputTokens: 44, ReasoningTokens: 12, CacheWriteTokens: 30, CostUSD: 0.00033, Model: "gemini-2.5-flash"}, evs[3].Usage,
		"a step without a model is the agent's model's; reasoning and cache writes from the metrics' extra")
	u := ep.Usage()
	require.Equal(t, int64(1120), u.InputTokens)
	require.Equal(t, int64(124), u.OutputTokens)
	require.InDelta(t, 0.00078, u.CostUSD, 1e-12)

	// Behind the gateway the calls are counted already: no usage twice.
	ep = &harness.Episode[string]{}
	require.NoError(t, atif.Import(ep, readExample(t), false))
	require.Zero(t, ep.Usage().InputTokens)
	require.Len(t, ep.Events(), 5)
}

// A trajectory with only final_metrics still tells the episode's cost.
func TestImportFinalMetricsOnly(t *testing.T) {
	t.Parallel()
	doc := `{"schema_version":"ATIF-v1.2","session_id":"s","agent":{"name":"a","version":"1","model_name":"m"},
		"steps":[{"step_id":1,"source":"agent","message":"done"}],
		"final_metrics":{"total_prompt_tokens":100,"total_completion_tokens":7,"total_cost_usd":0.01}}`
	ep := &harness.Episode[string]{}
	require.NoError(t, atif.Import(ep, []byte(doc), true))
	require.Equal(t, harness.Usage{InputTokens: 100, OutputTokens: 7, CostUSD: 0.01, Model: "m"}, ep.Usage())
}

// Export ∘ Import is the identity on a trajectory: every field ATIF has
// survives.
func TestTrajectoryRoundTrip(t *testing.T) {
	t.Parallel()
	data := readExample(t)
	tr, err := atif.Decode(data)
	require.NoError(t, err)
	evs, err := atif.Events(tr)
	require.NoError(t, err)
	back, err := atif.Export(&harness.Transcript{RunID: "r", SampleID: "q", Events: evs})
	require.NoError(t, err)
	got, err := json.Marshal(back)
	require.NoError(t, err)
	jsonEqual(t, data, got)
}

// Import ∘ Export is the identity on a transcript: its events, of any
// kind, come back as they were.
func TestTranscriptRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 9, 0, 0, 123456789, time.UTC)
	tr := &harness.Transcript{RunID: "run", SampleID: "q17", Epoch: 2, Attempt: 1, Events: []harness.Event{
		{Time: at, Kind: "model", Name: "chat gpt-4o", Input: json.RawMessage(`{"messages":[{"role":"user","content":"hi"}]}`),
			Output: json.RawMessage(`{"choices":[{"message":{"content":"hello"}}]}`), Duration: 1500 * time.Millisecond,
			Usage: harness.Usage{InputTokens: 10, OutputTokens: 2, CacheReadTokens: 4, CacheWriteTokens: 1, ReasoningTokens: 1, CostUSD: 0.001, Model: "gpt-4o"}},
		{Time: at.Add(time.Second), Kind: "command", Name: "make", Input: json.RawMessage(`["make","test"]`),
			Output: json.RawMessage(`{"stdout":"ok","stderr":"","exit_code":0}`), Duration: time.Second},
		{Time: at.Add(2 * time.Second), Kind: "tool", Name: "search", Input: json.RawMessage(`{"q":"x"}`), Output: json.RawMessage(`"found"`), Error: "partial"},
		{Kind: "note", Name: "retry", Input: json.RawMessage(`"once more"`)},
		{Time: at.Add(3 * time.Second), Kind: "judge", Name: "rubric", Output: json.RawMessage(`{"pass":true}`)},
	}}
	exported, err := atif.Export(tr)
	require.NoError(t, err)
	data, err := json.Marshal(exported)
	require.NoError(t, err)
	decoded, err := atif.Decode(data)
	require.NoError(t, err, "Export writes valid ATIF: %s", data)
	require.Len(t, decoded.Steps, 5)
	require.Equal(t, "command:make", decoded.Steps[1].ToolCalls[0].FunctionName, "a command is a tool call")
	require.Equal(t, `{"stdout":"ok","stderr":"","exit_code":0}`, *decoded.Steps[1].Observation.Results[0].Content)
	require.Equal(t, int64(10), *decoded.Steps[0].Metrics.PromptTokens)
	evs, err := atif.Events(decoded)
	require.NoError(t, err)
	if diff := cmp.Diff(tr.Events, evs); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	ok := `{"schema_version":"ATIF-v1.4","session_id":"s","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"user","message":"m"}]}`
	_, err := atif.Decode([]byte(ok))
	require.NoError(t, err)
	for doc, want := range map[string]string{
		`{"schema_version":"1.4","session_id":"s","agent":{"name":"a","version":"1"},"steps":[]}`:                                                `schema_version "1.4" is not ATIF-v1.x`,
		`{"schema_version":"ATIF-v1.4","agent":{"name":"a","version":"1"},"steps":[]}`:                                                           "no session_id",
		`{"schema_version":"ATIF-v1.4","session_id":"s","agent":{"name":"a"},"steps":[]}`:                                                        "agent needs a name and a version",
		`{"schema_version":"ATIF-v1.4","session_id":"s","agent":{"name":"a","version":"1"}}`:                                                     "no steps",
		`{"schema_version":"ATIF-v1.4","session_id":"s","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"bot","message":""}]}`: `source "bot"`,
		`{"schema_version":"ATIF-v1.4","session_id":"s","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"user"}]}`:             "message are required",
		`{"schema_version":"ATIF-v1.4","session_id":"s","agent":{"name":"a","version":"1"},"steps":[],"rl":1}`:                                   `unknown field "rl"`,
		ok + ` {}`: "more than one JSON value",
		`{"schema_version":"ATIF-v1.4","session_id":"s","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"agent","message":"","tool_calls":[{"tool_call_id":"c","function_name":"f","arguments":[1]}]}]}`: "arguments must be an object",
		`{"schema_version":"ATIF-v1.4","session_id":"s","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"user","message":"","timestamp":"yesterday"}]}`:                                                  "timestamp",
	} {
		_, err := atif.Decode([]byte(doc))
		require.ErrorContains(t, err, want, doc)
	}
}

// An agent CLI's trajectory is read from its sandbox after it ran.
func TestImportFileFromTheSandbox(t *testing.T) {
	t.Parallel()
	sb, err := sandbox.Open(context.Background(), (&sandboxtest.Fake{}).Provider(), sandbox.Spec{})
	require.NoError(t, err)
	t.Cleanup(func() { sb.Close() })
	require.NoError(t, sb.WriteFile(context.Background(), "out/trajectory.json", readExample(t), 0o644))
	ep := &harness.Episode[string]{Sandbox: sb}
	require.NoError(t, atif.ImportFile(context.Background(), ep, "out/trajectory.json", true))
	require.Equal(t, int64(124), ep.Usage().OutputTokens)
	require.ErrorContains(t, atif.ImportFile(context.Background(), ep, "missing.json", true), "atif:")
}
