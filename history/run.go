// Package history follows evals across runs: a summary row per run (and
// per run × tag) read from its log and manifest, the baseline each run is
// compared with, the points where what the run measured changed (harness,
// judge or dataset), and drift alerts from the paired comparison of a run
// with its baseline (report.Compare, Holm across tags).
//
// The rows are what history/catalog keeps as Parquet beside the runs; the
// viewer's history page and `proctor history` draw and print them. The
// package links no Arrow: the viewer builds its rows from the logs it
// already reads.
package history

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// Run is the summary of one log: a run, or one shard of a run (Shard).
type Run struct {
	RunID string
	Eval  string
	// Variant is the eval's variant this row is of (its records alone),
	// "" for a log without variants: each variant of a matrix is its own
	// trend (ReadVariants, Series).
	Variant string
	Log     string // the log's path, as the caller named it (the catalog keeps it relative to its directory)

	// What the run measured, from its manifest (empty for a log without
	// one): the component versions are the fingerprints whose changes the
	// history marks, and the dataset identity decides the baseline.
	HarnessVersion string
	JudgeVersion   string
	SandboxVersion string
	DatasetSamples int
	DatasetHash    string
	Seed           string
	Epochs         int
	Shard          string
	Proctor        string
	// Resources and ImageDigests are the manifest's sandbox resources and
	// image digests, each list joined by "; " (empty when not on record):
	// a change of them is a possible cause of drift.
	Resources    string
	ImageDigests string
	// EpisodeResources is the distinct sandbox resources the run's records
	// name, joined by "; " (report.Report.EpisodeResources): an episode
	// retried with more memory, or run on a worker joined with other
	// resources, differs from the manifest's. A change of them is a
	// possible cause of drift too.
	EpisodeResources string

	Start time.Time     // the earliest episode's start (the manifest's creation when the log is empty)
	Wall  time.Duration // from Start to the latest episode's end

	Samples, Episodes                 int
	Passed, Failed, Errored, Unscored int
	PassRate, Lo, Hi                  float64 // NaN when nothing was scored
	Method                            string  // the interval's
	MeanScore                         float64
	LatencyP50MS, LatencyP95MS        float64

	// Usage totals, every role's together, and the judge's and a
	// simulated user's parts of them (the agent's is the rest).
	InputTokens, OutputTokens                   int64
	CostUSD                                     float64
	JudgeInputTokens, JudgeOutputTokens         int64
	JudgeCostUSD                                float64
	SimulatorInputTokens, SimulatorOutputTokens int64
	SimulatorCostUSD                            float64

	Tags []Tag

	// Parts are the rows of the shard logs Group joined into this run;
	// nil for a run written in one log.
	Parts []*Run
}

// Tag is a run's part whose samples share a tag value.
type Tag struct {
	Tag, Value                        string
	Samples, Episodes                 int
	Passed, Failed, Errored, Unscored int
	PassRate, Lo, Hi                  float64
}

// Read summarizes the log at path and its manifest, and returns the
// report it folded (for drift, which compares reports). A torn tail is a
// warning of the report, as everywhere; a log without a manifest (written
// before manifests existed) has empty versions and dataset identity.
func Read(path string, opts *report.Options) (*Run, *report.Report, error) {
	rep, s, err := readLog(path, opts)
	if err != nil {
		return nil, nil, err
	}
	m, err := manifest.Read(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	run := FromReport(rep, m)
	run.Log = path
	run.Start = s.first
	if !s.last.IsZero() {
		run.Wall = s.last.Sub(s.first)
	}
	if run.Start.IsZero() && m != nil {
		run.Start = m.CreatedAt
	}
	return run, rep, nil
}

// ReadVariants is Read, with a row per variant for a log of an eval's
// variants (its manifest names them): each folds that variant's records
// alone, its HarnessVersion the variant's, so that each variant is a
// trend of its own. A log without variants gives Read's one row.
func ReadVariants(path string, opts *report.Options) ([]*Run, error) {
	m, err := manifest.Read(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if m == nil || len(m.Variants) == 0 {
		run, _, err := Read(path, opts)
		if err != nil {
			return nil, err
		}
		return []*Run{run}, nil
	}
	// One reading of the log: the report of a log of variants holds each
	// variant's own (Report.VariantReport), as a log of its records alone.
	spans := map[string]*span{}
	rep, err := report.FromRecords(func(yield func(sink.Record, error) bool) {
		for r, err := range jsonl.Records(path) {
			if err == nil {
				s := spans[r.Variant]
				if s == nil {
					s = &span{}
					spans[r.Variant] = s
				}
				s.add(&r)
			}
			if !yield(r, err) {
				return
			}
		}
	}, opts)
	if err != nil {
		return nil, err
	}
	var runs []*Run
	for _, v := range m.Variants {
		vrep := rep.VariantReport(v.Name)
		if vrep == nil { // no record of it yet
			continue
		}
		s := spans[v.Name]
		run := FromReport(vrep, m)
		run.Variant, run.HarnessVersion, run.Log, run.Start = v.Name, v.Harness, path, s.first
		if !s.last.IsZero() {
			run.Wall = s.last.Sub(s.first)
		}
		if run.Start.IsZero() {
			run.Start = m.CreatedAt
		}
		runs = append(runs, run)
	}
	return runs, nil
}

// variantRecords yields the records of one variant of recs (and every
// error).
func variantRecords(recs iter.Seq2[sink.Record, error], variant string) iter.Seq2[sink.Record, error] {
	return func(yield func(sink.Record, error) bool) {
		for r, err := range recs {
			if err == nil && r.Variant != variant {
				continue
			}
			if !yield(r, err) {
				return
			}
		}
	}
}

// Series names the trend a run belongs to: its eval, and its variant when
// it has one ("eval variant").
func (r *Run) Series() string {
	if r.Variant == "" {
		return r.Eval
	}
	return r.Eval + " " + r.Variant
}

// span is when a run's episodes ran: the first start and the last end.
type span struct{ first, last time.Time }

func (s *span) add(r *sink.Record) {
	if s.first.IsZero() || r.StartedAt.Before(s.first) {
		s.first = r.StartedAt
	}
	if end := r.StartedAt.Add(time.Duration(r.DurationMS * float64(time.Millisecond))); end.After(s.last) {
		s.last = end
	}
}

// readLog folds the log at path into its report and the span of its
// episodes: on every core with recordjson.Fold, as report.FromLog reads,
// when the log is whole; else record by record, which says what is wrong
// with it (a torn tail is a warning of the report).
func readLog(path string, opts *report.Options) (*report.Report, span, error) {
	if f, err := safeopen.Open(path); err == nil {
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			a := report.NewAggregator(opts)
			var s span
			end, _, err := recordjson.Fold(f, a, nil, func(c *recordjson.FoldChunk) {
				for i := range c.Out {
					s.add(&c.Out[i].Record)
				}
			})
			if err == nil && end == st.Size() {
				return a.Report(), s, nil
			}
		}
	}
	var s span
	rep, err := report.FromRecords(func(yield func(sink.Record, error) bool) {
		for r, err := range jsonl.Records(path) {
			if err == nil {
				s.add(&r)
			}
			if !yield(r, err) {
				return
			}
		}
	}, opts)
	return rep, s, err
}

// FromReport is the row of a run from its report and manifest (nil for
// none); Log, Start and Wall are the caller's to fill.
func FromReport(rep *report.Report, m *manifest.Manifest) *Run {
	r := &Run{
		RunID: rep.RunID, Eval: rep.Eval,
		Samples: rep.Samples, Episodes: rep.Episodes,
		Passed: rep.Passed, Failed: rep.Failed, Errored: rep.Errored, Unscored: rep.Unscored,
		PassRate: rep.PassRate, Lo: rep.Interval.Lo, Hi: rep.Interval.Hi, Method: rep.Interval.Method,
		MeanScore:    rep.MeanScore,
		LatencyP50MS: rep.Latency.P50MS, LatencyP95MS: rep.Latency.P95MS,
		InputTokens: rep.Usage.InputTokens, OutputTokens: rep.Usage.OutputTokens, CostUSD: rep.Usage.CostUSD,
		JudgeInputTokens: rep.JudgeUsage.InputTokens, JudgeOutputTokens: rep.JudgeUsage.OutputTokens, JudgeCostUSD: rep.JudgeUsage.CostUSD,
		SimulatorInputTokens: rep.SimulatorUsage.InputTokens, SimulatorOutputTokens: rep.SimulatorUsage.OutputTokens,
		SimulatorCostUSD: rep.SimulatorUsage.CostUSD,
		Epochs:           rep.Epochs,
		EpisodeResources: strings.Join(rep.EpisodeResourceSet(), "; "),
	}
	if rep.Passed+rep.Failed == 0 {
		r.PassRate, r.Lo, r.Hi = math.NaN(), math.NaN(), math.NaN()
	}
	if m != nil {
		r.RunID = cmp.Or(r.RunID, m.RunID)
		r.Eval = cmp.Or(r.Eval, m.Eval)
		r.HarnessVersion, r.JudgeVersion, r.SandboxVersion = m.Versions.Harness, m.Versions.Judge, m.Versions.Sandbox
		r.DatasetSamples, r.DatasetHash = m.Dataset.Samples, m.Dataset.Hash
		r.Seed, r.Shard, r.Proctor = m.Seed, m.Shard, m.Proctor
		r.Epochs = cmp.Or(m.Epochs, r.Epochs)
		r.Resources, r.ImageDigests = strings.Join(m.Resources, "; "), strings.Join(m.ImageDigests, "; ")
	}
	for _, tb := range rep.ByTag {
		for _, g := range tb.Groups {
			t := Tag{Tag: tb.Tag, Value: g.Value, Samples: g.Samples, Episodes: g.Episodes,
				Passed: g.Passed, Failed: g.Failed, Errored: g.Errored, Unscored: g.Unscored,
				PassRate: g.PassRate, Lo: g.Interval.Lo, Hi: g.Interval.Hi}
			if g.Passed+g.Failed == 0 {
				t.PassRate, t.Lo, t.Hi = math.NaN(), math.NaN(), math.NaN()
			}
			r.Tags = append(r.Tags, t)
		}
	}
	return r
}

// Dataset is the run's dataset identity, as its manifest names it.
func (r *Run) Dataset() manifest.DatasetIdentity {
	return manifest.DatasetIdentity{Samples: r.DatasetSamples, Hash: r.DatasetHash}
}

// Sort orders runs as a history reads them: by eval and variant, then
// start time, then log.
func Sort(runs []*Run) {
	slices.SortStableFunc(runs, func(a, b *Run) int {
		return cmp.Or(cmp.Compare(a.Eval, b.Eval), cmp.Compare(a.Variant, b.Variant), a.Start.Compare(b.Start), cmp.Compare(a.Log, b.Log))
	})
}

// Evals yields each trend's runs in start order (an eval's, or one of its
// variants': Series names it), by name. runs must be sorted (Sort).
func Evals(runs []*Run) iter.Seq2[string, []*Run] {
	return func(yield func(string, []*Run) bool) {
		for i := 0; i < len(runs); {
			j := i + 1
			for j < len(runs) && runs[j].Eval == runs[i].Eval && runs[j].Variant == runs[i].Variant {
				j++
			}
			if !yield(runs[i].Series(), runs[i:j]) {
				return
			}
			i = j
		}
	}
}

// Baseline returns the index of the baseline of runs[i] in runs, one
// eval's runs in start order: the latest earlier run on the same dataset
// identity, or -1. Identities not computed the same way (or not computed:
// a run stopped early) never match.
func Baseline(runs []*Run, i int) int {
	for j := i - 1; j >= 0; j-- {
		if runs[j].Dataset().Comparable(runs[i].Dataset()) && runs[j].DatasetHash == runs[i].DatasetHash {
			return j
		}
	}
	return -1
}

// Changes names the fingerprints that differ between a run and the one
// before it: "harness", "judge", "sandbox", "dataset", "resources" (the
// sandbox's limits, image or image digest, where both runs recorded them,
// or those their episodes ran with). A history marks
// these points: what was measured changed there.
func Changes(prev, cur *Run) []string {
	var c []string
	if prev.HarnessVersion != cur.HarnessVersion {
		c = append(c, "harness")
	}
	if prev.JudgeVersion != cur.JudgeVersion {
		c = append(c, "judge")
	}
	if prev.SandboxVersion != cur.SandboxVersion {
		c = append(c, "sandbox")
	}
	if prev.DatasetHash != cur.DatasetHash || prev.DatasetSamples != cur.DatasetSamples {
		c = append(c, "dataset")
	}
	if resourcesChanged(prev, cur) != "" {
		c = append(c, "resources")
	}
	return c
}

// Find returns the index of the run in runs named by key, a run ID or
// the path of its log (of one of its shard logs), or -1. A run ID shared
// by several runs (Group appends their starts) names the latest of them.
func Find(runs []*Run, key string) int {
	found := -1
	for i, r := range runs {
		if r.RunID == key || strings.HasPrefix(r.RunID, key+"@") || slices.ContainsFunc(r.logs(), func(l string) bool { return sameFile(l, key) }) {
			found = i
		}
	}
	return found
}

func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// resourcesChanged says how the sandbox resources of two runs differ,
// where both recorded them, or "": the manifests' resources and image
// digests, else the distinct resources their episodes' records name.
func resourcesChanged(base, head *Run) string {
	var d []string
	if base.Resources != "" && head.Resources != "" && base.Resources != head.Resources {
		d = append(d, fmt.Sprintf("sandbox resources [%s] → [%s]", base.Resources, head.Resources))
	}
	if base.ImageDigests != "" && head.ImageDigests != "" && base.ImageDigests != head.ImageDigests {
		d = append(d, fmt.Sprintf("image digests [%s] → [%s]", base.ImageDigests, head.ImageDigests))
	}
	if len(d) == 0 && base.EpisodeResources != "" && head.EpisodeResources != "" && base.EpisodeResources != head.EpisodeResources {
		d = append(d, fmt.Sprintf("the episodes' sandbox resources [%s] → [%s]", base.EpisodeResources, head.EpisodeResources))
	}
	return strings.Join(d, ", ")
}
