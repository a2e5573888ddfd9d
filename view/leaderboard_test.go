package view_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/view"
)

// evilVariant is a variant name an attacker shaped: the pages show it as
// text and run none of it.
const evilVariant = `<img src=x onerror="window.pwned=1">`

// writeVariants writes a log of three variants over 30 samples, two
// epochs, each with its own skill and cost per episode, and a manifest
// that says the run eliminated the weakest, named weakest.
func writeVariants(t *testing.T, log, weakest string) {
	t.Helper()
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(33, 33))
	variants := []struct {
		name       string
		skill, usd float64
	}{{"big", 0.85, 0.02}, {"small", 0.6, 0.002}, {weakest, 0.3, 0.01}}
	for i := range 30 {
		for _, v := range variants {
			for ep := range 2 {
				r := sink.Record{Schema: 1, RunID: "r1", Eval: "matrix", Variant: v.name, SampleID: fmt.Sprintf("s-%02d", i), Epoch: ep,
					Status: sink.Fail, CostUSD: v.usd, DurationMS: 100 + 10*float64(i)}
				if rng.Float64() < v.skill {
					r.Status, r.Score = sink.Pass, 1
				}
				require.NoError(t, w.Write(context.Background(), r))
			}
		}
	}
	require.NoError(t, w.Close(context.Background()))
	require.NoError(t, manifest.Write(log, &manifest.Manifest{Schema: manifest.Schema, Eval: "matrix", RunID: "r1",
		Eliminations: []manifest.Elimination{{Variant: weakest, By: "big", Alpha: 0.05, AfterSamples: 30, Saved: 120}}}))
}

// TestLeaderboardPage drives the leaderboard page in a real headless
// Chromium: its table shows the text report's numbers for each variant,
// the Pareto plot draws every variant with the frontier joined, the
// elimination says what it saved, and a hostile variant name is text.
func TestLeaderboardPage(t *testing.T) {
	ctx := browser(t, 1200, 1000)
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	writeVariants(t, log, evilVariant)
	_, ts := serve(t, []string{dir}, nil)
	want, err := report.FromLog(log, nil)
	require.NoError(t, err)
	lb := want.Leaderboard
	require.NotNil(t, lb)

	navigate(t, ctx, ts.URL+"/leaderboard/run.jsonl")
	rows := eval[[][]string](t, ctx, `[...document.querySelectorAll("#leaderboard tr[data-variant]")].map(r => [r.dataset.variant, r.querySelector(".rate").textContent, r.querySelector(".ci").textContent, r.querySelector(".cost").textContent, r.querySelector(".pbest").textContent, r.querySelector(".status").textContent])`)
	require.Len(t, rows, 3)
	text := want.String()
	for i, s := range lb.Variants {
		require.Equal(t, s.Variant, rows[i][0], "ranked as the report ranks them")
		// The text report's leaderboard line of the variant holds the same cells.
		line := ""
		for _, l := range strings.Split(text, "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == fmt.Sprint(i+1) && strings.HasPrefix(l, fmt.Sprint(i+1)+"  ") {
				line = l
			}
		}
		require.NotEmpty(t, line, "rank %d in the text report", i+1)
		for _, cell := range rows[i][1:5] {
			require.Contains(t, line, cell, "variant %s: the page and the text report differ", s.Variant)
		}
	}
	require.Equal(t, "eliminated by big", rows[2][5])
	require.Contains(t, eval[string](t, ctx, `document.querySelector("p.eliminated").textContent`), "stopped after 30 samples; saved 120 episodes (worse than big at α = 0.05)")
	// The plot: a point per variant, those on the frontier filled and joined.
	require.Equal(t, 3, eval[int](t, ctx, `document.querySelectorAll("#board svg.plot circle.variant").length`))
	require.Equal(t, len(lb.Frontier), eval[int](t, ctx, `document.querySelectorAll("#board svg.plot circle.on-frontier").length`))
	if len(lb.Frontier) > 1 {
		require.Equal(t, len(lb.Frontier), eval[int](t, ctx, `document.querySelector("#board svg.plot polyline.frontier").points.numberOfItems`))
	}
	require.Equal(t, 3, eval[int](t, ctx, `document.querySelectorAll("#pairs tr").length - 1`), "every pair")
	require.Contains(t, eval[string](t, ctx, `document.getElementById("headline").textContent`), "3 variants, not pooled")
	require.True(t, eval[bool](t, ctx, notPwned), "a hostile variant name ran")
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	shot := filepath.Join(screenshotDir(t), "leaderboard-page.png")
	require.NoError(t, os.WriteFile(shot, png, 0o644))
	t.Logf("screenshot: %s", shot)

	// The run page holds the same board and links to the page.
	navigate(t, ctx, ts.URL+"/run/run.jsonl")
	require.Equal(t, 3, eval[int](t, ctx, `document.querySelectorAll("#leaderboard tr[data-variant]").length`))
	require.Equal(t, "/leaderboard/run.jsonl", eval[string](t, ctx, `document.getElementById("board-link").getAttribute("href")`))
	require.True(t, eval[bool](t, ctx, notPwned))
}

// TestLeaderboardHTMLReport: proctor report -html of a log of variants
// holds the leaderboard, its Pareto plot and no pooled pass rate.
func TestLeaderboardHTMLReport(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	writeVariants(t, log, evilVariant)
	var b bytes.Buffer
	require.NoError(t, view.WriteHTML(&b, log, nil))
	page := b.String()
	for _, want := range []string{`id="leaderboard"`, `class="frontier"`, "3 variants, not pooled", "saved 120 episodes", "by variant (3 variants, not pooled)"} {
		require.Contains(t, page, want)
	}
	require.NotContains(t, page, evilVariant, "the hostile name is escaped")
	require.NotContains(t, page, `/leaderboard/`, "a static page links to no other page")
}

// TestLeaderboardPageOfALogWithoutVariants says so instead of failing.
func TestLeaderboardPageOfALogWithoutVariants(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRun(t, filepath.Join(dir, "run.jsonl"), 0.8, 1)
	_, ts := serve(t, []string{dir}, nil)
	code, _, body := get(t, ts.URL+"/leaderboard/run.jsonl")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `id="no-variants"`)
}

// TestRunsPageOfVariants: the runs page shows a log of variants by its
// best variant, never a pooled rate.
func TestRunsPageOfVariants(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeVariants(t, filepath.Join(dir, "run.jsonl"), "tiny")
	_, ts := serve(t, []string{dir}, nil)
	code, _, body := get(t, ts.URL+"/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "3 variants, best big 83.3%")
}
