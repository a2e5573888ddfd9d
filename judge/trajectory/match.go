package trajectory

import (
	"fmt"
	"strings"
)

// Mode is how [Match] compares a trajectory with its reference.
type Mode int

const (
	// Strict: the same calls in the same order, none more.
	Strict Mode = iota
	// Unordered: the same calls in any order, none more: each step
	// matches its own reference call.
	Unordered
	// Subset: every step matches a reference call of its own; reference
	// calls may be left over (the agent called nothing unexpected).
	Subset
	// Superset: every reference call matches a step of its own; more
	// steps are allowed (the agent made at least the calls expected).
	Superset
	// InOrder: the reference calls match steps in their order, with
	// other steps allowed between them.
	InOrder
)

var modeNames = [...]string{"strict", "unordered", "subset", "superset", "in_order"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Match is the rule that the trajectory matches ref in mode. Where a
// reference call may match several steps (a [Contains] or [Where]
// argument), Unordered, Subset and Superset find the pairing that
// matches the most (a maximum bipartite matching), so the order of the
// reference calls does not decide. It panics on an unknown mode.
func Match(mode Mode, ref ...Call) Rule {
	if mode < Strict || mode > InOrder {
		panic(fmt.Sprintf("trajectory: Match: unknown %v", mode))
	}
	ref = append([]Call(nil), ref...)
	return Rule{name: "match_" + mode.String(), check: func(steps []Step) (int, string) {
		switch mode {
		case Strict:
			return matchStrict(steps, ref)
		case InOrder:
			return matchInOrder(steps, ref)
		}
		return matchSets(mode, steps, ref)
	}}
}

func matchStrict(steps []Step, ref []Call) (int, string) {
	for i := range min(len(steps), len(ref)) {
		if !ref[i].Matches(steps[i]) {
			return steps[i].N, fmt.Sprintf("got %s, want %s", steps[i], ref[i])
		}
	}
	switch {
	case len(steps) > len(ref):
		return steps[len(ref)].N, fmt.Sprintf("unexpected %s: the reference has %d calls", steps[len(ref)], len(ref))
	case len(steps) < len(ref):
		return len(steps) + 1, fmt.Sprintf("missing %s: the trajectory ended after %d steps", ref[len(steps)], len(steps))
	}
	return 0, ""
}

// matchInOrder matches each reference call to the earliest step after the
// previous one's: greedy is optimal for a subsequence.
func matchInOrder(steps []Step, ref []Call) (int, string) {
	i := 0
	for j, c := range ref {
		for i < len(steps) && !c.Matches(steps[i]) {
			i++
		}
		if i == len(steps) {
			after := "at all"
			if j > 0 {
				after = fmt.Sprintf("after %s", ref[j-1])
			}
			return 0, fmt.Sprintf("reference call %d (%s) is not made %s", j+1, c, after)
		}
		i++
	}
	return 0, ""
}

func matchSets(mode Mode, steps []Step, ref []Call) (int, string) {
	stepOf, refOf := pair(steps, ref)
	unmatchedStep := func() (int, string) {
		for i, j := range refOf {
			if j < 0 {
				return steps[i].N, fmt.Sprintf("%s matches no reference call left", steps[i])
			}
		}
		return 0, ""
	}
	unmatchedRef := func() (int, string) {
		var missing []string
		for j, i := range stepOf {
			if i < 0 {
				missing = append(missing, fmt.Sprintf("%d (%s)", j+1, ref[j]))
			}
		}
		if missing == nil {
			return 0, ""
		}
		return 0, fmt.Sprintf("no step left matches reference call %s", strings.Join(missing, ", "))
	}
	switch mode {
	case Subset:
		return unmatchedStep()
	case Superset:
		return unmatchedRef()
	}
	if n, why := unmatchedStep(); why != "" {
		return n, why
	}
	return unmatchedRef()
}

// pair finds a maximum matching between steps and reference calls
// (Kuhn's augmenting paths: a trajectory has tens of steps, not
// thousands): stepOf[j] is the step of reference call j, refOf[i] the
// reference call of step i, -1 for none.
func pair(steps []Step, ref []Call) (stepOf, refOf []int) {
	fits := make([][]int, len(ref)) // the steps each reference call matches
	for j, c := range ref {
		for i, s := range steps {
			if c.Matches(s) {
				fits[j] = append(fits[j], i)
			}
		}
	}
	stepOf, refOf = make([]int, len(ref)), make([]int, len(steps))
	for i := range refOf {
		refOf[i] = -1
	}
	seen := make([]bool, len(steps))
	var augment func(j int) bool
	augment = func(j int) bool {
		for _, i := range fits[j] {
			if seen[i] {
				continue
			}
			seen[i] = true
			if refOf[i] < 0 || augment(refOf[i]) {
				refOf[i], stepOf[j] = j, i
				return true
			}
		}
		return false
	}
	for j := range ref {
		clear(seen)
		if !augment(j) {
			stepOf[j] = -1
		}
	}
	return stepOf, refOf
}
