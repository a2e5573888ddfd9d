// Package scorer holds deterministic, code-based judges: the cheap checks
// that should settle most episodes before any model-graded judge is called.
//
// Each scorer takes a function that extracts the reference answer from the
// sample's input, so it works with any input type:
//
//	scorer.Exact(func(q Question) string { return q.Answer })
package scorer

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

// Exact passes when the output equals the reference byte for byte.
func Exact[T any](want func(T) string) judge.Judge[T, string] {
	return compare(want, func(got, want string) bool { return got == want }, "exact")
}

// Normalized passes when output and reference are equal after Normalize.
func Normalized[T any](want func(T) string) judge.Judge[T, string] {
	return compare(want, func(got, want string) bool { return Normalize(got) == Normalize(want) }, "normalized")
}

// Contains passes when the output contains the reference (after Normalize).
func Contains[T any](want func(T) string) judge.Judge[T, string] {
	return compare(want, func(got, want string) bool { return strings.Contains(Normalize(got), Normalize(want)) }, "contains")
}

// Normalize lower-cases s, drops punctuation and the articles a, an and the,
// and folds white space: the SQuAD answer normalization.
func Normalize(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPunct(r) {
			return -1
		}
		return unicode.ToLower(r)
	}, s)
	words := strings.Fields(s)
	out := words[:0]
	for _, w := range words {
		if w != "a" && w != "an" && w != "the" {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

func compare[T any](want func(T) string, eq func(got, want string) bool, name string) judge.Judge[T, string] {
	return judge.Func[T, string](func(_ context.Context, ep *harness.Episode[T], got string) (judge.Verdict, error) {
		w := want(ep.Sample.Input)
		if eq(got, w) {
			return judge.Pass(""), nil
		}
		return judge.Fail(fmt.Sprintf("%s: got %s, want %s", name, clip(got), clip(w))), nil
	})
}

// Regex passes when the output matches the pattern the input gives.
func Regex[T any](pattern func(T) *regexp.Regexp) judge.Judge[T, string] {
	return judge.Func[T, string](func(_ context.Context, ep *harness.Episode[T], got string) (judge.Verdict, error) {
		re := pattern(ep.Sample.Input)
		if re.MatchString(got) {
			return judge.Pass(""), nil
		}
		return judge.Fail(fmt.Sprintf("regex: %s does not match %s", clip(got), re)), nil
	})
}

// Numeric passes when the output, parsed as a number (surrounding space
// and a trailing period ignored), is within tol of the reference. An output
// that is not a number fails with that reason.
func Numeric[T any](want func(T) float64, tol float64) judge.Judge[T, string] {
	return judge.Func[T, string](func(_ context.Context, ep *harness.Episode[T], got string) (judge.Verdict, error) {
		w := want(ep.Sample.Input)
		s := strings.TrimSuffix(strings.TrimSpace(got), ".")
		v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
		if err != nil {
			return judge.Fail(fmt.Sprintf("numeric: %s is not a number", clip(got))), nil
		}
		if d := v - w; d <= tol && -d <= tol {
			return judge.Pass(""), nil
		}
		return judge.Fail(fmt.Sprintf("numeric: got %g, want %g ± %g", v, w, tol)), nil
	})
}

// clip shortens s for a reason line.
func clip(s string) string {
	const max = 200
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strconv.Quote(s)
}
