package ci_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/eval/report/ci"
	"github.com/proctor-evals/proctor/sink"
)

// unescapeProperty and unescapeData undo GitHub's escaping, as the
// runner does when it parses a workflow command.
func unescape(s string) string {
	return strings.NewReplacer("%0D", "\r", "%0A", "\n", "%3A", ":", "%2C", ",", "%25", "%").Replace(s)
}

type command struct{ level, file, title, msg string }

// parseCommands parses workflow commands as the runner does: a line that
// starts with ::, the command name up to a space, properties split on
// commas up to the next ::, the message after it.
func parseCommands(t *testing.T, out string) []command {
	t.Helper()
	var cmds []command
	for line := range strings.Lines(out) {
		line = strings.TrimSuffix(line, "\n")
		require.True(t, strings.HasPrefix(line, "::"), "a line that is not a command: %q", line)
		rest := line[2:]
		end := strings.Index(rest, "::")
		require.GreaterOrEqual(t, end, 0, "no message separator: %q", line)
		head, msg := rest[:end], rest[end+2:]
		level, props, _ := strings.Cut(head, " ")
		c := command{level: level, msg: unescape(msg)}
		for p := range strings.SplitSeq(props, ",") {
			k, v, ok := strings.Cut(p, "=")
			require.True(t, ok, "property %q of %q", p, line)
			switch k {
			case "title":
				c.title = unescape(v)
			case "file":
				c.file = unescape(v)
			default:
				t.Fatalf("unknown property %q in %q", k, line)
			}
		}
		cmds = append(cmds, c)
	}
	return cmds
}

func TestAnnotationsPerFailingAndFlakySample(t *testing.T) {
	t.Parallel()
	hostile := "evil\n::error title=forged::forged%0A, a: b\r%"
	rep := runOf(t, func(id string, ep int) string { return "wrong: " + id },
		[2]string{"ok", "PP"}, [2]string{"bad", "FF"}, [2]string{"flaky", "PF"}, [2]string{hostile, "FE"}, [2]string{"down", "EE"})
	var buf bytes.Buffer
	require.NoError(t, ci.WriteAnnotations(&buf, rep, &ci.AnnotationOptions{Log: "runs/h.jsonl", File: "evals/harbor_test.go"}))
	cmds := parseCommands(t, buf.String())
	require.Len(t, cmds, 6, "the gate, bad, flaky, the hostile one, down, and the summary:\n%s", buf.String())
	want := []struct{ level, title string }{
		{"error", "proctor harbor: gate failed"},
		{"error", "proctor harbor: bad"}, {"warning", "proctor harbor: flaky"},
		{"error", "proctor harbor: " + hostile}, {"error", "proctor harbor: down"}, {"notice", "proctor harbor"},
	}
	for i, w := range want {
		require.Equal(t, w.level, cmds[i].level, "command %d", i)
		require.Equal(t, w.title, cmds[i].title, "command %d: the title reads back as it was", i)
		require.Equal(t, "evals/harbor_test.go", cmds[i].file)
	}
	require.Contains(t, cmds[1].msg, "epoch 1: fail: wrong: bad\n  proctor trace runs/h.jsonl run.traces.jsonl#")
	require.Contains(t, cmds[3].msg, "wrong: "+hostile, "the message reads back as it was")
	require.Contains(t, cmds[5].msg, "over 5 samples")
}

func TestAnnotationsCappedAsGitHubShowsThem(t *testing.T) {
	t.Parallel()
	var outcomes [][2]string
	for i := range 14 {
		outcomes = append(outcomes, [2]string{fmt.Sprintf("s%02d", i), "FF"})
	}
	rep := runOf(t, func(string, int) string { return "no" }, outcomes...)
	var buf bytes.Buffer
	require.NoError(t, ci.WriteAnnotations(&buf, rep, nil))
	cmds := parseCommands(t, buf.String())
	require.Len(t, cmds, 11)
	require.Contains(t, cmds[10].msg, "4 failing and 0 flaky samples more than annotated")
}

// TestAnnotationsPerVariant: a sample that fails in one variant and
// passes in the other is an error of that variant, not one flaky sample;
// the notice is the leaderboard's headline, no pooled pass rate.
func TestAnnotationsPerVariant(t *testing.T) {
	t.Parallel()
	var recs []sink.Record
	for _, v := range []string{"a", "b"} {
		for ep := range 2 {
			r := sink.Record{Schema: 1, RunID: "run1", Eval: "harbor", Variant: v, SampleID: "s1", Epoch: ep, Status: sink.Pass, Score: 1}
			if v == "b" {
				r.Status, r.Score, r.Reason = sink.Fail, 0, "wrong in b"
			}
			recs = append(recs, r)
		}
	}
	rep, err := report.FromRecords(func(yield func(sink.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}, nil)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, ci.WriteAnnotations(&buf, rep, nil))
	cmds := parseCommands(t, buf.String())
	require.Len(t, cmds, 2, buf.String())
	require.Equal(t, "error", cmds[0].level)
	require.Equal(t, "proctor harbor [b]: s1", cmds[0].title)
	require.Contains(t, cmds[0].msg, "wrong in b")
	require.Equal(t, "notice", cmds[1].level)
	require.Contains(t, cmds[1].msg, "2 variants, not pooled")
}
