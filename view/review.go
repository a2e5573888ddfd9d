package view

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/internal/loopback"
	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
)

// ReviewOptions turn on the viewer's review mode: people grade the queue
// of one log (see package review) at /review, one episode at a time.
//
// Review mode is the viewer's only write, and it is guarded: a grade is a
// POST to /review/grade that must carry Secret (compared in constant
// time), come from a loopback Host (a DNS-rebound name is refused),
// and pass the standard library's cross-origin protection
// (http.CrossOriginProtection: Sec-Fetch-Site and Origin). Every other
// page stays read-only.
type ReviewOptions struct {
	Log    string // the log whose queue is graded; it must be among the viewer's paths
	Secret string // what every write must carry; see NewSecret
	// ShowVerdict shows the judge's verdict, and links the episode's
	// transcript (which holds the judge's calls), before grading; by
	// default the reviewer grades blind and sees both after.
	ShowVerdict bool
}

// NewSecret returns a fresh review secret: 128 random bits, in hex.
func NewSecret() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// reviewer is the review mode's state: the review file's writer, held
// (with its lock) while the viewer runs.
type reviewer struct {
	opts  ReviewOptions
	w     *review.Writer
	write http.Handler // the guarded grade handler
}

const gradePath = "/review/grade"

// startReview opens the review file of opts.Log for writing and adds the
// review page.
func (s *Server) startReview(opts ReviewOptions) error {
	if len(opts.Secret) < 16 {
		return errors.New("view: a review secret needs at least 16 characters")
	}
	if _, err := review.ReadQueue(review.QueuePath(opts.Log)); err != nil {
		return fmt.Errorf("view: %s has no review queue (run proctor review pick first): %w", opts.Log, err)
	}
	w, torn, err := review.Open(review.FilePath(opts.Log))
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	_ = torn // cut by Open; the reviews before it are whole
	rv := &reviewer{opts: opts, w: w}
	rv.write = http.NewCrossOriginProtection().Handler(http.HandlerFunc(s.grade))
	s.review = rv
	s.mux.HandleFunc("GET /review", s.reviewPage)
	return nil
}

// grade is the one write: a reviewer's grade of a queue entry.
func (s *Server) grade(w http.ResponseWriter, r *http.Request) {
	rv := s.review
	if !loopback.Host(r.Host) {
		http.Error(w, "review: grades are taken only on a loopback host name", http.StatusMisdirectedRequest)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "review: "+err.Error(), http.StatusBadRequest)
		return
	}
	f := r.PostForm
	if subtle.ConstantTimeCompare([]byte(f.Get("key")), []byte(rv.opts.Secret)) != 1 {
		http.Error(w, "review: a grade needs the review secret the viewer printed when it started", http.StatusForbidden)
		return
	}
	epoch, err := strconv.Atoi(f.Get("epoch"))
	if err != nil {
		http.Error(w, "review: epoch: want an integer", http.StatusBadRequest)
		return
	}
	q, err := review.ReadQueue(review.QueuePath(rv.opts.Log))
	if err != nil {
		s.fail(w, err)
		return
	}
	k := review.Key{Variant: f.Get("variant"), SampleID: f.Get("sample_id"), Epoch: epoch}
	if !slices.ContainsFunc(q.Entries, func(e review.Entry) bool { return e.Key() == k }) {
		http.Error(w, "review: "+k.String()+" is not in the queue", http.StatusBadRequest)
		return
	}
	g := review.Review{Variant: k.Variant, SampleID: k.SampleID, Epoch: k.Epoch, RunID: q.RunID, Reviewer: strings.TrimSpace(f.Get("reviewer")), Time: time.Now().UTC(),
		Note: strings.TrimSpace(f.Get("note")), SawVerdict: rv.opts.ShowVerdict || f.Get("saw_verdict") == "1"}
	switch f.Get("grade") {
	case "pass":
		g.Pass = true
	case "fail":
	default:
		http.Error(w, "review: grade: want pass or fail", http.StatusBadRequest)
		return
	}
	if sc := strings.TrimSpace(f.Get("score")); sc != "" {
		v, err := strconv.ParseFloat(sc, 64)
		if err != nil {
			http.Error(w, "review: score: want a number in [0, 1]", http.StatusBadRequest)
			return
		}
		g.Score = &v
	}
	if err := rv.w.Append(g); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	v := url.Values{"key": {rv.opts.Secret}, "reviewer": {g.Reviewer}, "graded": {k.SampleID}, "ge": {strconv.Itoa(k.Epoch)}}
	if k.Variant != "" {
		v.Set("gv", k.Variant)
	}
	http.Redirect(w, r, "/review?"+v.Encode(), http.StatusSeeOther)
}

// reviewData is the review page's body.
type reviewData struct {
	Key, Reviewer string
	Log           string
	NoKey         bool
	Done          int // queue entries this reviewer graded
	Total         int
	Anyone        int // queue entries graded by anyone
	Pct           float64
	Entry         *reviewEntry // the next one to grade; nil when done
	Graded        *reviewEntry // the one just graded, verdict revealed
	Numbers       []reviewRow
	Low           []string
}

type reviewEntry struct {
	Variant     string // empty in a run of one harness
	SampleID    string
	Epoch       int
	Tags        string
	Input       string
	Output      string
	Verdict     string // pass or fail
	Reason      string
	Shown       bool // the verdict is shown
	Grade       string
	Transcript  string // the transcript page's URL
	SawVerdict  bool
	Probability float64
}

type reviewRow struct {
	Name, Value, Interval, Note string
	ID                          string
}

func (s *Server) reviewPage(w http.ResponseWriter, r *http.Request) {
	rv := s.review
	qv := r.URL.Query()
	d := &reviewData{Key: qv.Get("key"), Reviewer: strings.TrimSpace(qv.Get("reviewer")), Log: rv.opts.Log}
	d.NoKey = d.Key == ""
	if d.Reviewer == "" || d.NoKey {
		s.render(w, r, "review", &page{Title: "review", Body: d})
		return
	}
	f, err := review.Load(rv.opts.Log)
	if err == nil && f.Queue == nil {
		err = errors.New("view: the review queue is gone")
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	q, recs, reviews := f.Queue, f.Queued, f.Reviews
	byKey := make(map[review.Key]*sink.Record, len(recs))
	for i := range recs {
		byKey[review.Key{Variant: recs[i].Variant, SampleID: recs[i].SampleID, Epoch: recs[i].Epoch}] = &recs[i]
	}
	mine, anyone := map[review.Key]review.Review{}, map[review.Key]bool{}
	for _, x := range reviews {
		anyone[x.Key()] = true
		if x.Reviewer == d.Reviewer {
			mine[x.Key()] = x
		}
	}
	logID := s.logID(rv.opts.Log)
	// The transcript holds the judge's calls (a model judge's answer and
	// verdict): it is linked only where the verdict is shown, so that a
	// blind review stays blind.
	entry := func(e review.Entry, rec *sink.Record, shown bool) *reviewEntry {
		tags, _ := json.Marshal(rec.Tags)
		re := &reviewEntry{Variant: e.Variant, SampleID: e.SampleID, Epoch: e.Epoch, Tags: string(tags), Input: pretty(rec.Input), Output: pretty(rec.Output),
			Verdict: string(rec.Status), Reason: rec.Reason, Shown: shown, Probability: e.Prob}
		if logID != "" && rec.Transcript != "" && shown {
			re.Transcript = transcriptURL(logID, e.Variant, e.SampleID, e.Epoch)
		}
		return re
	}
	for _, e := range q.Entries {
		rec := byKey[e.Key()]
		if rec == nil {
			continue
		}
		d.Total++
		if anyone[e.Key()] {
			d.Anyone++
		}
		if _, ok := mine[e.Key()]; ok {
			d.Done++
			continue
		}
		if d.Entry == nil {
			d.Entry = entry(e, rec, rv.opts.ShowVerdict)
		}
	}
	if d.Total > 0 {
		d.Pct = 100 * float64(d.Done) / float64(d.Total)
	}
	if id := qv.Get("graded"); id != "" {
		ge, _ := strconv.Atoi(qv.Get("ge"))
		k := review.Key{Variant: qv.Get("gv"), SampleID: id, Epoch: ge}
		if rec, g := byKey[k], mine[k]; rec != nil && g.Reviewer != "" {
			d.Graded = entry(review.Entry{Variant: k.Variant, SampleID: id, Epoch: ge}, rec, true)
			d.Graded.Grade = map[bool]string{true: "pass", false: "fail"}[g.Pass]
		}
	}
	sum := review.Summarize(f.Episodes, q, reviews, review.Options{})
	// A log of variants has each variant's rates, none pooled (a rate
	// over variants describes no agent); the judge's agreement is over
	// every variant: the judge is one.
	if len(sum.Variants) == 0 {
		d.Numbers = rateRows("", "", sum)
	}
	for i := range sum.Variants {
		v := &sum.Variants[i]
		d.Numbers = append(d.Numbers, rateRows("v-"+v.Variant+"-", v.Variant+": ", v)...)
	}
	d.Numbers = append(d.Numbers, reviewRow{ID: "kappa", Name: "judge vs people (kappa)", Value: num(float64(sum.Kappa)), Note: fmt.Sprintf("%d reviews", sum.Confusion.N())})
	for _, t := range sum.ByTag {
		if t.Low {
			d.Low = append(d.Low, t.Tag+"="+t.Value)
		}
	}
	s.render(w, r, "review", &page{Title: "review · " + filepath.Base(rv.opts.Log), Body: d})
}

// rateRows are the review page's rows of the pass rates of s, their IDs
// and names prefixed (a variant's).
func rateRows(id, name string, s *review.Summary) []reviewRow {
	return []reviewRow{
		{ID: id + "judge", Name: name + "judge", Value: pct(float64(s.JudgeRate)), Interval: ivText(s.JudgeCI.Lo, s.JudgeCI.Hi), Note: "every verdict; right only if the judge is"},
		{ID: id + "ppi", Name: name + "prediction-powered", Value: pct(s.PPI.Mean), Interval: ivText(s.PPI.Interval.Lo, s.PPI.Interval.Hi), Note: fmt.Sprintf("%d reviewed episodes", s.PPI.Labelled)},
		{ID: id + "reviews-only", Name: name + "reviews only", Value: pct(s.ReviewsOnly.Mean), Interval: ivText(s.ReviewsOnly.Interval.Lo, s.ReviewsOnly.Interval.Hi)},
	}
}

func ivText(lo, hi float64) string {
	if lo != lo || hi != hi { // NaN
		return "—"
	}
	return fmt.Sprintf("[%s, %s]", pct(max(0, lo)), pct(min(1, hi)))
}

// logID returns the viewer's ID of the log at path, "" if it serves none.
func (s *Server) logID(path string) string {
	for _, l := range s.all() {
		if filepath.Clean(l.path) == filepath.Clean(path) {
			return l.id
		}
	}
	return ""
}
