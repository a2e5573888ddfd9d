// Package view serves a web viewer of evaluation runs from their JSONL
// logs: the runs in a directory with their trend, a run's report with its
// charts, a paired comparison of two runs, and each sample's records and
// transcripts. A page of a run still being written updates itself as the
// log grows (Server-Sent Events).
//
// [Server] is an http.Handler, so a tool can mount it (a coordinator
// serving its live run, say); `proctor view` serves it on 127.0.0.1 and
// `proctor report -html` writes its run page as one file with [WriteHTML].
//
// # Numbers
//
// Every statistic comes from eval/report, as the text report prints it:
// the viewer folds a log into a report.Aggregator (in parallel chunks,
// merged in file order) and formats its Report. Only the charts'
// histograms and time series are its own.
//
// # Scale
//
// A log is read once, in parallel chunks, then only what was appended.
// The viewer keeps no records: per sample, the aggregator's compact state;
// per record, 16 bytes (a hash of its sample ID and the offset of its
// line), with which the sample page reads its lines back. Transcripts are
// read when asked for, one seek each.
//
// # Safety
//
// Logs hold what agents wrote, so every page is rendered by html/template
// and every chart label is escaped. Responses carry a Content-Security-
// Policy that allows only the viewer's own script and style files (no
// inline script, no inline style). The handler answers GET and HEAD only
// and writes nothing, but in review mode (see [ReviewOptions]), whose one
// write is guarded. Logs are addressed by an ID from the server's own
// list, never by a path in the request, and a record's transcript is read
// only from a file in its log's directory (or below it).
package view

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/sidecar"
	itranscript "github.com/proctor-evals/proctor/internal/transcript"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

//go:embed assets templates
var files embed.FS

// Options configure a viewer. The zero value is valid, and a nil *Options
// means the zero value.
type Options struct {
	// TraceURL is a URL template with {trace_id} and {span_id} (see
	// report.TraceURL) that turns records' OpenTelemetry IDs into links
	// to a trace viewer, e.g. "http://localhost:16686/trace/{trace_id}".
	TraceURL string
	// Report tunes the statistics (confidence level, failures listed,
	// bootstrap resamples); nil means report's defaults, which the text
	// report uses.
	Report *report.Options
	// Poll is how often a live page's stream checks its log for new
	// records; default 500ms.
	Poll time.Duration
	// Review, when set, turns on the review mode (review.go): the one
	// page that writes.
	Review *ReviewOptions
	// Governor, when set, reads the model gateway's rate governor of the
	// run writing the served log (package cluster's coordinator sums its
	// workers'): the page of a live run shows each lane's limit and the
	// calls in flight and waiting.
	Governor func() []GovernorLane
}

// GovernorLane is one lane of the model gateway's rate governor: the
// calls to one provider and model, held within an adaptive limit of calls
// in flight (the fleet's, summed over its workers, in a distributed run).
type GovernorLane struct {
	Provider, Model          string
	Limit, InFlight, Waiting int
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Poll <= 0 {
		v.Poll = 500 * time.Millisecond
	}
	return v
}

// Server is the viewer of a set of logs and directories of logs. It is an
// http.Handler, safe for concurrent use. Directories are scanned again
// (two levels deep) when the runs page is shown, so that runs started
// since appear.
type Server struct {
	opts  Options
	roots []string
	seed  maphash.Seed
	pages map[string]*template.Template
	mux   *http.ServeMux

	mu      sync.Mutex
	logs    map[string]*logState // by ID
	order   []string             // IDs, in discovery order
	scanned time.Time

	quit      chan struct{}
	closeOnce sync.Once

	review *reviewer // nil unless Options.Review
}

// New returns a viewer of the logs at paths: JSONL logs, and directories
// whose *.jsonl files (but the files beside a log, such as transcript
// stores, and files that are not logs) are served. A path that does not exist is an error.
// Nothing is read until a page asks.
func New(paths []string, opts *Options) (*Server, error) {
	if len(paths) == 0 {
		return nil, errors.New("view: no logs or directories to serve")
	}
	s := &Server{opts: opts.withDefaults(), seed: maphash.MakeSeed(), logs: map[string]*logState{}, quit: make(chan struct{})}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("view: %w", err)
		}
		s.roots = append(s.roots, filepath.Clean(p))
	}
	var err error
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.scan()
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", s.runsPage)
	s.mux.HandleFunc("GET /run/{id...}", s.runPage)
	s.mux.HandleFunc("GET /sample/{id...}", s.samplePage)
	s.mux.HandleFunc("GET /transcript/{id...}", s.transcriptPage)
	s.mux.HandleFunc("GET /compare", s.comparePage)
	s.mux.HandleFunc("GET /leaderboard/{id...}", s.leaderboardPage)
	s.mux.HandleFunc("GET /history", s.historyPage)
	s.mux.HandleFunc("GET /events/{id...}", s.events)
	assets, _ := fs.Sub(files, "assets")
	s.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	if s.opts.Review != nil {
		if err := s.startReview(*s.opts.Review); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// contentSecurityPolicy allows the viewer's own script, style and
// streams, and nothing inline: what a log holds cannot run.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// ServeHTTP serves the viewer: GET and HEAD only, but for the review
// mode's grades.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if s.review != nil && r.Method == http.MethodPost && r.URL.Path == gradePath {
		s.review.write.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "the viewer is read-only: GET and HEAD only", http.StatusMethodNotAllowed)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close ends the live streams of open pages, so that an http.Server
// serving the viewer can shut down, and closes the review file. Pages
// still load after Close; their streams end at once.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.quit)
		if s.review != nil {
			err = s.review.w.Close()
		}
	})
	return err
}

// scan discovers the logs under the roots (again): files given are
// served as they are; directories are walked two levels deep.
func (s *Server) scan() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.scanned) < time.Second {
		return
	}
	s.scanned = time.Now()
	for _, root := range s.roots {
		st, err := os.Stat(root)
		if err != nil {
			continue
		}
		if !st.IsDir() {
			s.add(filepath.Base(root), root)
			continue
		}
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			if d.IsDir() {
				if path != root && (strings.HasPrefix(d.Name(), ".") || strings.Count(rel, string(filepath.Separator)) >= 1) {
					return filepath.SkipDir
				}
				return nil
			}
			if _, _, beside := sidecar.LogOf(path); d.Type().IsRegular() && strings.HasSuffix(path, ".jsonl") && !beside {
				s.add(filepath.ToSlash(rel), path)
			}
			return nil
		})
	}
}

// add registers the log at path under id, unless it is registered; an ID
// taken by another path gets a suffix.
func (s *Server) add(id, path string) {
	for _, l := range s.logs {
		if l.path == path {
			return
		}
	}
	base := id
	for n := 2; s.logs[id] != nil; n++ {
		id = base + "~" + strconv.Itoa(n)
	}
	s.logs[id] = newLogState(id, path, s.opts.Report, s.seed)
	s.order = append(s.order, id)
}

// lookup returns the log with the given ID: only the server's own list
// is consulted, so no request names a file.
func (s *Server) lookup(id string) *logState {
	s.mu.Lock()
	l := s.logs[id]
	s.mu.Unlock()
	if l == nil {
		s.scan()
		s.mu.Lock()
		l = s.logs[id]
		s.mu.Unlock()
	}
	return l
}

func (s *Server) all() []*logState {
	s.scan()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*logState, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.logs[id])
	}
	return out
}

func (s *Server) logFor(w http.ResponseWriter, r *http.Request) *logState {
	l := s.lookup(r.PathValue("id"))
	if l == nil {
		http.Error(w, "no such run", http.StatusNotFound)
	}
	return l
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, name string, p *page) {
	p.Live = p.Live && !p.Static
	var err error
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if r.URL.Query().Get("partial") == "1" {
		err = s.pages[name].ExecuteTemplate(w, "content", p)
	} else {
		err = s.pages[name].ExecuteTemplate(w, "layout", p)
	}
	if err != nil && !errors.Is(err, http.ErrHandlerTimeout) {
		// Headers are sent: all that is left is to end the page.
		fmt.Fprintf(w, "\n<p class=error>%s</p>", template.HTMLEscapeString(err.Error()))
	}
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	var snaps []*snapshot
	for _, l := range s.all() {
		snap, err := l.snapshot()
		if err != nil {
			snap = &snapshot{ID: l.id, Path: l.path, Err: err}
		}
		if errors.Is(snap.Err, errNotLog) && !slices.Contains(s.roots, filepath.Clean(l.path)) {
			continue // a dataset or another JSONL file in a runs directory
		}
		snaps = append(snaps, snap)
	}
	snaps, shards := s.joinShards(snaps)
	s.render(w, r, "runs", &page{Title: "proctor runs", Body: runsData(snaps, shards)})
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	l := s.logFor(w, r)
	if l == nil {
		return
	}
	snap, err := l.snapshot()
	if err != nil {
		s.fail(w, err)
		return
	}
	// The page follows its log either way (a finished run may be
	// resumed); it says "live" only while a run holds the log's lock.
	writing := jsonl.InUse(l.path) != nil
	body := runData(snap, &s.opts, false)
	if writing && s.opts.Governor != nil {
		body.Governor = s.opts.Governor()
	}
	s.render(w, r, "run", &page{Title: runTitle(snap), Live: true, Writing: writing, Events: "/events/" + escapeID(l.id),
		Version: snap.Version, Body: body})
}

// leaderboardPage shows the leaderboard of a log of variants.
func (s *Server) leaderboardPage(w http.ResponseWriter, r *http.Request) {
	l := s.logFor(w, r)
	if l == nil {
		return
	}
	snap, err := l.snapshot()
	if err != nil {
		s.fail(w, err)
		return
	}
	body := &leaderboardBody{Path: snap.Path, Report: snap.Report, RunURL: runURL(snap.ID)}
	if lb := snap.Report.Leaderboard; lb != nil {
		body.Board = boardData(lb)
	}
	s.render(w, r, "leaderboard", &page{Title: "leaderboard " + runTitle(snap), Live: true, Writing: jsonl.InUse(l.path) != nil,
		Events: "/events/" + escapeID(l.id), Version: snap.Version, Body: body})
}

func (s *Server) samplePage(w http.ResponseWriter, r *http.Request) {
	l := s.logFor(w, r)
	if l == nil {
		return
	}
	id := r.URL.Query().Get("s")
	recs, err := l.sampleRecords(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	if len(recs) == 0 {
		http.Error(w, "no records of this sample in the run", http.StatusNotFound)
		return
	}
	s.render(w, r, "sample", &page{Title: "sample " + id, Body: sampleData(l, id, recs, &s.opts)})
}

func (s *Server) transcriptPage(w http.ResponseWriter, r *http.Request) {
	l := s.logFor(w, r)
	if l == nil {
		return
	}
	id := r.URL.Query().Get("s")
	epoch, err := strconv.Atoi(r.URL.Query().Get("e"))
	if err != nil {
		http.Error(w, "e: want an epoch", http.StatusBadRequest)
		return
	}
	recs, err := l.sampleRecords(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	// v names the variant in a log of variants; without it, the first
	// record of the epoch, as before variants.
	variant, byVariant := r.URL.Query()["v"]
	i := slices.IndexFunc(recs, func(x located) bool { return x.Epoch == epoch && (!byVariant || x.Variant == variant[0]) })
	if i < 0 {
		http.Error(w, "no such episode in the run", http.StatusNotFound)
		return
	}
	t, err := readTranscript(l.path, &recs[i].Record)
	if errors.Is(err, itranscript.ErrOutside) {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	data := transcriptData(&recs[i].Record, t, err)
	if r.URL.Query().Get("fragment") == "1" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := s.pages["transcript"].ExecuteTemplate(w, "events", data); err != nil {
			fmt.Fprintf(w, "\n<p class=error>%s</p>", template.HTMLEscapeString(err.Error()))
		}
		return
	}
	s.render(w, r, "transcript", &page{Title: fmt.Sprintf("transcript %s epoch %d", id, epoch), Body: data})
}

func (s *Server) comparePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	base, head := s.lookup(q.Get("base")), s.lookup(q.Get("head"))
	if base == nil || head == nil {
		http.Error(w, "compare: base and head must name runs of this viewer", http.StatusNotFound)
		return
	}
	margin := 0.0
	if m := q.Get("margin"); m != "" {
		v, err := strconv.ParseFloat(m, 64)
		if err != nil || v < 0 || v >= 1 {
			http.Error(w, "margin: want a pass-rate difference in [0, 1), e.g. 0.02", http.StatusBadRequest)
			return
		}
		margin = v
	}
	bs, err := base.snapshot()
	if err != nil {
		s.fail(w, err)
		return
	}
	hs, err := head.snapshot()
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, r, "compare", &page{Title: "compare " + bs.ID + " → " + hs.ID, Body: compareData(bs, hs, margin, &s.opts)})
}

// events streams a log's counts as Server-Sent Events: one event on
// connecting and one whenever records are appended.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	l := s.logFor(w, r)
	if l == nil {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	rc := http.NewResponseController(w)
	if r.Method == http.MethodHead {
		return
	}
	io.WriteString(w, "retry: 2000\n\n")
	var sent uint64
	tick := time.NewTicker(s.opts.Poll)
	defer tick.Stop()
	for {
		c, err := l.live()
		if err != nil {
			fmt.Fprintf(w, "event: failed\ndata: %s\n\n", jsonString(err.Error()))
			rc.Flush()
			return
		}
		if c.Version != sent {
			b, _ := json.Marshal(c)
			fmt.Fprintf(w, "event: update\ndata: %s\n\n", b)
			if err := rc.Flush(); err != nil {
				return
			}
			sent = c.Version
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.quit:
			return
		case <-tick.C:
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func runTitle(s *snapshot) string {
	if s.Report != nil && s.Report.Eval != "" {
		return s.Report.Eval + " · " + s.ID
	}
	return s.ID
}
