package history

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/stats"
)

// WorstCase is the range the run's pass rate lies in whatever its
// errored and unscored episodes would have been: them as failures, as
// passes. Both are PassRate when every episode was scored; NaN when none
// finished. Every view that shows a pass rate shows this beside it.
func (r *Run) WorstCase() (lower, upper float64) {
	return worstCase(r.Passed, r.Failed, r.Errored+r.Unscored, r.PassRate)
}

// WorstCase is Run.WorstCase for a tag value.
func (t *Tag) WorstCase() (lower, upper float64) {
	return worstCase(t.Passed, t.Failed, t.Errored+t.Unscored, t.PassRate)
}

func worstCase(passed, failed, noVerdict int, rate float64) (lower, upper float64) {
	n := passed + failed + noVerdict
	switch {
	case n == 0:
		return math.NaN(), math.NaN()
	case noVerdict == 0:
		return rate, rate
	}
	return float64(passed) / float64(n), float64(passed+noVerdict) / float64(n)
}

// Group joins the rows of the shard logs of one run (its Parts) into one
// row, so that a history, a baseline and a drift check see runs, however
// many logs each was written in. runs must be sorted (Sort); so is the
// result. Shards share a run ID derived from what the run is, so two runs
// of one eval on one dataset share it too: the shards of a run are the
// logs of that ID that follow each other, a shard index seen again
// starting the next run. Runs that still share an ID (and the whole runs
// that share one) get their start appended to it ("ID@2006-01-02T15:04:05.000Z"),
// so that -baseline tells them apart.
//
// (The start to the millisecond: runs of one ID started in the same
// millisecond stay alike.)
func Group(runs []*Run) []*Run {
	var out []*Run
	open := map[string]*Run{} // eval and run ID → the run whose shards are being gathered
	for _, r := range runs {
		if r.Shard == "" {
			out = append(out, r)
			continue
		}
		key := r.Eval + "\x00" + r.Variant + "\x00" + r.RunID
		g := open[key]
		if g == nil || slices.ContainsFunc(g.Parts, func(p *Run) bool { return p.Shard == r.Shard }) {
			g = &Run{}
			open[key] = g
			out = append(out, g)
		}
		g.Parts = append(g.Parts, r)
	}
	for _, g := range out {
		if len(g.Parts) > 0 {
			g.join()
		}
	}
	Sort(out)
	seen := map[string]int{}
	for _, r := range out {
		seen[r.Eval+"\x00"+r.Variant+"\x00"+r.RunID]++
	}
	for _, r := range out {
		if seen[r.Eval+"\x00"+r.Variant+"\x00"+r.RunID] > 1 {
			r.RunID += "@" + r.Start.UTC().Format("2006-01-02T15:04:05.000Z")
		}
	}
	return out
}

// join fills r, a run of Parts, from its parts: counts and usage summed,
// rates from the sums (a Wilson interval: the parts' per-sample results
// are in their logs, not in their rows).
func (r *Run) join() {
	parts := r.Parts
	first := parts[0]
	*r = Run{RunID: first.RunID, Eval: first.Eval, Variant: first.Variant, Log: first.Log, HarnessVersion: first.HarnessVersion,
		JudgeVersion: first.JudgeVersion, SandboxVersion: first.SandboxVersion, DatasetSamples: first.DatasetSamples,
		DatasetHash: first.DatasetHash, Seed: first.Seed, Epochs: first.Epochs, Proctor: first.Proctor,
		Resources: first.Resources, ImageDigests: first.ImageDigests, EpisodeResources: episodeResourcesOf(parts),
		Start: first.Start, Method: "wilson over the shards' episodes", Parts: parts}
	var end time.Time
	var p50 float64
	var sum Tag // the counts
	tags := map[[2]string]*Tag{}
	var tagOrder [][2]string
	for _, p := range parts {
		if p.Start.Before(r.Start) {
			r.Start = p.Start
		}
		if e := p.Start.Add(p.Wall); e.After(end) {
			end = e
		}
		sum.add(p.Samples, p.Episodes, p.Passed, p.Failed, p.Errored, p.Unscored)
		r.MeanScore += p.MeanScore * float64(p.Passed+p.Failed)
		p50 += p.LatencyP50MS * float64(p.Episodes)
		r.LatencyP95MS = math.Max(r.LatencyP95MS, p.LatencyP95MS)
		r.InputTokens += p.InputTokens
		r.OutputTokens += p.OutputTokens
		r.CostUSD += p.CostUSD
		r.JudgeInputTokens += p.JudgeInputTokens
		r.JudgeOutputTokens += p.JudgeOutputTokens
		r.JudgeCostUSD += p.JudgeCostUSD
		r.SimulatorInputTokens += p.SimulatorInputTokens
		r.SimulatorOutputTokens += p.SimulatorOutputTokens
		r.SimulatorCostUSD += p.SimulatorCostUSD
		for _, t := range p.Tags {
			k := [2]string{t.Tag, t.Value}
			g := tags[k]
			if g == nil {
				g = &Tag{Tag: t.Tag, Value: t.Value}
				tags[k] = g
				tagOrder = append(tagOrder, k)
			}
			g.add(t.Samples, t.Episodes, t.Passed, t.Failed, t.Errored, t.Unscored)
		}
	}
	r.Samples, r.Episodes, r.Passed, r.Failed, r.Errored, r.Unscored = sum.Samples, sum.Episodes, sum.Passed, sum.Failed, sum.Errored, sum.Unscored
	r.Wall = end.Sub(r.Start)
	r.PassRate, r.Lo, r.Hi = rate(r.Passed, r.Failed)
	r.MeanScore /= float64(r.Passed + r.Failed) // NaN with nothing scored, as the rate
	r.LatencyP50MS = p50 / float64(r.Episodes)
	slices.SortFunc(tagOrder, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	for _, k := range tagOrder {
		t := tags[k]
		t.PassRate, t.Lo, t.Hi = rate(t.Passed, t.Failed)
		r.Tags = append(r.Tags, *t)
	}
}

func (t *Tag) add(samples, episodes, passed, failed, errored, unscored int) {
	t.Samples += samples
	t.Episodes += episodes
	t.Passed += passed
	t.Failed += failed
	t.Errored += errored
	t.Unscored += unscored
}

func rate(passed, failed int) (p, lo, hi float64) {
	if passed+failed == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	iv := stats.Wilson(passed, passed+failed, 0.95)
	return float64(passed) / float64(passed+failed), iv.Lo, iv.Hi
}

// logs are the logs the run was written in: its shards', or its own.
func (r *Run) logs() []string {
	if len(r.Parts) == 0 {
		return []string{r.Log}
	}
	paths := make([]string, len(r.Parts))
	for i, p := range r.Parts {
		paths[i] = p.Log
	}
	return paths
}

// ReadReport folds the logs of r (its shards', when Group joined them)
// into one report, as `proctor merge` would join them.
func ReadReport(r *Run, opts *report.Options) (*report.Report, error) {
	paths := r.logs()
	if len(paths) == 1 && r.Variant == "" {
		_, rep, err := Read(paths[0], opts)
		return rep, err
	}
	rep, err := report.FromRecords(variantRecords(func(yield func(sink.Record, error) bool) {
		for _, p := range paths {
			for rec, err := range jsonl.Records(p) {
				if !yield(rec, err) {
					return
				}
			}
		}
	}, r.Variant), opts)
	if err != nil || r.Variant == "" {
		return rep, err
	}
	// A variant's records alone are still a log of variants, with one:
	// its own report is the variant's.
	if v := rep.VariantReport(r.Variant); v != nil {
		return v, nil
	}
	return rep, nil
}

// episodeResourcesOf is the union of the parts' episode resources.
func episodeResourcesOf(parts []*Run) string {
	var all []string
	for _, p := range parts {
		if p.EpisodeResources != "" {
			all = append(all, strings.Split(p.EpisodeResources, "; ")...)
		}
	}
	slices.Sort(all)
	return strings.Join(slices.Compact(all), "; ")
}
