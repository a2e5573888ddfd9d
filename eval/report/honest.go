package report

// Honest numbers: the worst-case range of a pass rate that leaves out
// errored and unscored episodes, where those episodes came from, and
// what the run spent by role and by model.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/internal/natural"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/stats"
	"github.com/proctor-evals/proctor/usage"
)

// DefaultMaxNoVerdict is Options.MaxNoVerdict's default: a run with more
// than 5% of its episodes errored or unscored is not to be trusted as it
// is.
const DefaultMaxNoVerdict = 0.05

// WorstCase is the range in which a pass rate that leaves out errored and
// unscored episodes lies whatever those episodes would have been: counted
// as failures (Lower) and as passes (Upper), each with its interval,
// computed as the pass rate's is (clustered by sample over several
// epochs). An error is not evidence of a pass: gates decide on Lower
// unless told to exclude errors.
type WorstCase struct {
	NoVerdict int     `json:"no_verdict"` // errored and unscored episodes
	Share     float64 `json:"share"`      // NoVerdict / Episodes
	// Over reports that Share is above Options.MaxNoVerdict: the report
	// warns, and a run from the command line exits non-zero.
	Over  bool  `json:"over,omitempty"`
	Lower Bound `json:"lower"`
	Upper Bound `json:"upper"`
}

// Bound is one end of a WorstCase: a pass rate and its interval.
type Bound struct {
	PassRate float64        `json:"pass_rate"`
	Interval stats.Interval `json:"interval"`
}

// ErrorSource counts errored or unscored episodes that came from one
// place: the records' error_source (a stage, or a judge's path through
// its combinators), status and error kind. Report.ErrorSources lists
// them, the most frequent first.
type ErrorSource struct {
	// Source is the records' error_source: "sandbox", "harness",
	// "judge", "judge/cascade.expensive/rubric"…; "" for records written
	// before it existed.
	Source string         `json:"source"`
	Status sink.Status    `json:"status"`
	Kind   sink.ErrorKind `json:"kind,omitempty"`
	Count  int            `json:"count"`
	// First is the first line of one such record's error (its reason,
	// for an unscored one): that of the first episode in the order of
	// sample IDs (digits by value) and epochs, SampleID and Epoch, so
	// that the same records give the same report in any order.
	First    string `json:"first"`
	SampleID string `json:"sample_id"`
	Epoch    int    `json:"epoch"`
}

// ModelUsage is what one model spent in one role ("agent" or "judge"),
// for the models the harness and the judge named (usage.Usage.Model).
type ModelUsage struct {
	Role  string      `json:"role"`
	Model string      `json:"model"`
	Usage usage.Usage `json:"usage"`
}

// noVerdictAs says what errored and unscored episodes count as in a pass
// rate.
type noVerdictAs int

const (
	excludeNoVerdict noVerdictAs = iota // left out: the pass rate
	noVerdictFails                      // failures: the worst case's lower bound
	noVerdictPasses                     // passes: its upper bound
)

// weightsAs is weightsOf with sample i's errored and unscored episodes
// counted as mode says, each of weight 1.
func (a *Aggregator) weightsAs(i int, mode noVerdictAs) sampleWeights {
	w := a.weightsOf(i)
	if mode == excludeNoVerdict {
		return w
	}
	n := float64(a.samples[i].errored + a.samples[i].unscore)
	w.sum += n
	if mode == noVerdictPasses {
		w.pass += n
	}
	return w
}

// honest fills in r what this file adds to a report.
func (a *Aggregator) honest(r *Report) {
	if n := r.Errored + r.Unscored; n > 0 && a.variants == nil {
		wc := &WorstCase{NoVerdict: n, Share: float64(n) / float64(r.Episodes)}
		wc.Lower.PassRate, wc.Lower.Interval = a.passRate(nil, r.Epochs, noVerdictFails)
		wc.Upper.PassRate, wc.Upper.Interval = a.passRate(nil, r.Epochs, noVerdictPasses)
		max := a.opts.MaxNoVerdict
		if max == 0 {
			max = DefaultMaxNoVerdict
		}
		if wc.Over = max > 0 && wc.Share > max; wc.Over {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%d of %d episodes (%s) errored or were unscored, over the %s the report allows (Options.MaxNoVerdict): the pass rate is between %s and %s",
				n, r.Episodes, pct(wc.Share), pct(max), pct(wc.Lower.PassRate), pct(wc.Upper.PassRate)))
		}
		r.WorstCase = wc
	}
	r.ErrorSources = a.sources.report()
	r.JudgeStages = a.stages.report()
	r.JudgeUsage = a.spend.judge
	r.SimulatorUsage = a.spend.simulator
	r.ByModel = a.spend.report()
}

// BrokenJudge returns where a judge, or a stage of it, that gave no
// verdict on any of its calls failed, "" when each gave one: the stage's
// path (JudgeStages: "judge/cascade.expensive/rubric") when a stage was
// called, on however few episodes, and never gave a verdict; else, when
// every episode that reached the judge ended without a verdict from it,
// the error source of its errors and unscored verdicts ("judge",
// "judge/rubric"…). A gate fails on it whatever the share of episodes
// without a verdict (MaxNoVerdict, which may be set to never).
func (r *Report) BrokenJudge() string {
	if s := silentStage(r.JudgeStages); s != "" {
		return s
	}
	if r.Passed+r.Failed > 0 {
		return ""
	}
	for _, s := range r.ErrorSources { // the most frequent first
		if s.Source == "judge" || strings.HasPrefix(s.Source, "judge/") {
			return s.Source
		}
	}
	return ""
}

// GateFailure says why the report fails the gates a log carries on its
// own, "" when it passes them: its sequential gate did not decide "pass";
// more of its episodes than Options.MaxNoVerdict allows had no verdict
// (WorstCase.Over); or its judge gave no verdict on any call
// (BrokenJudge). A run from the command line (eval/cli) and `proctor
// report` of its log exit non-zero on it, so that CI can gate a log it did
// not run.
func (r *Report) GateFailure() string {
	if r.Leaderboard != nil {
		return r.variantGateFailure()
	}
	switch {
	case r.Sequential != nil && !r.Sequential.Passed():
		why := string(r.Sequential.Decision)
		if r.Sequential.Problem != "" {
			why += ": " + r.Sequential.Problem
		}
		return "the sequential gate did not pass: " + why
	case r.WorstCase != nil && r.WorstCase.Over:
		return fmt.Sprintf("%s\n%d of %d episodes errored or were unscored, over -max-no-verdict (Options.MaxNoVerdict)",
			r.Headline(), r.WorstCase.NoVerdict, r.Episodes)
	}
	if src := r.BrokenJudge(); src != "" {
		for _, s := range r.JudgeStages {
			if s.Stage == src {
				return fmt.Sprintf("the judge's stage %s gave no verdict on any of its %d calls: no share of episodes without a verdict passes a gate with a broken judge", src, s.Calls)
			}
		}
		return fmt.Sprintf("the judge gave no verdict on any of its calls (%s): no share of episodes without a verdict passes a gate with a broken judge", src)
	}
	if r.failOnBroken && len(r.Broken) > 0 {
		return r.brokenLine() + ": -fail-on-broken (Options.FailOnBroken) requires none"
	}
	return ""
}

// GateBound is the bound a gate compares with its bar: the lower bound of
// the worst case (errored and unscored episodes counted as failures), or
// with excludeErrors the lower bound of the pass rate over scored
// episodes alone.
//
// For a report of variants it is the lowest of the variants' bounds, of
// those the run did not eliminate ([Report.GateBoundVariant] says which).
func (r *Report) GateBound(excludeErrors bool) float64 {
	if r.Leaderboard != nil {
		lo, _ := r.variantGateBound(excludeErrors)
		return lo
	}
	if r.WorstCase == nil || excludeErrors {
		return r.Interval.Lo
	}
	return r.WorstCase.Lower.Interval.Lo
}

// Headline is the report in one line a hurried reader cannot misread:
// the pass rate with its interval and, when episodes errored or were
// unscored, the range it lies in whatever they would have been.
func (r *Report) Headline() string {
	h := r.headline()
	if b := r.brokenLine(); b != "" {
		h += "; " + b
	}
	return h
}

func (r *Report) headline() string {
	if r.Leaderboard != nil {
		return r.headlineVariants()
	}
	if r.Passed+r.Failed == 0 && r.WorstCase == nil {
		return "pass rate n/a: no scored episodes"
	}
	ci := func(iv stats.Interval) string { return fmt.Sprintf("[%s, %s]", pct(iv.Lo), pct(iv.Hi)) }
	rate := "n/a"
	if r.Passed+r.Failed > 0 {
		rate = pct(r.PassRate) + " " + ci(r.Interval)
	}
	wc := r.WorstCase
	if wc == nil {
		return fmt.Sprintf("pass rate %s (%g%% CI)", rate, 100*r.Interval.Level)
	}
	var what []string
	if r.Errored > 0 {
		what = append(what, fmt.Sprintf("%d errored", r.Errored))
	}
	if r.Unscored > 0 {
		what = append(what, fmt.Sprintf("%d unscored", r.Unscored))
	}
	s := fmt.Sprintf("pass rate %s of scored episodes — %s of %d: between %s %s and %s %s (%g%% CI)",
		rate, strings.Join(what, " and "), r.Episodes,
		pct(wc.Lower.PassRate), ci(wc.Lower.Interval), pct(wc.Upper.PassRate), ci(wc.Upper.Interval), 100*r.Interval.Level)
	if wc.Over {
		s = "WARNING: " + s
	}
	return s
}

// errorSources counts errored and unscored records by where they came
// from, in first-seen order.
type errorSources struct {
	list  []ErrorSource
	index map[sourceKey]int
}

type sourceKey struct {
	source string
	status sink.Status
	kind   sink.ErrorKind
}

func (e *errorSources) add(r *sink.Record) {
	first := r.Reason
	if r.Error != "" {
		first = r.Error
	}
	e.count(ErrorSource{Source: r.ErrorSource, Status: r.Status, Kind: r.ErrorKind, Count: 1,
		First: firstLine(first), SampleID: r.SampleID, Epoch: r.Epoch})
}

// count adds s, keeping copies of its strings (a record's may share a
// reader's buffer).
func (e *errorSources) count(s ErrorSource) {
	k := sourceKey{s.Source, s.Status, s.Kind}
	if i, ok := e.index[k]; ok {
		t := &e.list[i]
		t.Count += s.Count
		if c := natural.Compare(s.SampleID, t.SampleID); c < 0 || c == 0 && s.Epoch < t.Epoch {
			t.First, t.SampleID, t.Epoch = strings.Clone(s.First), strings.Clone(s.SampleID), s.Epoch
		}
		return
	}
	if e.index == nil {
		e.index = map[sourceKey]int{}
	}
	s.Source, s.Status, s.Kind = strings.Clone(s.Source), sink.Status(strings.Clone(string(s.Status))), sink.ErrorKind(strings.Clone(string(s.Kind)))
	s.First, s.SampleID = strings.Clone(s.First), strings.Clone(s.SampleID)
	e.index[sourceKey{s.Source, s.Status, s.Kind}] = len(e.list)
	e.list = append(e.list, s)
}

// report lists the sources, the most frequent first (then by source,
// status and kind).
func (e *errorSources) report() []ErrorSource {
	out := slices.Clone(e.list)
	slices.SortFunc(out, func(x, y ErrorSource) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), strings.Compare(x.Source, y.Source),
			strings.Compare(string(x.Status), string(y.Status)), strings.Compare(string(x.Kind), string(y.Kind)))
	})
	return out
}

// spending adds up the judge's and the simulator's parts of the usage
// and what each named model spent in each role.
type spending struct {
	judge, simulator usage.Usage
	byModel          map[modelKey]*usage.Usage
}

type modelKey struct{ role, model string }

func (s *spending) add(r *sink.Record) {
	judge := usage.Usage{InputTokens: r.JudgeInputTokens, OutputTokens: r.JudgeOutputTokens, CostUSD: r.JudgeCostUSD}
	sim := usage.Usage{InputTokens: r.SimulatorInputTokens, OutputTokens: r.SimulatorOutputTokens, CostUSD: r.SimulatorCostUSD}
	s.judge = s.judge.Add(judge)
	s.simulator = s.simulator.Add(sim)
	if r.Model != "" {
		s.addModel(modelKey{"agent", r.Model}, usage.Usage{InputTokens: r.InputTokens - judge.InputTokens - sim.InputTokens,
			OutputTokens: r.OutputTokens - judge.OutputTokens - sim.OutputTokens, CostUSD: r.CostUSD - judge.CostUSD - sim.CostUSD})
	}
	if r.JudgeModel != "" {
		s.addModel(modelKey{"judge", r.JudgeModel}, judge)
	}
	if r.SimulatorModel != "" {
		s.addModel(modelKey{"simulator", r.SimulatorModel}, sim)
	}
}

func (s *spending) addModel(k modelKey, u usage.Usage) {
	if v, ok := s.byModel[k]; ok {
		*v = v.Add(u) // through the pointer: assigning to the map would store k, which may share a reader's buffer
		return
	}
	if s.byModel == nil {
		s.byModel = map[modelKey]*usage.Usage{}
	}
	v := usage.Usage{}.Add(u)
	s.byModel[modelKey{k.role, strings.Clone(k.model)}] = &v
}

// report lists the models, the costliest first (then by role and name).
func (s *spending) report() []ModelUsage {
	var out []ModelUsage
	for k, u := range s.byModel {
		out = append(out, ModelUsage{Role: k.role, Model: k.model, Usage: *u})
	}
	slices.SortFunc(out, func(x, y ModelUsage) int {
		if c := cmp.Compare(y.Usage.CostUSD, x.Usage.CostUSD); c != 0 && !math.IsNaN(x.Usage.CostUSD+y.Usage.CostUSD) {
			return c
		}
		if c := cmp.Compare(y.Usage.Tokens(), x.Usage.Tokens()); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(x.Role, y.Role), strings.Compare(x.Model, y.Model))
	})
	return out
}
