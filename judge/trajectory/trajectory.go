// Package trajectory judges the path an agent took, not only its answer:
// the calls of an episode's transcript (tool calls by default; model
// calls or commands if asked) matched against a reference trajectory and
// checked against rules.
//
// A [Rule] checks a trajectory: [Match] compares it with a reference in a
// [Mode] (strict, unordered, subset, superset, in order), each reference
// [Call] naming a call and matching its arguments ([Exact], [Contains],
// [Matches], [Where]); [Never], [MaxSteps], [NoLoop] and [Before] are rules
// of conduct. [Judge] makes rules a judge.Judge, which composes with
// judge.All, Cascade, Vote and Weighted; a failing verdict says which rule
// broke at which step.
//
//	j := judge.All(
//		trajectory.Judge[Task, string](nil,
//			trajectory.Never(trajectory.Call{Name: "delete_tests"}),
//			trajectory.NoLoop(3),
//			trajectory.Before(trajectory.Call{Name: "run_tests"}, trajectory.Call{Name: "submit"})),
//		answerJudge)
//
// The judge reads the episode's transcript as the engine holds it during
// the attempt (harness.Episode.Events): no file is read. [Steps] and
// [Rule.Check] apply the same rules to a transcript read back from a log.
package trajectory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

// Step is one call of a trajectory: an event of one of the kinds judged.
type Step struct {
	N     int             // its position in the trajectory, from 1
	Kind  string          // the event's kind: "tool", "model", "command"…
	Name  string          // the event's name: the tool, the model, the command
	Input json.RawMessage // the call's arguments
}

func (s Step) String() string {
	in := ""
	if len(s.Input) > 0 {
		in = " " + clip(compact(s.Input), 120)
	}
	return s.Kind + " " + s.Name + in
}

// Steps returns the trajectory of a transcript: its events of the given
// kinds ("tool" when none is given), numbered from 1.
func Steps(events []harness.Event, kinds ...string) []Step {
	if len(kinds) == 0 {
		kinds = []string{"tool"}
	}
	var steps []Step
	for _, ev := range events {
		if slices.Contains(kinds, ev.Kind) {
			steps = append(steps, Step{N: len(steps) + 1, Kind: ev.Kind, Name: ev.Name, Input: ev.Input})
		}
	}
	return steps
}

// Call describes a call of a reference trajectory, or one a rule names.
// Its zero fields match anything.
type Call struct {
	Kind string // the event's kind; "": any
	Name string // the event's name; "": any
	Args Args   // the arguments; zero: any
}

// Matches reports whether s is a call c describes.
func (c Call) Matches(s Step) bool {
	return (c.Kind == "" || c.Kind == s.Kind) && (c.Name == "" || c.Name == s.Name) && c.Args.Match(s.Input)
}

func (c Call) String() string {
	name := c.Name
	if name == "" {
		name = "any"
	}
	if c.Kind != "" {
		name = c.Kind + " " + name
	}
	if c.Args.desc != "" {
		name += " (args " + c.Args.desc + ")"
	}
	return name
}

// Broken is a rule that does not hold: which rule, at which step, and why.
type Broken struct {
	Rule   string // the rule's name, as "no_loop(3)"
	Step   int    // the step where it broke, from 1; 0: the trajectory as a whole
	Reason string
}

func (b *Broken) Error() string {
	if b.Step == 0 {
		return b.Rule + ": " + b.Reason
	}
	return fmt.Sprintf("%s: step %d: %s", b.Rule, b.Step, b.Reason)
}

// Rule checks a trajectory.
type Rule struct {
	name  string
	check func(steps []Step) (step int, reason string)
}

// Name is the rule's name, as in a [Broken] and the verdict's Scores.
func (r Rule) Name() string { return r.name }

// Check returns nil when the rule holds over steps, else what broke.
func (r Rule) Check(steps []Step) *Broken {
	step, reason := r.check(steps)
	if reason == "" {
		return nil
	}
	return &Broken{Rule: r.name, Step: step, Reason: reason}
}

// Options configures a [Judge]. The zero value (and nil) is valid.
type Options struct {
	// Kinds are the kinds of the transcript's events that are steps of
	// the trajectory; nil: "tool". "model" judges the model calls (with
	// the gateway, each is one), "command" the sandbox commands.
	Kinds []string
}

// Judge returns a judge of the episode's trajectory by rules: it passes
// when every rule holds. Its Score is the fraction of the rules that
// hold, Scores holds 1 or 0 under each rule's name, and the Reason of a
// failure names each broken rule at its step ("no_loop(3): step 7: …").
// An output judged again from a log (eval's Rejudge, or ReuseFrom with a
// changed judge) is unscored: its episode holds no trajectory to judge.
// It panics without a rule: a mistake found when the eval is built.
func Judge[T, O any](opts *Options, rules ...Rule) judge.Judge[T, O] {
	if len(rules) == 0 {
		panic("trajectory: Judge without a rule")
	}
	var kinds []string
	if opts != nil {
		kinds = slices.Clone(opts.Kinds)
	}
	rules = slices.Clone(rules)
	return judge.Func[T, O](func(_ context.Context, ep *harness.Episode[T], _ O) (judge.Verdict, error) {
		events := ep.Events()
		if rejudged(events) {
			return judge.Verdict{}, judge.Unscored("trajectory: the episode is judged again from a log (Rejudge, ReuseFrom), " +
				"whose transcript is linked, not replayed: its trajectory is unknown here")
		}
		return Verdict(Steps(events, kinds...), rules...), nil
	})
}

// rejudged reports whether events are those of an output judged again
// from a log: the engine's note first, the agent's calls not among them.
// Judged as they stand, every rule of conduct would hold over nothing.
func rejudged(events []harness.Event) bool {
	return len(events) > 0 && events[0].Kind == "note" && events[0].Name == "rejudged"
}

// Verdict is [Judge]'s verdict over steps.
func Verdict(steps []Step, rules ...Rule) judge.Verdict {
	v := judge.Verdict{Scores: make(map[string]float64, len(rules))}
	var broken []string
	for _, r := range rules {
		if b := r.Check(steps); b != nil {
			broken = append(broken, b.Error())
			v.Scores[r.name] = 0
			continue
		}
		v.Scores[r.name] = 1
	}
	held := len(rules) - len(broken)
	v.Score = float64(held) / float64(len(rules))
	if len(broken) > 0 {
		v.Reason = strings.Join(broken, "; ")
		return v
	}
	v.Pass = true
	v.Reason = fmt.Sprintf("trajectory: %d rules hold over %d steps", len(rules), len(steps))
	if len(rules) == 1 {
		v.Reason = fmt.Sprintf("trajectory: %s holds over %d steps", rules[0].name, len(steps))
	}
	return v
}

// Never breaks at the first call c describes: a tool never to be called.
func Never(c Call) Rule {
	return Rule{name: "never(" + c.String() + ")", check: func(steps []Step) (int, string) {
		for _, s := range steps {
			if c.Matches(s) {
				return s.N, "forbidden call " + s.String()
			}
		}
		return 0, ""
	}}
}

// MaxSteps breaks at step n+1: at most n steps.
func MaxSteps(n int) Rule {
	return Rule{name: fmt.Sprintf("max_steps(%d)", n), check: func(steps []Step) (int, string) {
		if len(steps) > n {
			return n + 1, fmt.Sprintf("%d steps, more than %d", len(steps), n)
		}
		return 0, ""
	}}
}

// NoLoop breaks where the same call (kind, name and arguments equal as
// JSON) comes k times in a row, at the k-th. It panics for k under 2.
func NoLoop(k int) Rule {
	if k < 2 {
		panic(fmt.Sprintf("trajectory: NoLoop(%d): a loop is at least 2 calls", k))
	}
	return Rule{name: fmt.Sprintf("no_loop(%d)", k), check: func(steps []Step) (int, string) {
		run := 1
		for i := 1; i < len(steps); i++ {
			if sameCall(steps[i-1], steps[i]) {
				run++
			} else {
				run = 1
			}
			if run == k {
				return steps[i].N, fmt.Sprintf("%s %d times in a row, from step %d", steps[i], k, steps[i-k+1].N)
			}
		}
		return 0, ""
	}}
}

func sameCall(a, b Step) bool {
	if a.Kind != b.Kind || a.Name != b.Name {
		return false
	}
	x, okx := decode(a.Input)
	y, oky := decode(b.Input)
	if !okx || !oky {
		return string(a.Input) == string(b.Input)
	}
	return equal(x, y)
}

// Before breaks at a call then describes with no call first describes
// before it: a required call before another (run the tests before
// submitting).
func Before(first, then Call) Rule {
	return Rule{name: "before(" + first.String() + ", " + then.String() + ")", check: func(steps []Step) (int, string) {
		for _, s := range steps {
			if first.Matches(s) {
				return 0, ""
			}
			if then.Matches(s) {
				return s.N, s.String() + " before any " + first.String()
			}
		}
		return 0, ""
	}}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}
