package trajectory_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/proctor-evals/proctor/judge/trajectory"
)

// FuzzMatch checks Match in every mode against a reference
// implementation that tries every assignment of steps to reference
// calls: a trajectory and a reference of up to 6 calls each, decoded from
// the fuzzer's bytes, with arguments that overlap (a wildcard, an exact
// value, a subset, a predicate) so that a greedy pairing would go wrong.
func FuzzMatch(f *testing.F) {
	f.Add([]byte{0x01, 0x12, 0x20}, []byte{0x00, 0x11})
	f.Add([]byte{0x10, 0x10, 0x10}, []byte{0x30, 0x21, 0x00})
	f.Add([]byte{}, []byte{0x05})
	f.Add([]byte{0x21, 0x02, 0x13, 0x00}, []byte{0x40, 0x31, 0x12, 0x03})
	f.Fuzz(func(t *testing.T, stepBytes, refBytes []byte) {
		steps := fuzzSteps(stepBytes)
		ref := fuzzRef(refBytes)
		for _, mode := range []trajectory.Mode{trajectory.Strict, trajectory.Unordered, trajectory.Subset, trajectory.Superset, trajectory.InOrder} {
			broken := trajectory.Match(mode, ref...).Check(steps)
			want := refHolds(mode, steps, ref)
			if (broken == nil) != want {
				t.Fatalf("%v: Match says broken=%v, the reference says holds=%v\nsteps %v\nref %v", mode, broken, want, steps, ref)
			}
			if broken != nil && (broken.Step < 0 || broken.Step > len(steps)+1 || broken.Reason == "") {
				t.Fatalf("%v: broken at step %d of %d: %q", mode, broken.Step, len(steps), broken.Reason)
			}
		}
	})
}

// fuzzSteps: each byte a tool call, name a, b or c (low nibble), with
// {"x":n} (n = high nibble % 4, 3 for no arguments).
func fuzzSteps(b []byte) []trajectory.Step {
	var steps []trajectory.Step
	for i, c := range b[:min(len(b), 6)] {
		s := trajectory.Step{N: i + 1, Kind: "tool", Name: string(rune('a' + c&0x0f%3))}
		if n := c >> 4 % 4; n < 3 {
			s.Input = json.RawMessage(fmt.Sprintf(`{"x":%d}`, n))
		}
		steps = append(steps, s)
	}
	return steps
}

// fuzzRef: each byte a reference call, name any, a, b or c (low nibble),
// arguments any, exactly {"x":n}, ⊇ {} (any object), x >= n.
func fuzzRef(b []byte) []trajectory.Call {
	var ref []trajectory.Call
	for _, c := range b[:min(len(b), 6)] {
		var call trajectory.Call
		if k := c & 0x0f % 4; k > 0 {
			call.Name = string(rune('a' + k - 1))
		}
		n := int(c>>6) % 3
		switch c >> 4 % 4 {
		case 1:
			call.Args = trajectory.Exact(map[string]int{"x": n})
		case 2:
			call.Args = trajectory.Contains(map[string]int{})
		case 3:
			call.Args = trajectory.Where(fmt.Sprintf("x >= %d", n), func(a struct{ X *int }) bool { return a.X != nil && *a.X >= n })
		}
		ref = append(ref, call)
	}
	return ref
}

// refHolds decides by brute force.
func refHolds(mode trajectory.Mode, steps []trajectory.Step, ref []trajectory.Call) bool {
	switch mode {
	case trajectory.Strict:
		if len(steps) != len(ref) {
			return false
		}
		for i := range steps {
			if !ref[i].Matches(steps[i]) {
				return false
			}
		}
		return true
	case trajectory.Unordered:
		return len(steps) == len(ref) && inject(len(steps), len(ref), func(i, j int) bool { return ref[j].Matches(steps[i]) }, false)
	case trajectory.Subset:
		return inject(len(steps), len(ref), func(i, j int) bool { return ref[j].Matches(steps[i]) }, false)
	case trajectory.Superset:
		return inject(len(ref), len(steps), func(j, i int) bool { return ref[j].Matches(steps[i]) }, false)
	default:
		return inject(len(ref), len(steps), func(j, i int) bool { return ref[j].Matches(steps[i]) }, true)
	}
}

// inject reports whether each of n items can take its own one of m
// places, item i fitting place j when fits(i, j); increasing: the places
// in the items' order.
func inject(n, m int, fits func(i, j int) bool, increasing bool) bool {
	used := make([]bool, m)
	var try func(i, from int) bool
	try = func(i, from int) bool {
		if i == n {
			return true
		}
		start := 0
		if increasing {
			start = from
		}
		for j := start; j < m; j++ {
			if !used[j] && fits(i, j) {
				used[j] = true
				ok := try(i+1, j+1)
				used[j] = false
				if ok {
					return true
				}
			}
		}
		return false
	}
	return try(0, 0)
}
