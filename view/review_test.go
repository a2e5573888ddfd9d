package view_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/internal/filelock"
	"github.com/proctor-evals/proctor/internal/numfmt"
	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/view"
)

const secret = "0123456789abcdef0123456789abcdef"

// reviewRun writes writeRun's log and a queue of 12 of its episodes, and
// serves it in review mode.
func reviewRun(t *testing.T) (log string, q *review.Queue, ts string) {
	t.Helper()
	return reviewRunShowing(t, false)
}

// reviewRunShowing is reviewRun, showing the judge's verdict or not.
func reviewRunShowing(t *testing.T, show bool) (log string, q *review.Queue, ts string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "run.jsonl")
	writeRun(t, log, 0.7, 1)
	var recs []sink.Record
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		recs = append(recs, r)
	}
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 3, Count: 12})
	require.NoError(t, err)
	require.NoError(t, review.WriteQueue(review.QueuePath(log), q))
	_, srv := serve(t, []string{dir}, &view.Options{Review: &view.ReviewOptions{Log: log, Secret: secret, ShowVerdict: show}})
	return log, q, srv.URL
}

func postGrade(t *testing.T, target string, form url.Values, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReviewWritePathIsGuarded: a grade needs a loopback Host, the review
// secret, and a same-origin request; anything else is refused and writes
// nothing; the other pages stay read-only.
func TestReviewWritePathIsGuarded(t *testing.T) {
	t.Parallel()
	log, q, base := reviewRun(t)
	e := q.Entries[0]
	form := func(key string) url.Values {
		return url.Values{"key": {key}, "reviewer": {"ana"}, "sample_id": {e.SampleID}, "epoch": {itoa(e.Epoch)}, "grade": {"fail"}}
	}
	for name, tc := range map[string]struct {
		form   url.Values
		header http.Header
		want   int
	}{
		"non-loopback host":  {form(secret), http.Header{"Host": {"evil.example:80"}}, http.StatusMisdirectedRequest},
		"missing secret":     {form(""), nil, http.StatusForbidden},
		"wrong secret":       {form(strings.Repeat("f", len(secret))), nil, http.StatusForbidden},
		"short secret":       {form(secret[:8]), nil, http.StatusForbidden},
		"cross-site post":    {form(secret), http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		"cross-origin post":  {form(secret), http.Header{"Origin": {"http://evil.example"}}, http.StatusForbidden},
		"not in the queue":   {url.Values{"key": {secret}, "reviewer": {"ana"}, "sample_id": {"nope"}, "epoch": {"0"}, "grade": {"pass"}}, nil, http.StatusBadRequest},
		"no reviewer":        {url.Values{"key": {secret}, "reviewer": {" "}, "sample_id": {e.SampleID}, "epoch": {itoa(e.Epoch)}, "grade": {"pass"}}, nil, http.StatusBadRequest},
		"no grade":           {url.Values{"key": {secret}, "reviewer": {"ana"}, "sample_id": {e.SampleID}, "epoch": {itoa(e.Epoch)}}, nil, http.StatusBadRequest},
		"score out of range": {url.Values{"key": {secret}, "reviewer": {"ana"}, "sample_id": {e.SampleID}, "epoch": {itoa(e.Epoch)}, "grade": {"pass"}, "score": {"2"}}, nil, http.StatusBadRequest},
	} {
		code, body := postGrade(t, base+"/review/grade", tc.form, tc.header)
		assert.Equal(t, tc.want, code, "%s: %s", name, body)
	}
	rs, _, err := review.Read(review.FilePath(log))
	require.NoError(t, err)
	require.Empty(t, rs, "no refused request wrote anything")

	// Other pages stay read-only, in review mode too.
	code, _ := postGrade(t, base+"/run/run.jsonl", form(secret), nil)
	assert.Equal(t, http.StatusMethodNotAllowed, code)

	// Same origin, with the secret: written, blind.
	code, _ = postGrade(t, base+"/review/grade", form(secret), http.Header{"Origin": {base}, "Sec-Fetch-Site": {"same-origin"}})
	require.Equal(t, http.StatusSeeOther, code)
	rs, _, err = review.Read(review.FilePath(log))
	require.NoError(t, err)
	require.Len(t, rs, 1)
	assert.Equal(t, review.Review{SampleID: e.SampleID, Epoch: e.Epoch, Reviewer: "ana", Time: rs[0].Time, RunID: q.RunID}, rs[0], "blind, of the queue's run")

	// The review file is not served as a run.
	_, _, body := get(t, base+"/")
	assert.NotContains(t, body, "reviews.jsonl")
}

var itoa = strconv.Itoa

// TestReviewNeedsAQueueAndOneWriter: review mode needs a queue, a secret,
// and the review file to itself.
func TestReviewNeedsAQueueAndOneWriter(t *testing.T) {
	t.Parallel()
	log, _, _ := reviewRun(t)
	_, err := view.New([]string{log}, &view.Options{Review: &view.ReviewOptions{Log: log, Secret: secret}})
	var locked *filelock.LockedError
	require.ErrorAs(t, err, &locked, "a second review server of the same log")
	_, err = view.New([]string{log}, &view.Options{Review: &view.ReviewOptions{Log: log, Secret: "short"}})
	require.ErrorContains(t, err, "secret")
	other := filepath.Join(t.TempDir(), "other.jsonl")
	writeRun(t, other, 0.5, 2)
	_, err = view.New([]string{other}, &view.Options{Review: &view.ReviewOptions{Log: other, Secret: secret}})
	require.ErrorContains(t, err, "no review queue")
}

// TestBrowserReview grades three episodes of the queue in a real headless
// Chromium, with the keyboard: the judge's verdict is hidden until each is
// graded, progress moves, the review file holds three blind reviews, and
// the numbers on the page change as the report does.
func TestBrowserReview(t *testing.T) {
	ctx := browser(t, 1200, 1000)
	log, q, base := reviewRun(t)

	navigate(t, ctx, base+"/review?key="+secret)
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys("#reviewer", "ana"), chromedp.Submit("#reviewer"), chromedp.WaitVisible("#grade")))
	require.Equal(t, "0", eval[string](t, ctx, `document.getElementById("done").textContent`))
	require.Equal(t, "12", eval[string](t, ctx, `document.getElementById("total").textContent`))
	before := eval[string](t, ctx, `document.querySelector("#n-ppi").cells[1].textContent`)
	require.Equal(t, "n/a", before, "no reviews: no prediction-powered rate")

	keys := []string{"p", "f", "p"}
	for i, k := range keys {
		waitFor(t, ctx, `document.getElementById("grade").dataset.keys === "on"`) // the script is loaded
		require.True(t, eval[bool](t, ctx, `document.getElementById("blind") !== null && document.getElementById("verdict") === null`), "blind before grading")
		sample := eval[string](t, ctx, `document.getElementById("episode").dataset.sample`)
		require.Equal(t, q.Entries[i].SampleID, sample, "the queue's order")
		require.True(t, eval[bool](t, ctx, notPwned))
		if i == 1 { // a note, typed in its field: the keys are the field's
			require.NoError(t, chromedp.Do(ctx, chromedp.KeyEvent("n"), chromedp.SendKeys("#note", "fp <b>x</b>"), chromedp.SendKeys("#note", kb.Escape)))
		}
		require.NoError(t, chromedp.Do(ctx, chromedp.KeyEvent(k)))
		waitFor(t, ctx, `document.getElementById("done") && document.getElementById("done").textContent === "`+itoa(i+1)+`" && document.getElementById("graded") !== null`)
		said := eval[string](t, ctx, `document.getElementById("judge-said").textContent`)
		require.Contains(t, []string{"pass", "fail"}, said, "the verdict is shown once graded")
	}

	rs, _, err := review.Read(review.FilePath(log))
	require.NoError(t, err)
	require.Len(t, rs, 3)
	for i, r := range rs {
		assert.Equal(t, q.Entries[i].SampleID, r.SampleID)
		assert.Equal(t, "ana", r.Reviewer)
		assert.Equal(t, keys[i] == "p", r.Pass)
		assert.False(t, r.SawVerdict)
	}
	assert.Equal(t, "fp <b>x</b>", rs[1].Note)

	// The page's numbers are the report's.
	var recs []sink.Record
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		recs = append(recs, r)
	}
	sum := review.Summarize(review.Episodes(recs), q, rs, review.Options{})
	require.Equal(t, 3, sum.PPI.Labelled)
	got := eval[string](t, ctx, `document.querySelector("#n-ppi").cells[1].textContent`)
	assert.NotEqual(t, before, got)
	assert.Equal(t, numfmt.Pct(sum.PPI.Mean), got)
	assert.Equal(t, numfmt.Pct(sum.ReviewsOnly.Mean), eval[string](t, ctx, `document.querySelector("#n-reviews-only").cells[1].textContent`))
}

// waitFor polls js in the page until it is true, through the navigation a
// form's submission starts.
func waitFor(t *testing.T, ctx context.Context, js string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err == nil && ok {
			return
		}
	}
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	t.Fatalf("timed out waiting for %s; the page:\n%s", js, body)
}

// TestBlindReviewLinksNoTranscript: the transcript holds the judge's
// calls (a model judge's answer and verdict), so a blind review page does
// not link it before the grade; it does once the episode is graded, and
// before it when the verdict is shown.
func TestBlindReviewLinksNoTranscript(t *testing.T) {
	t.Parallel()
	_, q, base := reviewRun(t)
	page := base + "/review?" + url.Values{"key": {secret}, "reviewer": {"ana"}}.Encode()
	_, _, body := get(t, page)
	require.Contains(t, body, `id="blind"`)
	require.NotContains(t, body, "/transcript/", "blind: no link to the judge's calls")

	e := q.Entries[0]
	code, _ := postGrade(t, base+"/review/grade", url.Values{"key": {secret}, "reviewer": {"ana"}, "sample_id": {e.SampleID}, "epoch": {itoa(e.Epoch)}, "grade": {"pass"}}, nil)
	require.Equal(t, http.StatusSeeOther, code)
	_, _, body = get(t, page+"&"+url.Values{"graded": {e.SampleID}, "ge": {itoa(e.Epoch)}}.Encode())
	require.Contains(t, body, `id="graded-transcript"`, "graded: the transcript is linked")
	require.NotContains(t, body, `id="transcript"`, "the next episode is still blind")

	// With the verdict shown, the transcript is linked before the grade.
	_, _, base = reviewRunShowing(t, true)
	_, _, body = get(t, base+"/review?"+url.Values{"key": {secret}, "reviewer": {"ana"}}.Encode())
	require.Contains(t, body, `id="transcript"`)
}
