package scorer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
)

// ExitCode runs a test command in the episode's sandbox and passes when it
// exits 0: the agent's work is judged by the tests it must make pass. cmd
// builds the command from the sample's input.
//
// A non-zero exit (127 for a command not found, -1 for one killed at its
// Cmd.Timeout) fails, with the exit code and the tails of stdout and stderr
// as the reason and Scores["exit_code"]. An episode with no sandbox is an
// error (the eval is misconfigured), and so is any error of Exec: the
// sandbox failed, not the agent (the engine classifies one wrapping
// sandbox.ErrUnavailable as a sandbox fault and retries the episode).
//
// Each run is recorded as a transcript event of Kind "command", Name "exit_code",
// with the command as Input and the exit code and output tails as Output.
func ExitCode[T, O any](cmd func(T) sandbox.Cmd) judge.Judge[T, O] {
	return judge.Func[T, O](func(ctx context.Context, ep *harness.Episode[T], _ O) (judge.Verdict, error) {
		if ep.Sandbox == nil {
			return judge.Verdict{}, errors.New("scorer: exit code: the episode has no sandbox (set eval.Config.Sandbox)")
		}
		c := cmd(ep.Sample.Input)
		if len(c.Args) == 0 {
			return judge.Verdict{}, errors.New("scorer: exit code: empty command")
		}
		start := time.Now()
		res, err := ep.Sandbox.Exec(ctx, c)
		in, _ := json.Marshal(struct {
			Args    []string      `json:"args"`
			Dir     string        `json:"dir,omitempty"`
			Timeout time.Duration `json:"timeout_ns,omitempty"`
		}{c.Args, c.Dir, c.Timeout})
		ev := harness.Event{Time: start, Kind: "command", Name: "exit_code", Input: in, Duration: time.Since(start)}
		if err != nil {
			ev.Error = err.Error()
			ep.AddEvent(ev)
			return judge.Verdict{}, fmt.Errorf("scorer: exit code: %w", err)
		}
		stdout, stderr := tail(res.Stdout), tail(res.Stderr)
		ev.Output, _ = json.Marshal(struct {
			ExitCode int    `json:"exit_code"`
			TimedOut bool   `json:"timed_out,omitempty"`
			Stdout   string `json:"stdout,omitempty"`
			Stderr   string `json:"stderr,omitempty"`
		}{res.ExitCode, res.TimedOut, stdout, stderr})
		ep.AddEvent(ev)
		if res.ExitCode == 0 && !res.TimedOut {
			return judge.Verdict{Pass: true, Score: 1, Scores: map[string]float64{"exit_code": 0}}, nil
		}
		var b strings.Builder
		fmt.Fprintf(&b, "exit code: %s exited %d", strings.Join(c.Args, " "), res.ExitCode)
		if res.TimedOut {
			fmt.Fprintf(&b, " (timed out after %v)", c.Timeout)
		}
		if stdout != "" {
			b.WriteString("\n--- stdout (tail)\n" + stdout)
		}
		if stderr != "" {
			b.WriteString("\n--- stderr (tail)\n" + stderr)
		}
		return judge.Verdict{Reason: b.String(), Scores: map[string]float64{"exit_code": float64(res.ExitCode)}}, nil
	})
}

// tail returns the last lines of out, at most 20 lines and 2 KiB.
func tail(out []byte) string {
	const maxBytes, maxLines = 2048, 20
	// Cut the bytes before converting: out may be megabytes.
	out = bytes.TrimRight(out, "\n")
	cut := false
	if len(out) > maxBytes+4 { // the cut below may skip up to 3 continuation bytes
		out, cut = out[len(out)-maxBytes-4:], true
	}
	s := string(out)
	if len(s) > maxBytes {
		i := len(s) - maxBytes
		for i < len(s) && s[i]&0xC0 == 0x80 {
			i++
		}
		s, cut = s[i:], true
	}
	if lines := strings.Split(s, "\n"); len(lines) > maxLines {
		s, cut = strings.Join(lines[len(lines)-maxLines:], "\n"), true
	}
	if cut {
		s = "…\n" + s
	}
	return s
}
