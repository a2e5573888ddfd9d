package view_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/view"
)

// TestReviewPageKeysByVariant: in a log of two variants with the same
// samples and epochs, the review page shows each episode's variant, a
// grade names it, and a's and b's episode of one sample and epoch are
// graded apart: two reviews, the page moving on past both, the graded
// note and the transcript link naming the variant, and each variant its
// own numbers. Before the key had the variant, the log's queue could not
// be read (a's and b's episode were one key twice) and review mode did not
// start.
func TestReviewPageKeysByVariant(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log, recs := writeVariantsLog(t, dir)
	q, err := review.Pick(review.Episodes(recs), review.Design{Seed: 1, Share: 1})
	require.NoError(t, err)
	require.NoError(t, review.WriteQueue(review.QueuePath(log), q))
	_, srv := serve(t, []string{dir}, &view.Options{Review: &view.ReviewOptions{Log: log, Secret: secret}})
	base := srv.URL
	page := base + "/review?" + url.Values{"key": {secret}, "reviewer": {"ana"}}.Encode()

	// Grade both variants of each sample, in the page's order.
	graded := map[review.Key]bool{}
	for range 6 {
		_, _, body := get(t, page)
		e := entryOnPage(t, body)
		require.False(t, graded[e], "%s offered again after its grade", e)
		assert.Contains(t, body, `<span id="variant">`+e.Variant+`</span>`)
		grade := map[string]string{"a": "pass", "b": "fail"}[e.Variant]
		code, _ := postGrade(t, base+"/review/grade", url.Values{"key": {secret}, "reviewer": {"ana"}, "variant": {e.Variant}, "sample_id": {e.SampleID},
			"epoch": {itoa(e.Epoch)}, "grade": {grade}}, nil)
		require.Equal(t, http.StatusSeeOther, code)
		graded[e] = true
		_, _, after := get(t, page+"&"+url.Values{"graded": {e.SampleID}, "ge": {itoa(e.Epoch)}, "gv": {e.Variant}}.Encode())
		assert.Contains(t, after, "You graded variant "+e.Variant+"'s "+e.SampleID+" epoch 0 <b>"+grade+"</b>")
		link := transcriptLinkRe.FindStringSubmatch(after)
		require.NotNil(t, link, "graded: the transcript is linked")
		assert.Contains(t, link[1], "v="+e.Variant, "the transcript link names the variant")
		_, _, tr := get(t, base+strings.ReplaceAll(link[1], "&amp;", "&"))
		assert.Contains(t, tr, "call-of-variant-"+e.Variant, "the variant's transcript, not the other's")
		assert.NotContains(t, tr, "call-of-variant-"+map[string]string{"a": "b", "b": "a"}[e.Variant])
	}
	_, _, body := get(t, page)
	assert.Contains(t, body, `id="finished"`)
	rs, _, err := review.Read(review.FilePath(log))
	require.NoError(t, err)
	require.Len(t, rs, 6)
	require.Len(t, review.Final(rs), 6, "a's and b's grades of one episode are two reviews")
	for _, r := range rs {
		assert.Equal(t, r.Variant == "a", r.Pass, "%s", r.Key())
	}
	for _, id := range []string{`id="n-v-a-ppi"`, `id="n-v-b-ppi"`, `id="n-kappa"`} {
		assert.Contains(t, body, id)
	}
	assert.NotContains(t, body, `id="n-ppi"`, "no rate pooled over variants")

	// A grade that names no variant is of no queued episode.
	code, _ := postGrade(t, base+"/review/grade", url.Values{"key": {secret}, "reviewer": {"bo"}, "sample_id": {"s0"}, "epoch": {"0"}, "grade": {"pass"}}, nil)
	assert.Equal(t, http.StatusBadRequest, code)
}

// entryOnPage returns the episode the review page offers to grade.
func entryOnPage(t *testing.T, body string) review.Key {
	t.Helper()
	m := episodeRe.FindStringSubmatch(body)
	require.NotNil(t, m, "no episode on the page")
	epoch, err := strconv.Atoi(m[3])
	require.NoError(t, err)
	return review.Key{Variant: m[1], SampleID: m[2], Epoch: epoch}
}

var transcriptLinkRe = regexp.MustCompile(`<a href="([^"]+)"[^>]*id="graded-transcript"`)

var episodeRe = regexp.MustCompile(`<section id="episode" data-variant="([^"]*)" data-sample="([^"]*)" data-epoch="(\d+)">`)

// writeVariantsLog writes in dir a log of two variants, a and b, of three
// samples, each episode with a transcript naming its variant
// ("call-of-variant-a"), and returns its path and records.
func writeVariantsLog(t *testing.T, dir string) (string, []sink.Record) {
	log := filepath.Join(dir, "run.jsonl")
	w, err := jsonl.Create(log, nil)
	require.NoError(t, err)
	tw, err := jsonl.Create(log+".traces.jsonl", nil)
	require.NoError(t, err)
	var recs []sink.Record
	for i := range 3 {
		for _, v := range []string{"a", "b"} {
			ev, err := json.Marshal(map[string]any{"run_id": "run1", "sample_id": "s" + strconv.Itoa(i), "epoch": 0, "attempt": 0,
				"events": []harness.Event{{Time: time.Unix(0, 0).UTC(), Kind: "model", Name: "call-of-variant-" + v}}})
			require.NoError(t, err)
			off, err := tw.WriteLine(append(ev, '\n'))
			require.NoError(t, err)
			r := sink.Record{Schema: sink.SchemaVersion, RunID: "run1", Eval: "ev", Variant: v, SampleID: "s" + strconv.Itoa(i),
				Status: map[string]sink.Status{"a": sink.Pass, "b": sink.Fail}[v], Input: []byte(`{}`), Output: []byte(`"` + v + `"`),
				Transcript: fmt.Sprintf("run.jsonl.traces.jsonl#%d", off), StartedAt: time.Unix(0, 0).UTC()}
			require.NoError(t, w.Write(context.Background(), r))
			recs = append(recs, r)
		}
	}
	require.NoError(t, tw.Close(context.Background()))
	require.NoError(t, w.Close(context.Background()))
	return log, recs
}

// TestSamplePageLinksEachVariantsTranscript: a sample's page of a log of
// variants names each episode's variant and links its own transcript;
// before, every link of an epoch served the first variant's.
func TestSamplePageLinksEachVariantsTranscript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeVariantsLog(t, dir)
	_, srv := serve(t, []string{dir}, nil)
	code, _, body := get(t, srv.URL+"/sample/run.jsonl?s=s1")
	require.Equal(t, 200, code, body)
	for _, v := range []string{"a", "b"} {
		require.Contains(t, body, `id="variant-`+v+`-epoch-0"`)
		link := regexp.MustCompile(`id="variant-` + v + `-epoch-0"[\s\S]*?<a href="([^"]+)"`).FindStringSubmatch(body)
		require.NotNil(t, link, "variant %s's transcript link", v)
		code, _, tr := get(t, srv.URL+html.UnescapeString(link[1]))
		require.Equal(t, 200, code, tr)
		require.Contains(t, tr, "call-of-variant-"+v, "variant %s's link serves its own transcript", v)
	}
}
