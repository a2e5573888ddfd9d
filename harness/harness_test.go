package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/judging"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

func TestEpisodeRecordsConcurrently(t *testing.T) {
	t.Parallel()
	ep := &harness.Episode[string]{}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			ep.AddEvent(harness.Event{Kind: "model", Name: fmt.Sprint(i), Usage: harness.Usage{InputTokens: 10, OutputTokens: 1, CostUSD: 0.25}})
			ep.AddUsage(harness.Usage{InputTokens: 1})
		})
	}
	wg.Wait()
	require.Equal(t, harness.Usage{InputTokens: 550, OutputTokens: 50, CostUSD: 12.5}, ep.Usage())
	events := ep.Events()
	require.Len(t, events, 50)
	for _, ev := range events {
		require.False(t, ev.Time.IsZero(), "a zero time is stamped")
	}
	events[0].Name = "changed"
	require.NotEqual(t, "changed", ep.Events()[0].Name, "Events returns a copy")
}

type task struct{ Statement string }

func TestCommandRunsTheAgentInTheSandbox(t *testing.T) {
	t.Parallel()
	fake := &sandboxtest.Fake{Exec: func(ctx context.Context, sb sandboxtest.Files, cmd sandbox.Cmd) (sandbox.Result, error) {
		statement, err := sb.ReadFile(ctx, "task.md")
		if err != nil {
			return sandbox.Result{}, err
		}
		if strings.Contains(string(statement), "crash") {
			return sandbox.Result{Stderr: []byte("agent crashed"), ExitCode: 2}, nil
		}
		return sandbox.Result{Stdout: []byte("did: " + string(statement) + " with " + strings.Join(cmd.Args, " "))}, nil
	}}
	h := harness.Command[task]{
		Cmd: func(ep *harness.Episode[task]) sandbox.Cmd {
			return sandbox.Cmd{Args: []string{"agent", "--task", "task.md"}}
		},
		Files: func(ep *harness.Episode[task]) map[string][]byte {
			return map[string][]byte{"task.md": []byte(ep.Sample.Input.Statement)}
		},
	}
	run := func(statement string) (harness.CommandOutput, *harness.Episode[task], error) {
		sb, err := sandbox.Open(context.Background(), fake.Provider(), sandbox.Spec{})
		require.NoError(t, err)
		defer sb.Close()
		ep := &harness.Episode[task]{Sandbox: sb}
		ep.Sample.Input.Statement = statement
		out, err := h.Run(context.Background(), ep)
		return out, ep, err
	}

	out, ep, err := run("fix the bug")
	require.NoError(t, err)
	require.Equal(t, harness.CommandOutput{Stdout: "did: fix the bug with agent --task task.md"}, out)
	events := ep.Events()
	require.Len(t, events, 1)
	require.Equal(t, "command", events[0].Kind)
	require.Equal(t, "agent", events[0].Name)
	var args []string
	require.NoError(t, json.Unmarshal(events[0].Input, &args))
	require.Equal(t, []string{"agent", "--task", "task.md"}, args)

	out, _, err = run("crash please")
	require.NoError(t, err, "an agent that exits non-zero failed; the sandbox did not")
	require.Equal(t, 2, out.ExitCode)
	require.Equal(t, "agent crashed", out.Stderr)

	_, err = h.Run(context.Background(), &harness.Episode[task]{})
	require.ErrorContains(t, err, "needs a sandbox provider")
}

func TestCommandReportsASandboxFault(t *testing.T) {
	t.Parallel()
	fake := &sandboxtest.Fake{Exec: func(context.Context, sandboxtest.Files, sandbox.Cmd) (sandbox.Result, error) {
		return sandbox.Result{}, fmt.Errorf("container gone: %w", sandbox.ErrUnavailable)
	}}
	sb, err := sandbox.Open(context.Background(), fake.Provider(), sandbox.Spec{})
	require.NoError(t, err)
	defer sb.Close()
	h := harness.Command[task]{Cmd: func(*harness.Episode[task]) sandbox.Cmd { return sandbox.Cmd{Args: []string{"agent"}} }}
	ep := &harness.Episode[task]{Sandbox: sb}
	_, err = h.Run(context.Background(), ep)
	require.True(t, errors.Is(err, sandbox.ErrUnavailable))
	require.Contains(t, ep.Events()[0].Error, "container gone")
}

// An agent that writes without end costs the run the sandbox's output cap
// per stream, and the output says it was cut.
func TestCommandOutputIsCappedAndMarked(t *testing.T) {
	t.Parallel()
	sb, err := sandbox.Open(context.Background(), (&sandboxtest.Fake{}).Provider(), sandbox.Spec{})
	require.NoError(t, err)
	defer sb.Close()
	h := harness.Command[task]{Cmd: func(*harness.Episode[task]) sandbox.Cmd {
		return sandbox.Cmd{Args: []string{"./probe", "yes", "20000000"}} // the Fake's builtin
	}}
	out, err := h.Run(context.Background(), &harness.Episode[task]{Sandbox: sb})
	require.NoError(t, err)
	require.True(t, out.Truncated)
	require.Len(t, out.Stdout, sandbox.DefaultOutputBytes)
}

// TestUsageByRole: usage recorded before the judge's part is the agent's,
// after it the judge's; each part is named by its last named model, and
// Usage is their sum.
func TestUsageByRole(t *testing.T) {
	t.Parallel()
	ep := &harness.Episode[string]{}
	ep.AddEvent(harness.Event{Kind: "model", Usage: harness.Usage{InputTokens: 100, OutputTokens: 10, CostUSD: 0.5, Model: "agent-a"}})
	ep.AddUsage(harness.Usage{InputTokens: 1, CostUSD: 0.25}) // unnamed: the name stays
	judging.Start(ep)
	require.True(t, judging.Started(ep))
	ep.AddEvent(harness.Event{Kind: "judge", Usage: harness.Usage{InputTokens: 20, OutputTokens: 2, CostUSD: 0.125, Model: "grader-b"}})
	agent, judge := ep.UsageByRole()
	if want := (harness.Usage{InputTokens: 101, OutputTokens: 10, CostUSD: 0.75, Model: "agent-a"}); agent != want {
		t.Errorf("agent usage %+v, want %+v", agent, want)
	}
	if want := (harness.Usage{InputTokens: 20, OutputTokens: 2, CostUSD: 0.125, Model: "grader-b"}); judge != want {
		t.Errorf("judge usage %+v, want %+v", judge, want)
	}
	if want := (harness.Usage{InputTokens: 121, OutputTokens: 12, CostUSD: 0.875, Model: "grader-b"}); ep.Usage() != want {
		t.Errorf("total usage %+v, want %+v", ep.Usage(), want)
	}
	if got := ep.Usage().Tokens(); got != 133 {
		t.Errorf("Tokens() = %d, want 133", got)
	}
}
