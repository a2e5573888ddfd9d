package view_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/view"
)

// historyDir writes three runs of arith a day apart on one dataset and
// one harness and judge: two alike, the third far worse (the provider
// changed under the agent); a fourth with a new harness version.
func historyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, r := range []struct {
		name    string
		skill   float64
		seed    uint64
		harness string
	}{{"mon", 0.9, 1, "h1"}, {"tue", 0.9, 2, "h1"}, {"wed", 0.2, 3, "h1"}, {"thu", 0.9, 4, "h2"}} {
		log := filepath.Join(dir, r.name+".jsonl")
		writeRun(t, log, r.skill, r.seed)
		require.NoError(t, manifest.Write(log, &manifest.Manifest{Schema: manifest.Schema, RunID: r.name, Eval: "arith",
			CreatedAt: time.Now(), Epochs: 3, Seed: "1", Versions: manifest.Versions{Harness: r.harness, Judge: "j1"},
			Dataset: manifest.DatasetIdentity{Samples: 30, Hash: "sum:30"}}))
	}
	return dir
}

func TestHistoryPage(t *testing.T) {
	t.Parallel()
	_, ts := serve(t, []string{historyDir(t)}, nil)

	code, _, body := get(t, ts.URL+"/")
	require.Equal(t, 200, code)
	require.Contains(t, body, `href="/history?eval=arith"`, "the runs page links each eval's history")

	code, _, body = get(t, ts.URL+"/history?eval=arith")
	require.Equal(t, 200, code, body)
	banner := body[strings.Index(body, `id="drift-banner"`):]
	banner = banner[:strings.Index(banner, "</div>")]
	require.Contains(t, banner, `run <a href="/run/wed.jsonl">wed.jsonl</a>`)
	require.Contains(t, banner, `baseline <a href="/run/tue.jsonl">tue.jsonl</a>`)
	require.Contains(t, banner, "drift outside the agent")
	require.Contains(t, banner, `the agent changed: harness &#34;h1&#34; → &#34;h2&#34;`, "thu's recovery is a change too, the agent's")
	require.NotContains(t, banner, `run <a href="/run/tue.jsonl">`, "tue is within chance of mon")
	require.Less(t, strings.Index(banner, "thu.jsonl"), strings.Index(banner, "wed.jsonl"), "the latest alert first")
	require.Equal(t, 4, strings.Count(body, `<circle cx=`)/3, "four runs on each of the three charts")
	require.Equal(t, 2, strings.Count(body, `class="alert"`), "two ringed points")
	require.Contains(t, body, ">harness</text>", "the harness change is marked")
	require.Equal(t, 2, strings.Count(body, `<tr class="drift">`))

	// By tag: one chart per value.
	code, _, body = get(t, ts.URL+"/history?eval=arith&tag=difficulty")
	require.Equal(t, 200, code)
	for _, v := range []string{"easy", "medium", "hard"} {
		require.Contains(t, body, "pass rate of difficulty="+v+" over time")
	}

	// A pinned baseline: every run against mon.
	code, _, body = get(t, ts.URL+"/history?eval=arith&baseline=mon.jsonl")
	require.Equal(t, 200, code)
	require.Contains(t, body, "pinned: mon.jsonl")
	require.Equal(t, 3, strings.Count(body, `<a href="/run/mon.jsonl">mon.jsonl</a></td><td><a href="/compare?`), "tue, wed and thu against mon")

	code, _, _ = get(t, ts.URL+"/history?eval=none")
	require.Equal(t, 404, code)
	code, _, _ = get(t, ts.URL+"/history?eval=arith&baseline=nosuch")
	require.Equal(t, 404, code)
}

// TestHistoryPageNoDrift: runs within chance of each other raise no
// banner.
func TestHistoryPageNoDrift(t *testing.T) {
	t.Parallel()
	dir := historyDir(t)
	for _, n := range []string{"wed", "thu"} {
		require.NoError(t, os.Remove(filepath.Join(dir, n+".jsonl")))
	}
	_, ts := serve(t, []string{dir}, nil)
	code, _, body := get(t, ts.URL+"/history?eval=arith")
	require.Equal(t, 200, code)
	require.NotContains(t, body, "drift-banner")
	require.Contains(t, body, `id="no-drift"`)
}

// TestBrowserHistory drives the history page in a real headless
// Chromium: the banner names the drifted run, the charts draw every run
// with its time on the axis, and nothing the logs hold runs.
func TestBrowserHistory(t *testing.T) {
	ctx := browser(t, 1100, 1600)
	_, ts := serve(t, []string{historyDir(t)}, &view.Options{})
	navigate(t, ctx, ts.URL+"/")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("a.history")), chromedp.WaitReady(chromedp.CSS("#history"))))
	require.Equal(t, "history of arith", eval[string](t, ctx, `document.querySelector("h1").textContent`))
	banner := eval[string](t, ctx, `document.getElementById("drift-banner").textContent`)
	require.Contains(t, banner, "wed.jsonl")
	require.Contains(t, banner, "drift outside the agent (the model provider, the environment)")
	require.Equal(t, 2, eval[int](t, ctx, `document.querySelectorAll("#drift-banner p").length`))
	require.Equal(t, 4, eval[int](t, ctx, `document.querySelectorAll("#history tr").length - 1`))
	// The first chart's points sit at their runs' times: a day apart,
	// equal gaps.
	xs := eval[[]float64](t, ctx, `[...document.querySelector("svg.plot").querySelectorAll("circle[r='4']")].map(c => c.cx.baseVal.value)`)
	require.Len(t, xs, 4)
	require.InDelta(t, xs[1]-xs[0], xs[2]-xs[1], 1)
	require.True(t, eval[bool](t, ctx, notPwned))
	// The compare link of the drifted run opens the paired comparison.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#drift-banner p:last-child a:last-child")), chromedp.WaitReady(chromedp.CSS("#comparison"))))
	require.Contains(t, eval[string](t, ctx, `document.querySelector("h1").textContent`), "wed.jsonl")
	navigate(t, ctx, ts.URL+"/history?eval=arith")
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	path := filepath.Join(screenshotDir(t), "history.png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)
}

// TestViewsShowTheWorstCase: the runs list and the history table showed
// the pass rate of the scored episodes alone: a run whose grader gave no
// verdict on most episodes read 100%. Now both show the worst case.
func TestViewsShowTheWorstCase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "broken.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	for i := range 10 {
		r := sink.Record{Schema: sink.SchemaVersion, RunID: "broken", Eval: "arith", SampleID: strconv.Itoa(i), Status: sink.Pass, Score: 1, StartedAt: time.Now()}
		if i >= 2 {
			r.Status, r.Score, r.ErrorSource = sink.Unscored, 0, "judge"
		}
		require.NoError(t, w.Write(t.Context(), r))
	}
	require.NoError(t, w.Close(t.Context()))
	_, ts := serve(t, []string{dir}, nil)
	for _, url := range []string{"/", "/history?eval=arith"} {
		code, _, body := get(t, ts.URL+url)
		require.Equal(t, 200, code)
		require.Contains(t, body, "100.0% (worst case 20.0%–100.0%)", url)
	}
}

// TestBrowserHistoryChartsSayWhatTheyShow: the per-tag charts had no
// visible label (their name was only the SVG's tooltip), and the latency
// chart promised bars to p95 that it did not draw.
func TestBrowserHistoryChartsSayWhatTheyShow(t *testing.T) {
	ctx := browser(t, 1100, 2400)
	_, ts := serve(t, []string{historyDir(t)}, &view.Options{})
	navigate(t, ctx, ts.URL+"/history?eval=arith&tag=difficulty")
	// The visible text just above each chart of the tag's section.
	labels := eval[[]string](t, ctx, `(() => {
		const h = [...document.querySelectorAll("h2")].find(h => h.textContent === "by difficulty");
		const out = [];
		for (let e = h.nextElementSibling; e && e.tagName !== "H2"; e = e.nextElementSibling) {
			const svg = e.matches("svg") ? e : e.querySelector("svg");
			if (!svg) continue;
			const above = e.previousElementSibling;
			out.push(above && above.getBoundingClientRect().height > 0 ? above.innerText : "");
		}
		return out;
	})()`)
	require.Equal(t, []string{"difficulty=easy", "difficulty=hard", "difficulty=medium"}, labels)
	bars := eval[int](t, ctx, `(() => {
		const h = [...document.querySelectorAll("h2")].find(h => h.textContent.startsWith("latency per run"));
		let e = h.nextElementSibling;
		const svg = e.matches("svg") ? e : e.querySelector("svg");
		return [...svg.querySelectorAll("line")].filter(l => !l.hasAttribute("stroke-dasharray") && l.x1.baseVal.value === l.x2.baseVal.value && Math.abs(l.y1.baseVal.value - l.y2.baseVal.value) > 4).length;
	})()`)
	require.Equal(t, 4, bars, "a bar from the median to p95 for each of the four runs")
}

// TestRunPageSaysLiveOnlyWhileWritten: every run page said "live",
// finished runs too. Now only while a run holds the log's lock.
func TestRunPageSaysLiveOnlyWhileWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	require.NoError(t, w.Write(t.Context(), sink.Record{Schema: sink.SchemaVersion, RunID: "r", Eval: "e", SampleID: "s", Status: sink.Pass, Score: 1, StartedAt: time.Now()}))
	require.NoError(t, w.Flush())
	_, ts := serve(t, []string{dir}, nil)
	_, _, body := get(t, ts.URL+"/run/run.jsonl")
	require.Contains(t, body, `id="live"`, "a run is writing it")
	require.NoError(t, w.Close(t.Context()))
	_, _, body = get(t, ts.URL+"/run/run.jsonl")
	require.NotContains(t, body, `id="live"`, "finished")
	require.Contains(t, body, `data-events=`, "the page still follows its log (a resume may write it)")
}

// TestHistoryPageJoinsShards: the history page compared each shard log
// of a run with the other shard of the same run, so drift never showed
// for sharded runs. Now the shard logs of a run are one run.
func TestHistoryPageJoinsShards(t *testing.T) {
	t.Parallel()
	dir := shardedRuns(t)
	_, ts := serve(t, []string{dir}, nil)
	code, _, body := get(t, ts.URL+"/history?eval=arith")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `id="drift-banner"`)
	require.Contains(t, body, "-40.0 pts")
	require.Equal(t, 2, strings.Count(body, "<tr><td>")+strings.Count(body, `<tr class="drift"><td>`), "two runs, not four logs")
}

// TestRunsListJoinsShards: the runs list showed each shard log of a run
// as a run of its own. Now a run written in shards is one row, its
// figures those of all its shards, each shard linked from it.
func TestRunsListJoinsShards(t *testing.T) {
	t.Parallel()
	_, ts := serve(t, []string{shardedRuns(t)}, nil)
	code, _, body := get(t, ts.URL+"/")
	require.Equal(t, 200, code, body)
	rows := regexp.MustCompile(`(?s)<tr><td>.*?</tr>`).FindAllString(body, -1)
	require.Len(t, rows, 2, "two runs, not four logs")
	for i, row := range rows { // newest first: the second run's 40 failures
		require.Contains(t, row, "arith-shared <span class=\"meta\">(2 shards:")
		require.Contains(t, row, "<td>100</td>", "every shard's episodes")
		require.Contains(t, row, []string{"60.0%", "100.0%"}[i])
		for shard := range 2 {
			require.Contains(t, row, fmt.Sprintf(`href="/run/run%d-%d.jsonl"`, 1-i, shard))
		}
	}
}

// shardedRuns writes two runs of one eval, each in two shard logs; the
// second is 40 points worse.
func shardedRuns(t *testing.T) string {
	dir := t.TempDir()
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for run, failFrom := range []int{100, 60} { // the second run 40 points worse
		for shard := range 2 {
			log := filepath.Join(dir, fmt.Sprintf("run%d-%d.jsonl", run, shard))
			w, err := jsonl.Create(log, nil)
			require.NoError(t, err)
			for i := shard; i < 100; i += 2 {
				r := sink.Record{Schema: sink.SchemaVersion, RunID: "arith-shared", Eval: "arith", SampleID: strconv.Itoa(i), Status: sink.Pass, Score: 1,
					StartedAt: start.Add(time.Duration(run)*24*time.Hour + time.Duration(i)*time.Second)}
				if i >= failFrom {
					r.Status, r.Score = sink.Fail, 0
				}
				require.NoError(t, w.Write(t.Context(), r))
			}
			require.NoError(t, w.Close(t.Context()))
			require.NoError(t, manifest.Write(log, &manifest.Manifest{Schema: manifest.Schema, RunID: "arith-shared", Eval: "arith",
				CreatedAt: start, Epochs: 1, Seed: "1", Shard: fmt.Sprintf("%d/2", shard), Versions: manifest.Versions{Harness: "h1", Judge: "j1"},
				Dataset: manifest.DatasetIdentity{Samples: 100, Hash: "sum:100"}}))
		}
	}
	return dir
}
