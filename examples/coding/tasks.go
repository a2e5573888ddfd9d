package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/proctor-evals/proctor/dataset"
)

// taskDef is a task as this program writes it: the repository at the buggy
// commit, the reference patch and the stand-in agent's plausible wrong one.
type taskDef struct {
	id, difficulty, lang string
	problem              string
	files                map[string]string
	test                 []string
	gold, wrong          Patch
}

// writeRepos writes each task's repository under dir and returns the
// dataset, and the wrong patches the stand-in agent knows, by sample ID.
func writeRepos(dir string, defs []taskDef) (dataset.Slice[Task], map[string]Patch, error) {
	var d dataset.Slice[Task]
	wrong := map[string]Patch{}
	for _, def := range defs {
		repo := filepath.Join(dir, def.id)
		if err := writeFiles(repo, def.files); err != nil {
			return nil, nil, err
		}
		d = append(d, dataset.Sample[Task]{
			ID:    def.id,
			Input: Task{Repo: repo, Problem: def.problem, Test: def.test, Gold: def.gold},
			Tags:  map[string]string{"difficulty": def.difficulty, "lang": def.lang},
		})
		wrong[def.id] = def.wrong
	}
	return d, wrong, nil
}

func writeFiles(dir string, files map[string]string) error {
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// --- Go tasks: package calc, judged by go test ---

const goMod = "module example.com/calc\n\ngo 1.22\n"

var goTest = []string{"go", "test", "-count=1", "./..."}

func goTask(id, difficulty, problem, name, buggy, test, gold, wrong string) taskDef {
	src := func(body string) string { return "package calc\n\n" + strings.TrimLeft(body, "\n") }
	return taskDef{
		id: id, difficulty: difficulty, lang: "go", problem: problem, test: goTest,
		files: map[string]string{
			"go.mod":          goMod,
			name + ".go":      src(buggy),
			name + "_test.go": src(test),
			"doc.go":          "// Package calc holds small numeric and string helpers.\npackage calc\n",
		},
		gold:  Patch{File: name + ".go", Content: src(gold)},
		wrong: Patch{File: name + ".go", Content: src(wrong)},
	}
}

func goTasks() []taskDef {
	return []taskDef{
		goTask("go-abs", "easy", "calc.Abs returns negative numbers unchanged: Abs(-7) should be 7.", "abs", `
// Abs returns the absolute value of x.
func Abs(x int) int {
	if x < 0 {
		return x
	}
	return x
}
`, `
import "testing"

func TestAbs(t *testing.T) {
	for _, c := range []struct{ in, want int }{{0, 0}, {3, 3}, {-1, 1}, {-7, 7}} {
		if got := Abs(c.in); got != c.want {
			t.Errorf("Abs(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}
`, `
// Abs returns the absolute value of x.
func Abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
`, `
// Abs returns the absolute value of x.
func Abs(x int) int {
	if x < -1 {
		return -x
	}
	return x
}
`),
		goTask("go-clamp", "medium", "calc.Clamp returns the wrong bound: Clamp(-5, 0, 10) gives 10, want 0.", "clamp", `
// Clamp limits x to [lo, hi].
func Clamp(x, lo, hi int) int {
	if x < lo {
		return hi
	}
	if x > hi {
		return lo
	}
	return x
}
`, `
import "testing"

func TestClamp(t *testing.T) {
	for _, c := range []struct{ x, want int }{{-5, 0}, {0, 0}, {5, 5}, {10, 10}, {15, 10}} {
		if got := Clamp(c.x, 0, 10); got != c.want {
			t.Errorf("Clamp(%d, 0, 10) = %d, want %d", c.x, got, c.want)
		}
	}
}
`, `
// Clamp limits x to [lo, hi].
func Clamp(x, lo, hi int) int {
	if x < lo {
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}
`, `
// Clamp limits x to [lo, hi].
func Clamp(x, lo, hi int) int {
	if x < lo {
		return lo
	}
	if x > hi {
		return lo
	}
	return x
}
`),
		goTask("go-mean", "medium", "calc.Mean panics on an empty slice (it should return 0) and ignores the first value.", "mean", `
// Mean returns the arithmetic mean of xs, 0 for none.
func Mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs[1:] {
		sum += x
	}
	return sum / float64(len(xs))
}
`, `
import "testing"

func TestMean(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{4}, 4}, {[]float64{1, 2, 3, 6}, 3}} {
		if got := Mean(c.in); got != c.want {
			t.Errorf("Mean(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
`, `
// Mean returns the arithmetic mean of xs, 0 for none.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
`, `
// Mean returns the arithmetic mean of xs, 0 for none.
func Mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
`),
		goTask("go-reverse", "hard", "calc.Reverse garbles non-ASCII text: Reverse(\"héllo\") is not \"olléh\".", "reverse", `
// Reverse returns s with its characters in reverse order.
func Reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}
`, `
import "testing"

func TestReverse(t *testing.T) {
	for _, c := range []struct{ in, want string }{{"", ""}, {"abc", "cba"}, {"héllo", "olléh"}, {"世界!", "!界世"}} {
		if got := Reverse(c.in); got != c.want {
			t.Errorf("Reverse(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
`, `
// Reverse returns s with its characters in reverse order.
func Reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}
`, `
// Reverse returns s with its characters in reverse order.
func Reverse(s string) string {
	var out []byte
	for i := len(s) - 1; i >= 0; i-- {
		out = append(out, s[i])
	}
	return string(out)
}
`),
	}
}

// --- shell tasks: lib.sh, judged by sh test.sh (busybox is enough) ---

var shTest = []string{"sh", "test.sh"}

// shTestScript is the repository's test runner: it sources lib.sh, runs
// the cases and exits non-zero when one fails.
func shTestScript(cases string) string {
	return `#!/bin/sh
# Tests for lib.sh. Run: sh test.sh
. ./lib.sh
fails=0
expect() {
	want=$1
	shift
	got=$("$@")
	if [ "$got" = "$want" ]; then
		echo "ok   $*"
	else
		echo "FAIL $*: got '$got', want '$want'"
		fails=$((fails + 1))
	fi
}
` + strings.TrimLeft(cases, "\n") + `if [ "$fails" -ne 0 ]; then
	echo "$fails failed"
	exit 1
fi
echo PASS
`
}

func shTask(id, difficulty, problem, buggy, cases, gold, wrong string) taskDef {
	lib := func(body string) string { return "# lib.sh: small shell helpers.\n" + strings.TrimLeft(body, "\n") }
	return taskDef{
		id: id, difficulty: difficulty, lang: "sh", problem: problem, test: shTest,
		files: map[string]string{"lib.sh": lib(buggy), "test.sh": shTestScript(cases)},
		gold:  Patch{File: "lib.sh", Content: lib(gold)},
		wrong: Patch{File: "lib.sh", Content: lib(wrong)},
	}
}

func shellTasks() []taskDef {
	return []taskDef{
		shTask("sh-max", "easy", "max returns the smaller of its two arguments.", `
max() { if [ "$1" -lt "$2" ]; then echo "$1"; else echo "$2"; fi; }
`, `
expect 3 max 1 3
expect 3 max 3 1
expect -1 max -1 -5
expect 10 max 10 9
expect 4 max 4 4
`, `
max() { if [ "$1" -gt "$2" ]; then echo "$1"; else echo "$2"; fi; }
`, `
max() { if [ "$1" -gt "$2" ]; then echo "$1"; fi; }
`),
		shTask("sh-sum", "medium", "sum drops its first argument: sum 1 2 3 prints 5, want 6; sum with no arguments must print 0.", `
sum() { shift; t=0; for n in "$@"; do t=$((t + n)); done; echo "$t"; }
`, `
expect 6 sum 1 2 3
expect 5 sum 5
expect 0 sum
expect 0 sum -2 2
`, `
sum() { t=0; for n in "$@"; do t=$((t + n)); done; echo "$t"; }
`, `
sum() { t=$1; for n in "$@"; do t=$((t + n)); done; echo "$t"; }
`),
		shTask("sh-slug", "hard", "slug must lowercase its argument and turn each run of spaces into one dash.", `
slug() { echo "$1" | tr ' ' '-'; }
`, `
expect hello-world slug "Hello World"
expect a-b slug "a  b"
expect proctor slug "Proctor"
`, `
slug() { echo "$1" | tr 'A-Z' 'a-z' | tr -s ' ' '-'; }
`, `
slug() { echo "$1" | tr 'A-Z ' 'a-z-'; }
`),
	}
}
