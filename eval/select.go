package eval

// Narrowing a run: a smoke subset of the dataset (Config.Subset) and the
// samples chosen by an earlier run's results (Config.Select).

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// Selection chooses the samples of a run derived from an earlier one:
// only its failures, say, after a fix. The run's samples are those of the
// dataset that meet every criterion given, and each runs all its epochs.
// Compare the new run with the earlier one with [CompareFrom].
type Selection struct {
	// From is the log of the earlier run. Alone, it selects the samples
	// it holds.
	From string
	// Status selects the samples with at least one episode in From that
	// ended so: sink.Fail, sink.Unscored (not an episode a sampling judge
	// left unjudged), sink.Error, sink.Pass. Needs From.
	Status []sink.Status
	// Tags selects the samples whose tags hold all these values (from the
	// dataset, not From).
	Tags map[string]string
	// FlippedAgainst is a baseline log: it selects the samples whose
	// outcome flipped, pass to fail or fail to pass, between it and From
	// (report.Compare's flips: a sample passes a run when it passes at
	// least half its scored epochs). Needs From.
	FlippedAgainst string
}

// Subset is a stratified, seeded subset of the dataset: PerValue samples
// for each value of the tag Tag (all of a value's samples when it has
// fewer; samples without the tag count as one more value), drawn with
// Seed ([dataset.Stratified]). An empty Tag draws PerValue samples in all.
// The same seed and dataset draw the same samples: a smoke test that
// stays put from one pull request to the next. PerValue 0 means no subset.
type Subset struct {
	Tag      string
	PerValue int
	Seed     uint64
}

// ErrNothingSelected is returned (wrapped) by Run when Config.Select
// leaves no sample to run: nothing failed, say. A caller may take it as
// success.
var ErrNothingSelected = errors.New("eval: the selection leaves no sample to run")

func (c Config) validateReuse() error {
	bad := func(msg string) error { return &ConfigError{msg} }
	for i, p := range c.ReuseFrom {
		if p == "" {
			return bad(fmt.Sprintf("Config.ReuseFrom[%d] is empty: want the path of an earlier log", i))
		}
	}
	s := c.Select
	if s == nil {
		return nil
	}
	switch {
	case s.From == "" && len(s.Tags) == 0:
		return bad("Config.Select selects nothing: want From (an earlier log), Tags, or both")
	case s.From == "" && len(s.Status) > 0:
		return bad("Config.Select.Status needs Select.From: the log whose results it reads")
	case s.From == "" && s.FlippedAgainst != "":
		return bad("Config.Select.FlippedAgainst needs Select.From: the run compared with the baseline")
	}
	for _, st := range s.Status {
		if !slices.Contains([]sink.Status{sink.Pass, sink.Fail, sink.Error, sink.Unscored}, st) {
			return bad(fmt.Sprintf("Config.Select.Status holds %q: want pass, fail, error or unscored", st))
		}
	}
	return nil
}

// narrow applies cfg.Subset, then cfg.Select, to the dataset's samples,
// which are in memory when either is set.
func narrow[T any](ctx context.Context, cfg Config, t *sampleTable[T]) (*sampleTable[T], error) {
	if cfg.Subset.PerValue == 0 && cfg.Select == nil {
		return t, nil
	}
	samples := t.all
	if cfg.Subset.PerValue > 0 {
		sub := dataset.Stratified(dataset.Slice[T](samples), cfg.Subset.Tag, cfg.Subset.PerValue, cfg.Subset.Seed)
		var err error
		if samples, err = dataset.Collect(ctx, sub); err != nil {
			return nil, fmt.Errorf("eval: subset: %w", err)
		}
	}
	if cfg.Select != nil {
		keep, err := cfg.Select.samples()
		if err != nil {
			return nil, err
		}
		before := len(samples)
		samples = slices.DeleteFunc(slices.Clone(samples), func(s dataset.Sample[T]) bool {
			return !keep(s.ID, s.Tags)
		})
		if len(samples) == 0 {
			return nil, fmt.Errorf("%w: %s selects none of the %d samples", ErrNothingSelected, cfg.Select, before)
		}
	}
	n, err := checkSamples(samples)
	if n != nil {
		n.resources = t.resources // the dataset's, as the manifest's other fields
	}
	return n, err
}

// samples reads what the selection needs and returns its test of a
// sample. Memory: a set of the IDs From selects.
func (s *Selection) samples() (func(id string, tags map[string]string) bool, error) {
	var inFrom, flipped map[string]bool
	if s.From != "" {
		inFrom = map[string]bool{}
		for rec, err := range committed(jsonl.Records(s.From)) {
			if err != nil {
				return nil, fmt.Errorf("eval: selecting from %s: %w", s.From, err)
			}
			if len(s.Status) == 0 || slices.Contains(s.Status, rec.Status) && rec.ErrorKind != sink.KindNotSampled {
				inFrom[rec.SampleID] = true
			}
		}
	}
	if s.FlippedAgainst != "" {
		c, err := report.CompareLogs(s.FlippedAgainst, s.From, &report.CompareOptions{MaxFlips: math.MaxInt})
		if err != nil {
			return nil, fmt.Errorf("eval: selecting flipped samples: %w", err)
		}
		flipped = map[string]bool{}
		for _, f := range c.Flips {
			flipped[f.SampleID] = true
		}
	}
	return func(id string, tags map[string]string) bool {
		for k, v := range s.Tags {
			if got, ok := tags[k]; !ok || got != v {
				return false
			}
		}
		return (inFrom == nil || inFrom[id]) && (flipped == nil || flipped[id])
	}, nil
}

// String describes the selection as the flags of cli.Main would.
func (s *Selection) String() string {
	var parts []string
	if s.From != "" {
		parts = append(parts, "-from "+s.From)
	}
	if len(s.Status) > 0 {
		names := make([]string, len(s.Status))
		for i, st := range s.Status {
			names[i] = string(st)
		}
		parts = append(parts, "-only "+strings.Join(names, ","))
	}
	for _, k := range slices.Sorted(maps.Keys(s.Tags)) {
		parts = append(parts, "-only-tag "+k+"="+s.Tags[k])
	}
	if s.FlippedAgainst != "" {
		parts = append(parts, "-flipped-against "+s.FlippedAgainst)
	}
	return "the selection " + strings.Join(parts, " ")
}

// committed ends a log's records at a torn tail (the committed records
// before it are all there is), and passes any other error on.
func committed(records iter.Seq2[sink.Record, error]) iter.Seq2[sink.Record, error] {
	return func(yield func(sink.Record, error) bool) {
		for r, err := range records {
			if torn := (*jsonl.TornTailError)(nil); errors.As(err, &torn) {
				return
			}
			if !yield(r, err) || err != nil {
				return
			}
		}
	}
}

// CompareFrom pairs a run derived from an earlier one (Config.Select)
// with it: the earlier run's log fromLog, restricted to the samples head
// ran, is the base, head the head ([report.Compare]). Restricting the
// base keeps the samples the new run left out from reading as missing.
func CompareFrom(fromLog string, head *report.Report, opts *report.CompareOptions) (*report.Comparison, error) {
	ran := map[string]bool{}
	for _, s := range head.SampleResults() {
		ran[s.ID] = true
	}
	ro := &report.Options{Level: head.Interval.Level, Resamples: -1}
	if opts != nil && opts.Level != 0 {
		ro.Level = opts.Level
	}
	base, err := report.FromRecords(func(yield func(sink.Record, error) bool) {
		for r, err := range jsonl.Records(fromLog) {
			if err == nil && !ran[r.SampleID] {
				continue
			}
			if !yield(r, err) {
				return
			}
		}
	}, ro)
	if err != nil {
		return nil, fmt.Errorf("eval: comparing with %s: %w", fromLog, err)
	}
	return report.Compare(base, head, opts), nil
}
