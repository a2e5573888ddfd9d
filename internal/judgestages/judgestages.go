// Package judgestages counts the calls of each stage of an episode's
// judge (its path through the combinators, as a record's error_source
// names it: "judge/cascade.expensive/rubric") and how many gave a
// verdict, and writes and reads them in the form of a record's
// judge_stages field.
//
// The form is one entry per stage, sorted by path and joined by ",":
// PATH=CALLS/VERDICTS, with "%" and "," in a path written %25 and %2C
// ("judge/cascade.cheap=1/1,judge/cascade.expensive/rubric=1/0"). It is a
// string so that every sink and reader carries it as it carries
// error_source.
package judgestages

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Count is one stage's calls and those that gave a verdict.
type Count struct {
	Path     string
	Calls    int
	Verdicts int
}

// Tally is an episode's counts. It is not safe for concurrent use.
type Tally []Count

// Add counts a call of the stage at path, which gave a verdict or not.
func (t *Tally) Add(path string, verdict bool) {
	i := slices.IndexFunc(*t, func(c Count) bool { return c.Path == path })
	if i < 0 {
		*t = append(*t, Count{Path: path})
		i = len(*t) - 1
	}
	(*t)[i].Calls++
	if verdict {
		(*t)[i].Verdicts++
	}
}

var escaper = strings.NewReplacer("%", "%25", ",", "%2C")

// String returns the counts in a record's judge_stages form; "" for none.
func (t Tally) String() string {
	if len(t) == 0 {
		return ""
	}
	s := slices.SortedFunc(slices.Values(t), func(a, b Count) int { return strings.Compare(a.Path, b.Path) })
	var b []byte
	for i, c := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, escaper.Replace(c.Path)...)
		b = append(b, '=')
		b = strconv.AppendInt(b, int64(c.Calls), 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(c.Verdicts), 10)
	}
	return string(b)
}

// Parse calls fn with each count of s, a record's judge_stages field. A
// malformed entry is an error naming it; the entries before it were given
// to fn.
func Parse(s string, fn func(Count)) error {
	for entry := range strings.SplitSeq(s, ",") {
		if s == "" {
			return nil
		}
		eq := strings.LastIndexByte(entry, '=')
		calls, verdicts, ok := strings.Cut(entry[eq+1:], "/")
		c := Count{}
		var err1, err2 error
		c.Calls, err1 = strconv.Atoi(calls)
		c.Verdicts, err2 = strconv.Atoi(verdicts)
		path, err3 := unescape(entry[:max(eq, 0)])
		if eq <= 0 || !ok || err1 != nil || err2 != nil || err3 != nil || c.Calls < 0 || c.Verdicts < 0 || c.Verdicts > c.Calls {
			return fmt.Errorf("judge_stages: malformed entry %q (want PATH=CALLS/VERDICTS)", entry)
		}
		c.Path = path
		fn(c)
	}
	return nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(s[i:], "%2C"):
			b.WriteByte(',')
		default:
			return "", fmt.Errorf("bad escape in %q", s)
		}
		i += 2
	}
	return b.String(), nil
}
