package scorer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
	"github.com/proctor-evals/proctor/scorer"
)

type qa struct {
	Answer string
	Num    float64
	JSON   any
}

func episode[T any](in T) *harness.Episode[T] {
	return &harness.Episode[T]{Sample: dataset.Sample[T]{ID: "s1", Input: in}}
}

func TestScorers(t *testing.T) {
	t.Parallel()
	ans := func(q qa) string { return q.Answer }
	num := func(q qa) float64 { return q.Num }
	js := func(q qa) any { return q.JSON }
	tests := []struct {
		name     string
		judge    judge.Judge[qa, string]
		in       qa
		out      string
		pass     bool
		inReason string
	}{
		{"exact equal", scorer.Exact(ans), qa{Answer: "Paris"}, "Paris", true, ""},
		{"exact differs by case", scorer.Exact(ans), qa{Answer: "Paris"}, "paris", false, `want "Paris"`},
		{"normalized ignores case, punctuation, articles", scorer.Normalized(ans), qa{Answer: "The Eiffel Tower"}, "eiffel  tower!", true, ""},
		{"normalized differs", scorer.Normalized(ans), qa{Answer: "Paris"}, "Lyon", false, "normalized"},
		{"contains", scorer.Contains(ans), qa{Answer: "Paris"}, "It is Paris, France.", true, ""},
		{"contains missing", scorer.Contains(ans), qa{Answer: "Paris"}, "Lyon", false, "contains"},
		{"regex match", scorer.Regex(func(qa) *regexp.Regexp { return regexp.MustCompile(`^\d{4}$`) }), qa{}, "1999", true, ""},
		{"regex no match", scorer.Regex(func(qa) *regexp.Regexp { return regexp.MustCompile(`^\d{4}$`) }), qa{}, "99", false, "does not match"},
		{"numeric within tolerance", scorer.Numeric(num, 0.01), qa{Num: 3.14159}, " 3.14. ", true, ""},
		{"numeric with thousands separator", scorer.Numeric(num, 0), qa{Num: 1234}, "1,234", true, ""},
		{"numeric outside tolerance", scorer.Numeric(num, 0.001), qa{Num: 3.14159}, "3.14", false, "want 3.14159"},
		{"numeric not a number", scorer.Numeric(num, 0), qa{Num: 1}, "one", false, "not a number"},
		{"json equal regardless of key order and space", scorer.JSON(js), qa{JSON: json.RawMessage(`{"a":1,"b":[true,null]}`)}, `{ "b": [true, null], "a": 1.0 }`, true, ""},
		{"json from a Go value", scorer.JSON(js), qa{JSON: map[string]any{"n": 2, "s": "x"}}, `{"s":"x","n":2}`, true, ""},
		{"json in a code fence", scorer.JSON(js), qa{JSON: []byte(`[1,2]`)}, "```json\n[1, 2]\n```", true, ""},
		{"json mismatch diff", scorer.JSON(js), qa{JSON: json.RawMessage(`{"a":1}`)}, `{"a":2}`, false, "(-want +got)"},
		{"json string reference is a JSON string", scorer.JSON(js), qa{JSON: "42"}, `42`, false, "mismatch"},
		{"json invalid output", scorer.JSON(js), qa{JSON: json.RawMessage(`{}`)}, `{"a":`, false, "not JSON"},
		{"json trailing data", scorer.JSON(js), qa{JSON: json.RawMessage(`1`)}, `1 2`, false, "not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := tt.judge.Judge(context.Background(), episode(tt.in), tt.out)
			require.NoError(t, err)
			require.Equal(t, tt.pass, v.Pass, "reason: %s", v.Reason)
			if tt.pass {
				require.Equal(t, 1.0, v.Score)
			}
			require.Contains(t, v.Reason, tt.inReason)
		})
	}
}

func TestJSONDiffShowsTheField(t *testing.T) {
	t.Parallel()
	j := scorer.JSON(func(q qa) any { return q.JSON })
	v, err := j.Judge(context.Background(), episode(qa{JSON: json.RawMessage(`{"name":"ada","age":36}`)}), `{"name":"ada","age":37}`)
	require.NoError(t, err)
	require.False(t, v.Pass)
	// go-cmp's output is deliberately unstable in its spacing: match words.
	require.Regexp(t, `(?m)^-.*"age".*float64\(36\)`, v.Reason)
	require.Regexp(t, `(?m)^\+.*"age".*float64\(37\)`, v.Reason)
}

func TestJSONBadReferenceIsAnError(t *testing.T) {
	t.Parallel()
	j := scorer.JSON(func(q qa) any { return q.JSON })
	_, err := j.Judge(context.Background(), episode(qa{JSON: json.RawMessage(`{`)}), `{}`)
	require.ErrorContains(t, err, "scorer: json")
}

// fakeSandbox is a test double: Exec answers from a function.
type fakeSandbox struct {
	exec func(sandbox.Cmd) (sandbox.Result, error)
	mu   sync.Mutex
	cmds []sandbox.Cmd
}

// open returns a sandbox whose commands f answers.
func (f *fakeSandbox) open(t *testing.T) *sandbox.Sandbox {
	fake := &sandboxtest.Fake{Exec: func(_ context.Context, _ sandboxtest.Files, c sandbox.Cmd) (sandbox.Result, error) {
		f.mu.Lock()
		f.cmds = append(f.cmds, c)
		f.mu.Unlock()
		return f.exec(c)
	}}
	sb, err := sandbox.Open(context.Background(), fake.Provider(), sandbox.Spec{Files: map[string][]byte{"repo/.keep": nil}})
	require.NoError(t, err)
	t.Cleanup(func() { sb.Close() })
	return sb
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	var long strings.Builder
	for i := range 100 {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	tests := []struct {
		name     string
		res      sandbox.Result
		err      error
		noSB     bool
		pass     bool
		wantErr  error // nil: no error
		anyErr   bool
		inReason []string
		notIn    string
	}{
		{name: "exit 0 passes", res: sandbox.Result{Stdout: []byte("ok\n")}, pass: true},
		{name: "exit 1 fails with output tails", res: sandbox.Result{ExitCode: 1, Stdout: []byte("FAIL TestAdd\n"), Stderr: []byte("exit status 1\n")},
			inReason: []string{"exited 1", "FAIL TestAdd", "exit status 1", "go test ./..."}},
		{name: "long output keeps the tail", res: sandbox.Result{ExitCode: 2, Stdout: []byte(long.String())},
			inReason: []string{"line 99", "…"}, notIn: "line 3\n"},
		{name: "timed out fails", res: sandbox.Result{ExitCode: -1, TimedOut: true}, inReason: []string{"timed out"}},
		{name: "command not found fails", res: sandbox.Result{ExitCode: 127, Stderr: []byte("go: not found")}, inReason: []string{"127"}},
		{name: "unavailable sandbox is an error", err: fmt.Errorf("docker: %w", sandbox.ErrUnavailable), wantErr: sandbox.ErrUnavailable},
		{name: "closed sandbox is an error", err: sandbox.ErrClosed, wantErr: sandbox.ErrClosed},
		{name: "no sandbox is an error", noSB: true, anyErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := &fakeSandbox{exec: func(sandbox.Cmd) (sandbox.Result, error) { return tt.res, tt.err }}
			ep := episode(qa{})
			if !tt.noSB {
				ep.Sandbox = fake.open(t)
			}
			j := scorer.ExitCode[qa, string](func(qa) sandbox.Cmd { return sandbox.Cmd{Args: []string{"go", "test", "./..."}, Dir: "repo"} })
			v, err := j.Judge(context.Background(), ep, "")
			switch {
			case tt.wantErr != nil:
				require.ErrorIs(t, err, tt.wantErr)
				require.ErrorContains(t, err, "scorer: exit code")
			case tt.anyErr || tt.noSB:
				require.Error(t, err)
				require.False(t, errors.Is(err, judge.ErrUnscored))
				return
			default:
				require.NoError(t, err)
				require.Equal(t, tt.pass, v.Pass, v.Reason)
				for _, s := range tt.inReason {
					require.Contains(t, v.Reason, s)
				}
				if tt.notIn != "" {
					require.NotContains(t, v.Reason, tt.notIn)
				}
				require.Equal(t, float64(tt.res.ExitCode), v.Scores["exit_code"])
			}
			require.Len(t, fake.cmds, 1)
			require.Equal(t, "repo", fake.cmds[0].Dir)
			evs := ep.Events()
			require.Len(t, evs, 1)
			require.Equal(t, "command", evs[0].Kind)
			require.Contains(t, string(evs[0].Input), `"go","test","./..."`)
		})
	}
}
