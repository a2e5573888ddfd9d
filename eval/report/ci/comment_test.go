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

// pair builds two runs of 40 samples tagged by area; the head fails the
// "db" samples the base passed.
func pair(t *testing.T, hostile string) (base, head *report.Report) {
	t.Helper()
	build := func(run string, fail func(i int) bool) *report.Report {
		var recs []sink.Record
		for i := range 40 {
			id := fmt.Sprintf("s%02d", i)
			if i == 0 {
				id = hostile
			}
			area := "ui"
			if i%2 == 0 {
				area = "db"
			}
			r := sink.Record{Schema: 1, RunID: run, Eval: "harbor", SampleID: id, Tags: map[string]string{"area": area}, Status: sink.Pass, Score: 1}
			if fail(i) {
				r.Status, r.Score = sink.Fail, 0
			}
			recs = append(recs, r)
		}
		rep, err := report.FromRecords(func(yield func(sink.Record, error) bool) {
			for _, r := range recs {
				if !yield(r, nil) {
					return
				}
			}
		}, nil)
		require.NoError(t, err)
		return rep
	}
	base = build("base-run", func(i int) bool { return i%5 == 1 })
	head = build("head-run", func(i int) bool { return i%5 == 1 || i%2 == 0 && i < 24 })
	return base, head
}

func TestCommentIsStickyWithRegressionsByTag(t *testing.T) {
	t.Parallel()
	hostile := "a|b`c``d\n<img src=x onerror=alert(1)> @everyone"
	base, head := pair(t, hostile)
	c := report.Compare(base, head, &report.CompareOptions{Margin: 0.02})
	var buf bytes.Buffer
	require.NoError(t, ci.WriteComment(&buf, c, &ci.CommentOptions{RunURL: "https://ci.example/runs/7", HeadLog: "runs/head.jsonl"}))
	body := buf.String()
	lines := strings.Split(body, "\n")
	require.Equal(t, "<!-- proctor-compare:harbor -->", lines[0], "the marker comes first")
	require.Contains(t, body, "### proctor `harbor`: regressed")
	require.Contains(t, body, "**Pass rate** 80.0% → 55.0%: **-25.0 pts**")
	require.Contains(t, body, "#### Regressions by tag (1 groups)")
	require.Contains(t, body, "| `area` | `db` | 20 | 80.0% | 30.0% | -50.0 pts |")
	require.Contains(t, body, "#### Regressed samples (10)")
	require.Contains(t, body, "[CI run](https://ci.example/runs/7)")
	require.Contains(t, body, "`proctor trace runs/head.jsonl SAMPLE`")
	// Every table row has as many cell separators as its header: a | in
	// an ID is escaped, a newline folded.
	cols := 0
	for _, l := range lines {
		if !strings.HasPrefix(l, "|") {
			cols = 0
			continue
		}
		n := strings.Count(l, "|") - strings.Count(l, `\|`)
		if cols == 0 {
			cols = n
		}
		require.Equal(t, cols, n, "row %q", l)
	}
	require.Contains(t, body, "| ``` a\\|b`c``d <img src=x onerror=alert(1)> @everyone ``` | 100.0% | 0.0% |", "the hostile ID is code: no markup, no mention")
}

func TestMarkerCannotEndTheComment(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"harbor":            "<!-- proctor-compare:harbor -->",
		"tb/easy-1.0":       "<!-- proctor-compare:tb/easy-1.0 -->",
		"x --> <b>y</b> --": "<!-- proctor-compare:x_-____b_y_/b__-_ -->",
		"a--b\n-->":         "<!-- proctor-compare:a-_b_-__ -->",
	} {
		got := ci.Marker(key)
		require.Equal(t, want, got, "key %q", key)
		require.NotContains(t, got[len("<!--"):len(got)-len("-->")], "--", "key %q", key)
	}
}
