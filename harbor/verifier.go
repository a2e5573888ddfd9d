package harbor

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/driver"
)

// Verifier is the judge of a Harbor task: it copies the task's tests/
// to /tests in the episode's sandbox (where the agent worked), runs
// /tests/test.sh there (under bash when the image has it, else sh) with
// [verifier] env and timeout_sec, and reads the reward the script wrote:
// /logs/verifier/reward.json if there is one, else reward.txt, as
// Harbor's verifier does. The episode passes when the reward is at least
// PassAt; the score is the reward, clipped to [0, 1].
//
// It fails closed: no reward file, an empty or malformed one, a reward
// that is not a finite number, or a test.sh that timed out is an error of
// the episode (permanent, so not retried: it says the task or its
// environment is broken), never a failure of the agent.
type Verifier[O any] struct {
	// PassAt is the reward at or above which the episode passes; default
	// 1 (Harbor's "resolved").
	PassAt float64
}

// Judge implements judge.Judge.
func (v Verifier[O]) Judge(ctx context.Context, ep *harness.Episode[Task], _ O) (judge.Verdict, error) {
	t := ep.Sample.Input
	if ep.Sandbox == nil {
		return judge.Verdict{}, judge.Permanent(errors.New("harbor: the verifier needs the episode's sandbox (set the eval's Sandbox to harbor.Spec)"))
	}
	if err := upload(ctx, ep, filepath.Join(t.Dir, "tests"), TestsDir); err != nil {
		return judge.Verdict{}, err
	}
	script := fmt.Sprintf(`rm -rf %[1]s && mkdir -p %[1]s && if command -v bash >/dev/null 2>&1; then exec bash %[2]s/test.sh; else exec sh %[2]s/test.sh; fi`, VerifierDir, TestsDir)
	res, err := run(ctx, ep, "verifier", sandbox.Cmd{Args: []string{"sh", "-c", script}, Env: t.Config.Verifier.Env, Timeout: t.VerifierTimeout()})
	if err != nil {
		return judge.Verdict{}, fmt.Errorf("harbor: verifier of %s: %w", t.Name, err)
	}
	if res.TimedOut {
		return judge.Verdict{}, judge.Permanent(fmt.Errorf("harbor: test.sh of %s ran past its timeout (%v)", t.Name, t.VerifierTimeout()))
	}
	read := fmt.Sprintf(`for f in reward.json reward.txt; do if [ -f %[1]s/$f ]; then echo $f; exec cat %[1]s/$f; fi; done; exit 3`, VerifierDir)
	out, err := ep.Sandbox.Exec(ctx, sandbox.Cmd{Args: []string{"sh", "-c", read}, Timeout: time.Minute})
	if err != nil {
		return judge.Verdict{}, fmt.Errorf("harbor: reading the reward of %s: %w", t.Name, err)
	}
	if out.ExitCode == 3 {
		return judge.Verdict{}, judge.Permanent(fmt.Errorf("harbor: test.sh of %s wrote no reward (neither %s/reward.json nor reward.txt); it exited %d: %s",
			t.Name, VerifierDir, res.ExitCode, tail(res.Stdout, res.Stderr)))
	}
	if out.ExitCode != 0 {
		return judge.Verdict{}, fmt.Errorf("harbor: reading the reward of %s: exit %d: %s", t.Name, out.ExitCode, tail(out.Stdout, out.Stderr))
	}
	name, data, _ := bytes.Cut(out.Stdout, []byte("\n"))
	reward, scores, err := ParseReward(string(name), data)
	if err != nil {
		return judge.Verdict{}, judge.Permanent(fmt.Errorf("harbor: %s of %s: %w", name, t.Name, err))
	}
	passAt := v.PassAt
	if passAt == 0 {
		passAt = 1
	}
	verdict := judge.Verdict{Pass: reward >= passAt, Score: min(max(reward, 0), 1), Scores: scores,
		Reason: fmt.Sprintf("reward %g (%s)", reward, name)}
	if !verdict.Pass {
		verdict.Reason += ": " + tail(res.Stdout, res.Stderr)
	}
	return verdict, nil
}

// ParseReward decodes a reward file: reward.txt holds one number;
// reward.json an object of named numbers, whose reward is "reward", or
// its only entry. The scores are the JSON's entries (nil for a text
// file).
func ParseReward(name string, data []byte) (reward float64, scores map[string]float64, err error) {
	text := strings.TrimSpace(string(data))
	if text == "" {
		return 0, nil, errors.New("empty reward file")
	}
	switch name {
	case "reward.txt":
		r, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsInf(r, 0) || math.IsNaN(r) {
			return 0, nil, fmt.Errorf("reward %q is not a finite number", clip(text, 100))
		}
		return r, nil, nil
	case "reward.json":
		var raw map[string]any
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			return 0, nil, fmt.Errorf("not a JSON object of numbers: %w", err)
		}
		if dec.More() {
			return 0, nil, errors.New("more than one JSON value")
		}
		if len(raw) == 0 {
			return 0, nil, errors.New("no reward in the JSON object")
		}
		scores = make(map[string]float64, len(raw))
		for k, v := range raw {
			n, ok := v.(json.Number)
			if !ok {
				return 0, nil, fmt.Errorf("%q = %s is not a number", k, clip(fmt.Sprint(v), 100))
			}
			f, err := n.Float64()
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return 0, nil, fmt.Errorf("%q = %s is not a finite number", k, n)
			}
			scores[k] = f
		}
		if r, ok := scores["reward"]; ok {
			return r, scores, nil
		}
		if len(scores) == 1 {
			for _, r := range scores {
				return r, scores, nil
			}
		}
		return 0, nil, fmt.Errorf("no \"reward\" among %d entries (%s)", len(scores), strings.Join(slices.Sorted(maps.Keys(scores)), ", "))
	}
	return 0, nil, fmt.Errorf("unknown reward file %q", name)
}

// upload copies the host directory src to the absolute path dst in the
// episode's sandbox (outside its workspace, where the file API does not
// reach), as a tar stream into tar -x.
func upload(ctx context.Context, ep *harness.Episode[Task], src, dst string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if _, err := driver.AddTree(tw, src, ""); err != nil {
		return judge.Permanent(fmt.Errorf("harbor: %w", err))
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := ep.Sandbox.Exec(ctx, sandbox.Cmd{
		Args:  []string{"sh", "-c", `rm -rf "$0" && mkdir -p "$0" && tar -x -f - -C "$0"`, dst},
		Stdin: buf.Bytes(), Timeout: 5 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("harbor: copying %s to %s: %w", src, dst, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("harbor: copying %s to %s: exit %d: %s", src, dst, res.ExitCode, tail(res.Stdout, res.Stderr))
	}
	return nil
}

// run runs cmd in the episode's sandbox and records it in the
// transcript, as harness.Command does.
func run(ctx context.Context, ep *harness.Episode[Task], name string, cmd sandbox.Cmd) (sandbox.Result, error) {
	start := time.Now()
	res, err := ep.Sandbox.Exec(ctx, cmd)
	out := harness.CommandOutput{Stdout: string(res.Stdout), Stderr: string(res.Stderr), ExitCode: res.ExitCode, TimedOut: res.TimedOut, Truncated: res.Truncated}
	ev := harness.Event{Time: start, Kind: "command", Name: name, Duration: time.Since(start)}
	ev.Input, _ = json.Marshal(cmd.Args)
	ev.Output, _ = json.Marshal(out)
	if err != nil {
		ev.Error = err.Error()
	}
	ep.AddEvent(ev)
	return res, err
}

// tail is the end of a command's output, for a reason.
func tail(stdout, stderr []byte) string {
	s := strings.TrimSpace(string(stdout) + "\n" + string(stderr))
	if len(s) > 500 {
		s = "…" + s[len(s)-500:]
	}
	if s == "" {
		return "(no output)"
	}
	return s
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
