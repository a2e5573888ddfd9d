package trajectory_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/trajectory"
)

// steps builds a trajectory of tool calls "name" or "name {json}".
func steps(calls ...string) []trajectory.Step {
	var out []trajectory.Step
	for i, c := range calls {
		s := trajectory.Step{N: i + 1, Kind: "tool", Name: c}
		for j := range c {
			if c[j] == ' ' {
				s.Name, s.Input = c[:j], json.RawMessage(c[j+1:])
				break
			}
		}
		out = append(out, s)
	}
	return out
}

func tool(name string) trajectory.Call { return trajectory.Call{Name: name} }

func TestArgs(t *testing.T) {
	t.Parallel()
	type Q struct {
		Query string `json:"q"`
		Limit int    `json:"limit"`
	}
	for _, tc := range []struct {
		name  string
		args  trajectory.Args
		input string
		want  bool
	}{
		{"zero matches anything", trajectory.Args{}, `{"x":1}`, true},
		{"exact", trajectory.Exact(map[string]any{"q": "go", "n": 1}), `{"n":1.0,"q":"go"}`, true},
		{"exact exponent", trajectory.Exact(map[string]any{"n": 10}), `{"n":1e1}`, true},
		{"exact big integers differ", trajectory.Exact(json.RawMessage(`9007199254740993`)), `9007199254740992`, false},
		{"exact extra member", trajectory.Exact(map[string]any{"q": "go"}), `{"q":"go","n":1}`, false},
		{"exact nested array order", trajectory.Exact([]int{1, 2}), `[2,1]`, false},
		{"exact null is no input", trajectory.Exact(nil), ``, true},
		{"exact bad json", trajectory.Exact("x"), `"x`, false},
		{"exact two values", trajectory.Exact("x"), `"x" "x"`, false},
		{"contains", trajectory.Contains(map[string]any{"q": "go"}), `{"q":"go","n":1}`, true},
		{"contains nested", trajectory.Contains(map[string]any{"o": map[string]any{"a": 1}}), `{"o":{"a":1,"b":2}}`, true},
		{"contains wrong value", trajectory.Contains(map[string]any{"q": "go"}), `{"q":"rust"}`, false},
		{"contains missing member", trajectory.Contains(map[string]any{"q": "go"}), `{"n":1}`, false},
		{"contains arrays element by element", trajectory.Contains([]any{map[string]any{"a": 1}}), `[{"a":1,"b":2}]`, true},
		{"contains arrays of another length", trajectory.Contains([]int{1}), `[1,2]`, false},
		{"contains not an object", trajectory.Contains(map[string]any{"q": "go"}), `"go"`, false},
		{"regexp on a string's value", trajectory.Matches(`^rm -rf`), `"rm -rf /"`, true},
		{"regexp on compact json", trajectory.Matches(`"path":"/etc/`), `{ "path": "/etc/passwd" }`, true},
		{"regexp no match", trajectory.Matches(`^rm`), `"ls"`, false},
		{"predicate", trajectory.Where("limit at most 10", func(q Q) bool { return q.Limit <= 10 }), `{"q":"go","limit":5}`, true},
		{"predicate false", trajectory.Where("limit at most 10", func(q Q) bool { return q.Limit <= 10 }), `{"limit":50}`, false},
		{"predicate undecodable", trajectory.Where("limit at most 10", func(q Q) bool { return true }), `{"limit":"x"}`, false},
	} {
		require.Equal(t, tc.want, tc.args.Match(json.RawMessage(tc.input)), tc.name)
	}
}

func TestMatchModes(t *testing.T) {
	t.Parallel()
	search := trajectory.Call{Name: "search", Args: trajectory.Contains(map[string]any{"q": "go"})}
	anySearch := tool("search")
	for _, tc := range []struct {
		name  string
		mode  trajectory.Mode
		ref   []trajectory.Call
		steps []trajectory.Step
		want  *trajectory.Broken // nil: holds
	}{
		{"strict equal", trajectory.Strict, []trajectory.Call{search, tool("fetch")},
			steps(`search {"q":"go","n":3}`, "fetch"), nil},
		{"strict other order", trajectory.Strict, []trajectory.Call{search, tool("fetch")},
			steps("fetch", `search {"q":"go"}`), &trajectory.Broken{Rule: "match_strict", Step: 1,
				Reason: `got tool fetch, want search (args ⊇ {"q":"go"})`}},
		{"strict wrong args", trajectory.Strict, []trajectory.Call{search},
			steps(`search {"q":"rust"}`), &trajectory.Broken{Rule: "match_strict", Step: 1,
				Reason: `got tool search {"q":"rust"}, want search (args ⊇ {"q":"go"})`}},
		{"strict extra", trajectory.Strict, []trajectory.Call{anySearch},
			steps("search", "delete"), &trajectory.Broken{Rule: "match_strict", Step: 2,
				Reason: "unexpected tool delete: the reference has 1 calls"}},
		{"strict missing", trajectory.Strict, []trajectory.Call{anySearch, tool("fetch")},
			steps("search"), &trajectory.Broken{Rule: "match_strict", Step: 2,
				Reason: "missing fetch: the trajectory ended after 1 steps"}},
		{"strict empty", trajectory.Strict, nil, nil, nil},
		{"unordered", trajectory.Unordered, []trajectory.Call{tool("fetch"), anySearch},
			steps("search", "fetch"), nil},
		{"unordered extra", trajectory.Unordered, []trajectory.Call{tool("fetch"), anySearch},
			steps("search", "fetch", "search"), &trajectory.Broken{Rule: "match_unordered", Step: 3,
				Reason: "tool search matches no reference call left"}},
		{"unordered missing", trajectory.Unordered, []trajectory.Call{tool("fetch"), anySearch},
			steps("search"), &trajectory.Broken{Rule: "match_unordered",
				Reason: "no step left matches reference call 1 (fetch)"}},
		// A greedy pairing would give the first step to the wildcard and
		// leave the specific call unmatched.
		{"unordered needs the best pairing", trajectory.Unordered, []trajectory.Call{{}, search},
			steps(`search {"q":"go"}`, "fetch"), nil},
		{"subset", trajectory.Subset, []trajectory.Call{anySearch, tool("fetch"), tool("summarize")},
			steps("fetch", "search"), nil},
		{"subset counts repeats", trajectory.Subset, []trajectory.Call{anySearch, tool("fetch")},
			steps("search", "search"), &trajectory.Broken{Rule: "match_subset", Step: 2,
				Reason: "tool search matches no reference call left"}},
		{"superset", trajectory.Superset, []trajectory.Call{tool("fetch")},
			steps("search", "fetch", "summarize"), nil},
		{"superset missing", trajectory.Superset, []trajectory.Call{tool("fetch"), tool("cite"), tool("plan")},
			steps("search", "fetch"), &trajectory.Broken{Rule: "match_superset",
				Reason: "no step left matches reference call 2 (cite), 3 (plan)"}},
		{"in order", trajectory.InOrder, []trajectory.Call{anySearch, tool("submit")},
			steps("plan", "search", "fetch", "submit"), nil},
		{"in order reversed", trajectory.InOrder, []trajectory.Call{anySearch, tool("submit")},
			steps("submit", "search"), &trajectory.Broken{Rule: "match_in_order",
				Reason: "reference call 2 (submit) is not made after search"}},
		{"in order never", trajectory.InOrder, []trajectory.Call{tool("plan")},
			steps("submit"), &trajectory.Broken{Rule: "match_in_order",
				Reason: "reference call 1 (plan) is not made at all"}},
	} {
		got := trajectory.Match(tc.mode, tc.ref...).Check(tc.steps)
		require.Empty(t, cmp.Diff(tc.want, got), "%s (-want +got)", tc.name)
	}
}

func TestRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		rule  trajectory.Rule
		steps []trajectory.Step
		want  *trajectory.Broken
	}{
		{"never holds", trajectory.Never(tool("rm")), steps("ls", "cat"), nil},
		{"never broken", trajectory.Never(trajectory.Call{Name: "shell", Args: trajectory.Matches(`rm -rf`)}),
			steps(`shell "ls"`, `shell "rm -rf tests"`), &trajectory.Broken{Rule: "never(shell (args ~ /rm -rf/))", Step: 2,
				Reason: `forbidden call tool shell "rm -rf tests"`}},
		{"max steps holds", trajectory.MaxSteps(2), steps("a", "b"), nil},
		{"max steps broken", trajectory.MaxSteps(2), steps("a", "b", "c", "d"),
			&trajectory.Broken{Rule: "max_steps(2)", Step: 3, Reason: "4 steps, more than 2"}},
		{"no loop holds", trajectory.NoLoop(3), steps(`s {"q":1}`, `s {"q":1}`, `s {"q":2}`, `s {"q":2}`), nil},
		{"no loop broken", trajectory.NoLoop(3), steps("a", `s {"q":1}`, `s { "q": 1.0 }`, `s {"q":1}`),
			&trajectory.Broken{Rule: "no_loop(3)", Step: 4, Reason: `tool s {"q":1} 3 times in a row, from step 2`}},
		{"no loop not in a row", trajectory.NoLoop(2), steps("a", "b", "a", "b"), nil},
		{"before holds", trajectory.Before(tool("test"), tool("submit")), steps("edit", "test", "submit"), nil},
		{"before holds without then", trajectory.Before(tool("test"), tool("submit")), steps("edit"), nil},
		{"before broken", trajectory.Before(tool("test"), tool("submit")), steps("edit", "submit", "test", "submit"),
			&trajectory.Broken{Rule: "before(test, submit)", Step: 2, Reason: "tool submit before any test"}},
	} {
		got := tc.rule.Check(tc.steps)
		require.Empty(t, cmp.Diff(tc.want, got), "%s (-want +got)", tc.name)
	}
	require.Panics(t, func() { trajectory.NoLoop(1) })
	require.Panics(t, func() { trajectory.Match(trajectory.Mode(9)) })
	require.Panics(t, func() { trajectory.Judge[string, string](nil) })
}

func TestSteps(t *testing.T) {
	t.Parallel()
	events := []harness.Event{
		{Kind: "model", Name: "gpt"}, {Kind: "tool", Name: "search"}, {Kind: "command", Name: "go test"},
		{Kind: "judge", Name: "rubric"}, {Kind: "tool", Name: "fetch"},
	}
	names := func(ss []trajectory.Step) (out []string) {
		for _, s := range ss {
			out = append(out, s.Kind+":"+s.Name)
		}
		return out
	}
	require.Equal(t, []string{"tool:search", "tool:fetch"}, names(trajectory.Steps(events)))
	require.Equal(t, []string{"model:gpt", "command:go test"}, names(trajectory.Steps(events, "model", "command")))
	require.Equal(t, 2, trajectory.Steps(events)[1].N)
}

// TestJudgeComposes: the judge reads the episode's events, says which
// rule broke at which step, and composes with judge.All.
func TestJudgeComposes(t *testing.T) {
	t.Parallel()
	ep := &harness.Episode[string]{}
	for _, name := range []string{"search", "search", "search", "submit"} {
		ep.AddEvent(harness.Event{Kind: "tool", Name: name, Input: json.RawMessage(`{"q":"x"}`)})
	}
	ep.AddEvent(harness.Event{Kind: "model", Name: "m"})
	traj := trajectory.Judge[string, string](nil,
		trajectory.NoLoop(3), trajectory.Never(tool("rm")), trajectory.MaxSteps(4),
		trajectory.Before(tool("test"), tool("submit")))
	v, err := traj.Judge(context.Background(), ep, "42")
	require.NoError(t, err)
	want := judge.Verdict{Score: 0.5,
		Reason: `no_loop(3): step 3: tool search {"q":"x"} 3 times in a row, from step 1; before(test, submit): step 4: tool submit {"q":"x"} before any test`,
		Scores: map[string]float64{"no_loop(3)": 0, "never(rm)": 1, "max_steps(4)": 1, "before(test, submit)": 0}}
	require.Empty(t, cmp.Diff(want, v))

	answer := judge.Func[string, string](func(context.Context, *harness.Episode[string], string) (judge.Verdict, error) {
		return judge.Pass("right answer"), nil
	})
	v, err = judge.All(answer, traj).Judge(context.Background(), ep, "42")
	require.NoError(t, err)
	require.False(t, v.Pass, "the right answer by the wrong path fails")
	require.Contains(t, v.Reason, "no_loop(3): step 3")

	models := trajectory.Judge[string, string](&trajectory.Options{Kinds: []string{"model"}}, trajectory.MaxSteps(1))
	v, err = judge.All(answer, models).Judge(context.Background(), ep, "42")
	require.NoError(t, err)
	require.True(t, v.Pass, v.Reason)
	require.Equal(t, "right answer; trajectory: max_steps(1) holds over 1 steps", v.Reason)
}
