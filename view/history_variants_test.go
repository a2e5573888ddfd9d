package view_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/history"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// variantsHistoryDir writes three runs of arith's variants a and b a day
// apart, on one dataset: a stays at the same skill; b falls far on the
// third day (wed).
func variantsHistoryDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d, r := range []struct {
		name  string
		skill map[string]float64
	}{{"mon", map[string]float64{"a": 0.9, "b": 0.8}}, {"tue", map[string]float64{"a": 0.9, "b": 0.8}}, {"wed", map[string]float64{"a": 0.9, "b": 0.1}}} {
		log := filepath.Join(dir, r.name+".jsonl")
		w, err := jsonl.Create(log, nil)
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(uint64(d), 9))
		start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).Add(time.Duration(d) * 24 * time.Hour)
		n := 0
		for _, v := range []string{"a", "b"} {
			for ep := range 2 {
				for i := range 40 {
					rec := record(rng, fmt.Sprintf("s-%02d", i), ep, i, r.skill[v], uint64(d))
					rec.RunID, rec.Variant, rec.ReusedFrom = r.name, v, ""
					rec.StartedAt = start.Add(time.Duration(n) * time.Second)
					require.NoError(t, w.Write(context.Background(), rec))
					n++
				}
			}
		}
		require.NoError(t, w.Close(context.Background()))
		require.NoError(t, manifest.Write(log, &manifest.Manifest{Schema: manifest.Schema, RunID: r.name, Eval: "arith",
			CreatedAt: start, Epochs: 2, Seed: "1", Versions: manifest.Versions{Judge: "j1"},
			Variants: []manifest.Variant{{Name: "a", Harness: "ha1"}, {Name: "b", Harness: "hb1"}},
			Dataset:  manifest.DatasetIdentity{Samples: 40, Hash: "sum:40"}}))
	}
	return dir
}

// TestHistoryPageVariants: each variant of a log of variants is a trend
// of its own on the history page: a row per log and variant whose pass
// rate is history.ReadVariants' of that variant, a chart per variant,
// and drift of each variant against its own baseline (b's fall on wed
// is an alert against b's tue; a, steady, raises none). Before, the page
// showed one row per log with no pass rate (variants pooled describe no
// agent), and compared nothing.
func TestHistoryPageVariants(t *testing.T) {
	t.Parallel()
	dir := variantsHistoryDir(t)
	_, ts := serve(t, []string{dir}, nil)
	code, _, body := get(t, ts.URL+"/history?eval=arith")
	require.Equal(t, 200, code, body)

	table := body[strings.Index(body, `id="history"`):]
	table = table[:strings.Index(table, "</table>")]
	require.Contains(t, table, "<th>variant</th>")
	rows := regexp.MustCompile(`<td><a href="/run/(\w+)\.jsonl">\w+\.jsonl</a></td><td>(\w)</td><td>([^<]*)</td><td>([^<]*)</td>`).FindAllStringSubmatch(table, -1)
	require.Len(t, rows, 6, "a row per log and variant")
	require.Equal(t, []string{"wed", "a"}, rows[0][1:3], "the latest first, a log's variants in order")
	require.Equal(t, []string{"wed", "b"}, rows[1][1:3])
	for _, row := range rows {
		runs, err := history.ReadVariants(filepath.Join(dir, row[1]+".jsonl"), nil)
		require.NoError(t, err)
		var want *history.Run
		for _, r := range runs {
			if r.Variant == row[2] {
				want = r
			}
		}
		require.NotNil(t, want, "%s %s", row[1], row[2])
		require.True(t, strings.HasPrefix(row[3], fmt.Sprintf("%.1f%%", 100*want.PassRate)), "%s %s: %q, ReadVariants %.4f", row[1], row[2], row[3], want.PassRate)
		require.Equal(t, fmt.Sprintf("[%.1f%%, %.1f%%]", 100*want.Lo, 100*want.Hi), row[4], "%s %s", row[1], row[2])
	}

	banner := body[strings.Index(body, `id="drift-banner"`):]
	banner = banner[:strings.Index(banner, "</div>")]
	require.Equal(t, 1, strings.Count(banner, "<p>"), "one alert: b on wed")
	require.Contains(t, banner, `run <a href="/run/wed.jsonl">wed.jsonl</a> variant b`)
	require.Contains(t, banner, `baseline <a href="/run/tue.jsonl">tue.jsonl</a>`, "b's own previous run")
	require.NotContains(t, banner, "/compare?", "the compare page compares whole logs, not variants")

	for _, v := range []string{"a", "b"} {
		require.Contains(t, body, "pass rate of arith variant "+v+" over time")
		require.Contains(t, body, "cost per run of variant "+v)
	}
	require.Equal(t, 2*3*3, strings.Count(body, `<circle cx=`), "three runs on each of the three charts of each variant")

	// Pinned to mon: each variant against its own row of mon.
	code, _, body = get(t, ts.URL+"/history?eval=arith&baseline=mon.jsonl")
	require.Equal(t, 200, code)
	require.Len(t, regexp.MustCompile(`<td><a href="/run/mon.jsonl">mon.jsonl</a></td><td>(&#43;|-)\d`).FindAllString(body, -1), 4, "tue and wed of each variant against mon")
}
