package view_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/view"
)

// chromium finds Debian's chromium-headless-shell (or another Chromium):
// the test skips without one, and fails with PROCTOR_REQUIRE_TOOLS=1.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("PROCTOR_CHROMIUM"), "chromium-headless-shell", "/usr/lib/chromium/chromium-headless-shell", "chromium", "google-chrome"} {
		if name == "" {
			continue
		}
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" {
		t.Fatal("PROCTOR_REQUIRE_TOOLS=1 but no Chromium found (apt-get install chromium-headless-shell, or set PROCTOR_CHROMIUM)")
	}
	t.Skip("no Chromium found (apt-get install chromium-headless-shell, or set PROCTOR_CHROMIUM); set PROCTOR_REQUIRE_TOOLS=1 to fail instead")
	return ""
}

// browser starts a headless Chromium for the test and closes it (waiting
// for its process to exit) when the test ends.
func browser(t *testing.T, width, height int) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.WindowSize(width, height), chromedp.Flag("hide-scrollbars", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel() // closes the browser and waits for it
		cancelAlloc()
	})
	tctx, tcancel := context.WithTimeout(ctx, 45*time.Second)
	t.Cleanup(tcancel)
	return tctx
}

// screenshotDir is where screenshots go: PROCTOR_SCREENSHOT_DIR (a
// relative one from the repository's root), or the test's temporary
// directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("PROCTOR_SCREENSHOT_DIR"); d != "" {
		if !filepath.IsAbs(d) {
			d = filepath.Join("..", d) // go test runs in view/: relative to the repository's root
		}
		require.NoError(t, os.MkdirAll(d, 0o755))
		return d
	}
	return t.TempDir()
}

func navigate(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("#main"))))
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	require.NoError(t, err, js)
	return v
}

const notPwned = `typeof window.pwned === "undefined"`

// TestBrowser drives the viewer in a real headless Chromium: the run
// page shows the text report's numbers; a sample's transcript, full of
// hostile markup, loads on demand and runs none of it; a live run's page
// follows its log as records are appended.
func TestBrowser(t *testing.T) {
	ctx := browser(t, 1200, 1000)
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	writeRun(t, log, 0.8, 1)
	live := filepath.Join(dir, "live.jsonl")
	w, err := jsonl.Create(live, nil)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	appendRecords := func(from, to int) {
		for i := from; i < to; i++ {
			r := record(rng, fmt.Sprintf("l-%03d", i), 0, i, 0.7, 9)
			r.StartedAt = time.Now()
			require.NoError(t, w.Write(context.Background(), r))
		}
		require.NoError(t, w.Flush())
	}
	appendRecords(0, 5)
	t.Cleanup(func() { w.Close(context.Background()) })
	_, ts := serve(t, []string{dir}, &view.Options{Poll: 50 * time.Millisecond})

	// The run page: the text report's rows, read from the rendered DOM.
	navigate(t, ctx, ts.URL+"/run/run.jsonl")
	got := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll("#summary tr[id]")].map(r => [r.cells[0].textContent, r.cells[1].textContent]))`)
	want := textRows(textReport(t, log), summaryMetrics)
	for _, m := range summaryMetrics {
		require.Equal(t, want[m], got[m], "%s: the page in the browser and the text report differ", m)
	}
	require.GreaterOrEqual(t, eval[int](t, ctx, `document.querySelectorAll("svg.plot text").length`), 50, "charts with their text as <text>")
	require.True(t, eval[bool](t, ctx, notPwned))

	// A sample: open the first transcript, which the page fetches then.
	navigate(t, ctx, ts.URL+"/sample/run.jsonl?s=s-01")
	require.Equal(t, 3, eval[int](t, ctx, `document.querySelectorAll("section.episode").length`), "every epoch's record")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#epoch-0 details.transcript summary"))))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#epoch-0 .body table.events") !== null`, chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the transcript did not load")
	name := eval[string](t, ctx, `document.querySelector("#epoch-0 .body table.events tr.ev td:nth-child(4)").textContent`)
	require.Equal(t, evilName, name, "the hostile event name shows as text")
	require.Contains(t, eval[string](t, ctx, `document.querySelector("#epoch-0 .body").textContent`), evilOutput)
	require.True(t, eval[bool](t, ctx, notPwned), "hostile content ran")

	// A live run: records appended while the page is open raise its
	// done count, and the page's tables follow.
	navigate(t, ctx, ts.URL+"/run/live.jsonl")
	require.Equal(t, "5", eval[string](t, ctx, `document.getElementById("done").textContent`))
	appendRecords(5, 12)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("done").textContent === "12"`, chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the done count did not rise")
	appendRecords(12, 20)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(document.querySelector("#m-episodes td:nth-child(2)") || {}).textContent === "20 × 1 = 20 episodes"`, chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the page did not reload its content")
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	path := filepath.Join(screenshotDir(t), "browser-live.png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)
}

// TestScreenshots renders the screenshots in docs/:
//
//	PROCTOR_SCREENSHOT_DIR=docs go test ./view -run TestScreenshots
func TestScreenshots(t *testing.T) {
	ctx := browser(t, 1100, 1500)
	dir := t.TempDir()
	writeRun(t, filepath.Join(dir, "baseline.jsonl"), 0.85, 1)
	writeRun(t, filepath.Join(dir, "candidate.jsonl"), 0.6, 2)
	writeVariants(t, filepath.Join(dir, "matrix.jsonl"), "tiny")
	_, ts := serve(t, []string{dir}, &view.Options{TraceURL: "http://localhost:16686/trace/{trace_id}"})
	out := screenshotDir(t)
	for _, shot := range []struct{ name, path string }{
		{"run.png", "/run/candidate.jsonl"},
		{"compare.png", "/compare?base=baseline.jsonl&head=candidate.jsonl&margin=0.02"},
		{"leaderboard.png", "/leaderboard/matrix.jsonl"},
	} {
		navigate(t, ctx, ts.URL+shot.path)
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		require.NoError(t, err)
		require.Greater(t, len(png), 10_000, "an empty screenshot")
		require.NoError(t, os.WriteFile(filepath.Join(out, shot.name), png, 0o644))
		t.Logf("screenshot: %s", filepath.Join(out, shot.name))
	}
}
