package ci

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/eval/report"
)

// CommentOptions tune [WriteComment]. The zero value is valid.
type CommentOptions struct {
	// Key tells apart the comments of several comparisons on one pull
	// request; default the head's eval name. It is part of the marker.
	Key string
	// RunURL links the CI run that made the comparison (its logs,
	// artifacts).
	RunURL string
	// HeadLog is the head run's log, named in the command that prints a
	// regressed sample's transcripts.
	HeadLog string
	// MaxRows bounds each table (default 20); a line counts the rest.
	MaxRows int
}

// Marker is the hidden first line of the comment [WriteComment] writes
// for key: a CI step finds its earlier comment by it and edits it instead
// of adding another (a sticky comment). Characters other than letters,
// digits and ._/- are replaced, so that the key cannot end the HTML
// comment.
func Marker(key string) string {
	k := []byte(oneLine(key))
	for i, c := range k {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '/' || c == '-' && (i == 0 || k[i-1] != '-')) {
			k[i] = '_'
		}
	}
	return "<!-- proctor-compare:" + string(k) + " -->"
}

// WriteComment writes c as the Markdown body of a pull-request comment:
// the marker ([Marker]), the verdict, the paired difference of pass rates
// with its interval and McNemar's test, the tag groups that regressed,
// the regressed samples, and links. Sample IDs, tags and warnings are
// shown as code, escaped for GitHub's Markdown, so hostile text can
// neither break the tables nor add markup or mentions.
func WriteComment(w io.Writer, c *report.Comparison, opts *CommentOptions) error {
	var o CommentOptions
	if opts != nil {
		o = *opts
	}
	if o.Key == "" {
		o.Key = c.HeadEval
	}
	if o.MaxRows <= 0 {
		o.MaxRows = 20
	}
	var b strings.Builder
	b.WriteString(Marker(o.Key) + "\n")
	verdict := "undecided"
	nonInferior, regressed := c.Decision(false)
	switch {
	case math.IsNaN(c.PassRate.Lo):
	case regressed:
		verdict = "regressed"
	case nonInferior:
		verdict = "no regression"
	default:
		verdict = "not shown non-inferior"
	}
	fmt.Fprintf(&b, "### proctor %s: %s\n\n", code(c.HeadEval), verdict)
	d := c.PassRate
	lv := fmt.Sprintf("%g%%", 100*c.Level)
	fmt.Fprintf(&b, "**Pass rate** %s → %s: **%s** (%s CI [%s, %s]; paired t p = %s) over %d paired samples; McNemar: %d pass → fail, %d fail → pass (p = %s).\n\n",
		pct(d.MeanA), pct(d.MeanB), pts(d.Mean), lv, pts(d.Lo), pts(d.Hi), pval(d.P), c.Paired, c.Regressions, c.Improvements, pval(c.McNemarP))
	for _, v := range c.Verdict() {
		fmt.Fprintf(&b, "- %s\n", v)
	}
	if c.WorstCase != nil {
		fmt.Fprintf(&b, "- %s\n", c.WorstCase.String())
	}
	b.WriteString("\n")

	var tags []report.TagDifference
	for _, t := range c.ByTag {
		if t.PassRate.Mean < 0 {
			tags = append(tags, t)
		}
	}
	slices.SortStableFunc(tags, func(x, y report.TagDifference) int { return cmp.Compare(x.PassRate.Mean, y.PassRate.Mean) })
	if len(tags) > 0 {
		fmt.Fprintf(&b, "#### Regressions by tag (%d groups)\n\n| tag | value | samples | base | head | head − base | %s CI | Holm p |\n|---|---|---|---|---|---|---|---|\n", len(tags), lv)
		for i, t := range tags {
			if i == o.MaxRows {
				fmt.Fprintf(&b, "\n… and %d more groups.\n", len(tags)-i)
				break
			}
			g := t.PassRate
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | [%s, %s] | %s |\n", code(t.Tag), code(t.Value), g.N,
				pct(g.MeanA), pct(g.MeanB), pts(g.Mean), pts(g.Lo), pts(g.Hi), pval(t.HolmP))
		}
		b.WriteString("\n")
	}

	var flips []report.Flip
	for _, f := range c.Flips {
		if f.Regression {
			flips = append(flips, f)
		}
	}
	if c.Regressions > 0 {
		fmt.Fprintf(&b, "#### Regressed samples (%d)\n\n", c.Regressions)
		if len(flips) > 0 {
			b.WriteString("| sample | base | head |\n|---|---|---|\n")
			for i, f := range flips {
				if i == o.MaxRows {
					break
				}
				fmt.Fprintf(&b, "| %s | %s | %s |\n", code(f.SampleID), pct(f.Base), pct(f.Head))
			}
		}
		if rest := c.Regressions - min(len(flips), o.MaxRows); rest > 0 {
			fmt.Fprintf(&b, "\n… and %d more.\n", rest)
		}
		if o.HeadLog != "" {
			fmt.Fprintf(&b, "\nTranscripts: %s\n", code("proctor trace "+o.HeadLog+" SAMPLE"))
		}
		b.WriteString("\n")
	}
	if len(c.Warnings) > 0 {
		b.WriteString("<details><summary>warnings</summary>\n\n")
		for _, w := range c.Warnings {
			fmt.Fprintf(&b, "- %s\n", code(clipText(w, 1024)))
		}
		b.WriteString("\n</details>\n\n")
	}
	fmt.Fprintf(&b, "base run %s → head run %s", code(c.BaseRunID), code(c.HeadRunID))
	if o.RunURL != "" {
		fmt.Fprintf(&b, " · [CI run](%s)", linkTarget(o.RunURL))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// code shows s as a Markdown code span on one line, fit for a table cell:
// white space and controls folded, at most 200 bytes, | escaped (GitHub
// splits cells on it even inside code), fenced by more backticks than s
// holds in a row.
func code(s string) string {
	s = strings.ReplaceAll(clipText(oneLine(s), 200), "|", `\|`)
	if s == "" {
		return "` `"
	}
	run, longest := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if longest > 0 {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// linkTarget makes u safe as a Markdown link's target: no spaces or
// parentheses to end it early.
func linkTarget(u string) string {
	return strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29", "\n", "", "\r", "").Replace(u)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

func pts(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%+.1f pts", 100*v)
}

func pval(p float64) string {
	switch {
	case math.IsNaN(p):
		return "–"
	case p < 0.001:
		return "<0.001"
	}
	return fmt.Sprintf("%.3f", p)
}
