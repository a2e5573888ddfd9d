package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/internal/atomicfile"
	"github.com/proctor-evals/proctor/review"
)

var reviewCommand = &command{
	name:  "review",
	args:  "pick|import|export|report LOG [FILE]",
	short: "human review: pick episodes, import and export grades, report",
	long: `
Review has people grade a random share of a run's episodes and turns
their grades and every judge verdict into a pass rate whose interval is
valid even when the judge is biased (prediction-powered inference). Beside
LOG it keeps LOG.queue.json (the episodes picked, with their inclusion
probabilities) and LOG.reviews.jsonl (the reviews, append-only). Grade in
'proctor view -review LOG', or in any annotation tool through export and
import.

  proctor review pick [-count N | -share S] [-seed N] [-stratify TAG]
                      [-failures K] [-disagreeing K] [-low-agreement K] [-replace] LOG
      draws the queue: a seeded random sample of the judge's pass and fail
      episodes; -stratify splits it equally among a tag's values; -failures,
      -disagreeing and -low-agreement make the judge's failures, episodes
      whose judges disagreed, and tags where the judge agrees little with
      the reviews so far K times likelier to be picked. A larger count with
      the same seed picks a superset. An existing queue is replaced only
      with -replace. In a log of variants the count is shared equally
      among the variants, and report gives each variant its own rates.
  proctor review export [-format csv|jsonl] [-show-verdict] -o OUT LOG
      writes the queue's episodes (input, output, tags) with empty grade
      columns for an annotation tool; the judge's verdict only with
      -show-verdict.
  proctor review import [-format csv|jsonl] [-reviewer NAME] LOG FILE
      appends the graded rows of FILE (columns sample_id, epoch, reviewer,
      pass, score, note, saw_verdict, time, run_id, eval, variant; see 'go
      doc github.com/proctor-evals/proctor/review Export') to the reviews;
      rows of another run or eval than LOG's are refused.
  proctor review report [-json] [-level L] [-width W] LOG
      the judge's pass rate, the prediction-powered one and the one from
      the reviews alone; the judge's agreement with people, by tag (low
      agreement flagged); agreement between reviewers; how many reviews an
      interval of width W needs.`,
	flags: func(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) (int, error) {
		var d review.Design
		fs.IntVar(&d.Count, "count", 0, "pick `N` episodes")
		fs.Float64Var(&d.Share, "share", 0, "pick this `share` of the episodes (default 0.05 without -count)")
		fs.Uint64Var(&d.Seed, "seed", 1, "the pick's `seed`")
		fs.StringVar(&d.StratifyBy, "stratify", "", "split the picks equally among the values of `tag`")
		fs.Float64Var(&d.Failures, "failures", 0, "make the judge's failures `K` times likelier to be picked")
		fs.Float64Var(&d.Disagreeing, "disagreeing", 0, "make episodes whose judges disagreed `K` times likelier")
		lowAgreement := fs.Float64("low-agreement", 0, "make tags flagged for low agreement `K` times likelier")
		replace := fs.Bool("replace", false, "replace an existing queue")
		format := fs.String("format", "", "`csv or jsonl` (default: from the file name)")
		out := fs.String("o", "", "export to `file`")
		show := fs.Bool("show-verdict", false, "export the judge's verdicts (the reviewers are then not blind)")
		reviewer := fs.String("reviewer", "", "the reviewer of rows that name none")
		asJSON := fs.Bool("json", false, "report as JSON")
		level := fs.Float64("level", 0.95, "confidence `level`")
		width := fs.Float64("width", 0.05, "plan reviews for an interval of this `width`")
		applies := map[string][]string{
			"pick":   {"count", "share", "seed", "stratify", "failures", "disagreeing", "low-agreement", "replace"},
			"export": {"format", "o", "show-verdict"},
			"import": {"format", "reviewer"},
			"report": {"json", "level", "width"},
		}
		return func(pos []string, stdout, stderr io.Writer) (int, error) {
			if len(pos) == 0 {
				return 0, usageError("want pick, import, export or report")
			}
			action, pos := pos[0], pos[1:]
			allowed, ok := applies[action]
			if !ok {
				return 0, usageError("unknown review action %q: want pick, import, export or report", action)
			}
			var bad error
			fs.Visit(func(f *flag.Flag) {
				if !slices.Contains(allowed, f.Name) && bad == nil {
					bad = usageError("-%s does not apply to review %s", f.Name, action)
				}
			})
			if bad != nil {
				return 0, bad
			}
			opts := review.Options{Level: *level, Width: *width}
			switch action {
			case "pick":
				if err := wantArgs(pos, 1, 1, "LOG"); err != nil {
					return 0, err
				}
				if d.Count == 0 && d.Share == 0 {
					d.Share = 0.05
				}
				if k := *lowAgreement; k < 0 || math.IsNaN(k) || math.IsInf(k, 0) {
					return 0, usageError("-low-agreement %v: want a factor > 0 (0 for none)", k)
				}
				return reviewPick(pos[0], d, *lowAgreement, *replace, stdout, stderr)
			case "export":
				if err := wantArgs(pos, 1, 1, "LOG"); err != nil {
					return 0, err
				}
				if *out == "" {
					return 0, usageError("export needs -o OUT")
				}
				f, err := exchangeFormat(*format, *out)
				if err != nil {
					return 0, err
				}
				return reviewExport(pos[0], *out, review.ExportOptions{Format: f, ShowVerdict: *show}, stdout, stderr)
			case "import":
				if err := wantArgs(pos, 2, 2, "LOG FILE"); err != nil {
					return 0, err
				}
				f, err := exchangeFormat(*format, pos[1])
				if err != nil {
					return 0, err
				}
				return reviewImport(pos[0], pos[1], review.ImportOptions{Format: f, Reviewer: *reviewer}, stdout, stderr)
			default:
				if err := wantArgs(pos, 1, 1, "LOG"); err != nil {
					return 0, err
				}
				if !(*level > 0 && *level < 1) || !(*width > 0 && *width < 1) {
					return 0, usageError("-level and -width must be in (0, 1)")
				}
				s, q, err := reviewSummary(pos[0], opts, stderr)
				if err != nil {
					return 0, err
				}
				if *asJSON {
					enc := json.NewEncoder(stdout)
					enc.SetIndent("", "  ")
					return 0, enc.Encode(s)
				}
				printReview(stdout, pos[0], s, q)
				return 0, nil
			}
		}
	},
}

func exchangeFormat(flagValue, name string) (review.Format, error) {
	switch f := strings.ToLower(flagValue); {
	case f == "csv" || f == "jsonl":
		return review.Format(f), nil
	case f != "":
		return "", usageError("-format %q: want csv or jsonl", flagValue)
	case strings.HasSuffix(strings.ToLower(name), ".csv"):
		return review.CSV, nil
	case strings.HasSuffix(strings.ToLower(name), ".jsonl"), strings.HasSuffix(strings.ToLower(name), ".json"):
		return review.JSONL, nil
	}
	return "", usageError("cannot tell the format of %s: give -format csv or jsonl", name)
}

// load reads a log's records, queue and reviews, reporting torn tails.
func load(log string, stderr io.Writer) (*review.Files, error) {
	if st, err := os.Stat(log); err == nil && (st.IsDir() || strings.HasSuffix(log, ".parquet")) {
		return nil, usageError("review reads a JSONL log, not Parquet: the reviews live beside it")
	}
	f, err := review.Load(log)
	if err != nil {
		return nil, err
	}
	for _, t := range f.Torn {
		fmt.Fprintf(stderr, "warning: %v; using what comes before it\n", t)
	}
	for _, s := range f.Ignored {
		fmt.Fprintf(stderr, "warning: %s\n", s)
	}
	return f, nil
}

func reviewPick(log string, d review.Design, lowAgreement float64, replace bool, stdout, stderr io.Writer) (int, error) {
	path := review.QueuePath(log)
	if _, err := os.Stat(path); err == nil && !replace {
		return 0, fmt.Errorf("%s exists: give -replace to draw a new queue (reviews are kept; those of episodes no longer picked leave the estimate)", path)
	}
	f, err := load(log, stderr)
	if err != nil {
		return 0, err
	}
	if lowAgreement != 0 {
		s := review.Summarize(f.Episodes, nil, f.Reviews, review.Options{})
		for _, t := range s.ByTag {
			if t.Low {
				if d.Tags == nil {
					d.Tags = map[string]float64{}
				}
				d.Tags[t.Tag+"="+t.Value] = lowAgreement
			}
		}
	}
	q, err := review.Pick(f.Episodes, d)
	if err != nil {
		return 0, err
	}
	if err := review.WriteQueue(path, q); err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "picked %d of %d episodes for review: %s\n", len(q.Entries), q.Episodes, path)
	for _, s := range q.Strata {
		var name []string
		if s.Variant != "" {
			name = append(name, "variant "+s.Variant)
		}
		if d.StratifyBy != "" {
			name = append(name, d.StratifyBy+"="+orNone(s.Value))
		}
		fmt.Fprintf(stdout, "  %s: %d of %d\n", strings.Join(name, " "), s.Picks, s.Episodes)
	}
	for t := range d.Tags {
		fmt.Fprintf(stdout, "  oversampled %s (low agreement) ×%g\n", t, d.Tags[t])
	}
	return 0, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func reviewExport(log, out string, opts review.ExportOptions, stdout, stderr io.Writer) (int, error) {
	f, err := load(log, stderr)
	if err != nil {
		return 0, err
	}
	q := f.Queue
	if q == nil {
		return 0, fmt.Errorf("%s has no review queue: run 'proctor review pick' first", log)
	}
	if _, err := os.Stat(out); err == nil {
		return 0, fmt.Errorf("%s exists: not replacing it", out)
	}
	err = atomicfile.Write(out, 0o644, func(w *bufio.Writer) error { return review.Export(w, q, f.Queued, opts) })
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "exported %d episodes to %s\n", len(q.Entries), out)
	return 0, nil
}

func reviewImport(log, file string, opts review.ImportOptions, stdout, stderr io.Writer) (int, error) {
	lf, err := load(log, stderr)
	if err != nil {
		return 0, err
	}
	in, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	opts.RunID, opts.Eval = lf.RunID, lf.Eval
	rs, err := review.Import(in, file, opts)
	if err != nil {
		return 0, err
	}
	known, variants := map[review.Key]bool{}, map[string]bool{}
	for i := range lf.Episodes {
		known[lf.Episodes[i].Key()] = true
		variants[lf.Episodes[i].Variant] = true
	}
	for _, r := range rs {
		if !known[r.Key()] {
			if r.Variant == "" && !variants[""] {
				return 0, fmt.Errorf("%s: the review of %s names no variant, and %s is a log of variants (%s): give each row its variant (the export's variant column): nothing imported",
					file, r.Key(), log, strings.Join(slices.Sorted(maps.Keys(variants)), ", "))
			}
			return 0, fmt.Errorf("%s: %s has no episode %s: nothing imported", file, log, r.Key())
		}
	}
	w, torn, err := review.Open(review.FilePath(log))
	if err != nil {
		return 0, err
	}
	if torn != nil {
		fmt.Fprintf(stderr, "warning: %v; cut\n", torn)
	}
	if err := w.Append(rs...); err != nil {
		w.Close()
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "imported %d reviews from %s into %s\n", len(rs), filepath.Base(file), review.FilePath(log))
	return 0, nil
}

func reviewSummary(log string, opts review.Options, stderr io.Writer) (*review.Summary, *review.Queue, error) {
	f, err := load(log, stderr)
	if err != nil {
		return nil, nil, err
	}
	return review.Summarize(f.Episodes, f.Queue, f.Reviews, opts), f.Queue, nil
}

func printReview(w io.Writer, log string, s *review.Summary, q *review.Queue) {
	fmt.Fprintf(w, "review of %s\n", log)
	if q == nil {
		fmt.Fprintf(w, "  no queue: run 'proctor review pick %s'\n", log)
	} else {
		fmt.Fprintf(w, "  queue: %d of %d episodes picked, %d reviewed", s.Picked, s.Episodes, s.Reviewed)
		if s.OffQueue > 0 {
			fmt.Fprintf(w, "; %d reviewed episodes are not in the queue and not in the estimates", s.OffQueue)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  reviews: %d by %d reviewers, %d after seeing the judge's verdict\n", s.Reviews, s.Reviewers, s.Seen)
	if len(s.Variants) == 0 {
		printRates(w, "  ", s)
	} else {
		fmt.Fprintf(w, "  %d variants, not pooled (a pass rate over variants describes no agent):\n", len(s.Variants))
		for i := range s.Variants {
			v := &s.Variants[i]
			fmt.Fprintf(w, "  variant %s: %d of %d episodes picked, %d reviewed, %d reviews\n", v.Variant, v.Picked, v.Episodes, v.Reviewed, v.Reviews)
			printRates(w, "    ", v)
			if p := v.Plan; p.ReviewsOnly > 0 {
				fmt.Fprintf(w, "    planning: an interval %.3f wide needs about %s reviews of this variant with the judge, %s from reviews alone\n",
					p.Width, count(p.WithJudge, v.Episodes), count(p.ReviewsOnly, v.Episodes))
			}
		}
		fmt.Fprintln(w, "  over every variant (the judge is one):")
	}
	if c := s.Confusion; c.N() > 0 {
		fmt.Fprintf(w, "  judge vs people: agreement %.2f, kappa %s (both pass %d, judge too lenient %d, too strict %d, both fail %d)\n",
			c.Agreement(), num(float64(s.Kappa)), c.BothPass, c.FalsePass, c.FalseFail, c.BothFail)
	}
	if s.AlphaEpisodes > 0 {
		fmt.Fprintf(w, "  between reviewers: Krippendorff's alpha %s over %d episodes graded by more than one\n", num(float64(s.Alpha)), s.AlphaEpisodes)
	}
	if len(s.ByTag) > 0 {
		fmt.Fprintln(w, "  by tag:")
		for _, t := range s.ByTag {
			flag := ""
			if t.Low {
				flag = "  LOW AGREEMENT"
			}
			fmt.Fprintf(w, "    %-24s %4d reviews  agreement %.2f  kappa %s%s\n", t.Tag+"="+t.Value, t.Confusion.N(), t.Confusion.Agreement(), num(float64(t.Kappa)), flag)
		}
	}
	if p := s.Plan; p.ReviewsOnly > 0 {
		fmt.Fprintf(w, "  planning: an interval %.3f wide needs about %s reviews with the judge, %s from reviews alone\n",
			p.Width, count(p.WithJudge, s.Episodes), count(p.ReviewsOnly, s.Episodes))
	}
}

// printRates prints the judge's, the prediction-powered and the
// reviews-only pass rates of s, each line after indent.
func printRates(w io.Writer, indent string, s *review.Summary) {
	fmt.Fprintf(w, "%s%-20s %s  %s\n", indent, "judge", rate(float64(s.JudgeRate), s.JudgeCI.Lo, s.JudgeCI.Hi), "every verdict; right only if the judge is")
	if math.IsNaN(s.PPI.Mean) {
		fmt.Fprintf(w, "%s%-20s — needs two reviewed episodes of the queue\n", indent, "prediction-powered")
	} else {
		fmt.Fprintf(w, "%s%-20s %s  λ %.2f, %d reviewed\n", indent, "prediction-powered", rate(s.PPI.Mean, s.PPI.Interval.Lo, s.PPI.Interval.Hi), s.PPI.Lambda, s.PPI.Labelled)
		fmt.Fprintf(w, "%s%-20s %s\n", indent, "reviews only", rate(s.ReviewsOnly.Mean, s.ReviewsOnly.Interval.Lo, s.ReviewsOnly.Interval.Hi))
	}
}

func rate(mean, lo, hi float64) string {
	if math.IsNaN(mean) {
		return "—"
	}
	return fmt.Sprintf("%.3f [%.3f, %.3f]", mean, max(0, lo), min(1, hi))
}

func num(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.2f", x)
}

func count(n, episodes int) string {
	switch {
	case n == 0:
		return "—"
	case n > episodes:
		return fmt.Sprintf("more than the %d episodes", episodes)
	}
	return fmt.Sprint(n)
}

// noteReviews adds the prediction-powered pass rate under a log's report
// when people reviewed its queue: the reader sees the corrected number
// where the judge's is.
func noteReviews(w io.Writer, log string) {
	if _, err := os.Stat(review.FilePath(log)); err != nil {
		return
	}
	f, err := review.Load(log)
	if err != nil || f.Queue == nil {
		return
	}
	s := review.Summarize(f.Episodes, f.Queue, f.Reviews, review.Options{})
	if len(s.Variants) == 0 {
		if !math.IsNaN(s.PPI.Mean) {
			fmt.Fprintf(w, "human review: prediction-powered pass rate %s from %d reviewed episodes (reviews alone %s); proctor review report %s\n",
				rate(s.PPI.Mean, s.PPI.Interval.Lo, s.PPI.Interval.Hi), s.PPI.Labelled, rate(s.ReviewsOnly.Mean, s.ReviewsOnly.Interval.Lo, s.ReviewsOnly.Interval.Hi), log)
		}
		return
	}
	var parts []string
	for _, v := range s.Variants {
		if !math.IsNaN(v.PPI.Mean) {
			parts = append(parts, fmt.Sprintf("%s %s from %d reviewed", v.Variant, rate(v.PPI.Mean, v.PPI.Interval.Lo, v.PPI.Interval.Hi), v.PPI.Labelled))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "human review: prediction-powered pass rates, per variant: %s; proctor review report %s\n", strings.Join(parts, "; "), log)
	}
}
