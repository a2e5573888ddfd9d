package harness

import (
	"context"
	"encoding/json"
	"errors"
	"time"
	"unsafe"

	"github.com/proctor-evals/proctor/sandbox"
)

// Command is a harness that runs an external agent CLI in the episode's
// sandbox, e.g. `my-agent --task task.md`. Its output is the command's
// result: a non-zero exit is the agent's failure for the judge to weigh,
// not an error; only a sandbox fault is.
type Command[T any] struct {
	// Cmd builds the command for an episode.
	Cmd func(ep *Episode[T]) sandbox.Cmd
	// Files, when set, are written into the sandbox before the command runs
	// (for example the task statement).
	Files func(ep *Episode[T]) map[string][]byte
}

// CommandOutput is what a Command harness returns.
type CommandOutput struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// Truncated: the command wrote more than the sandbox keeps
	// (sandbox.Limits.OutputBytes) and the rest was discarded.
	Truncated bool `json:"truncated,omitempty"`
}

// Run writes the files, runs the command and records it in the transcript.
func (c Command[T]) Run(ctx context.Context, ep *Episode[T]) (CommandOutput, error) {
	if ep.Sandbox == nil {
		return CommandOutput{}, errors.New("harness: Command needs a sandbox provider in the eval's config")
	}
	if c.Files != nil {
		for name, data := range c.Files(ep) {
			if err := ep.Sandbox.WriteFile(ctx, name, data, 0o644); err != nil {
				return CommandOutput{}, err
			}
		}
	}
	cmd := c.Cmd(ep)
	start := time.Now()
	res, err := ep.Sandbox.Exec(ctx, cmd)
	// The output can be megabytes (up to the sandbox's cap per stream):
	// the strings share the Result's bytes, which nothing else holds or
	// writes, instead of copying them.
	out := CommandOutput{Stdout: noCopy(res.Stdout), Stderr: noCopy(res.Stderr), ExitCode: res.ExitCode,
		TimedOut: res.TimedOut, Truncated: res.Truncated}
	ev := Event{Time: start, Kind: "command", Name: firstArg(cmd.Args), Duration: time.Since(start)}
	ev.Input, _ = json.Marshal(cmd.Args)
	ev.Output, _ = json.Marshal(out)
	if err != nil {
		ev.Error = err.Error()
	}
	ep.AddEvent(ev)
	return out, err
}

// noCopy returns b as a string without copying it; b must never be
// written again.
func noCopy(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
