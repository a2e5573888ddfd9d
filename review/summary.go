package review

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/stats"
)

// Options tune Summarize. The zero value is valid.
type Options struct {
	Level    float64 // confidence level; default 0.95
	Width    float64 // the interval width to plan reviews for; default 0.05
	LowKappa float64 // agreement (Cohen's kappa) below which a tag is flagged; default 0.4
	MinItems int     // reviews a tag needs before it can be flagged; default 5
}

// Summary is what the reviews say about a run.
type Summary struct {
	Episodes    int            `json:"episodes"` // pass or fail episodes: the population
	JudgePasses int            `json:"judge_passes"`
	JudgeRate   stats.Float    `json:"judge_pass_rate"`
	JudgeCI     stats.Interval `json:"judge_interval"` // Wilson, over every episode: valid only if the judge is right

	Picked    int `json:"picked"`    // episodes in the queue
	Reviewed  int `json:"reviewed"`  // of them, reviewed by at least one person
	OffQueue  int `json:"off_queue"` // reviewed episodes not in the queue: not in the estimates
	Reviews   int `json:"reviews"`   // reviews that count (each reviewer's last of each episode)
	Reviewers int `json:"reviewers"`
	Seen      int `json:"saw_verdict"` // of them, made after seeing the judge's verdict

	// PPI is the prediction-powered pass rate: every judge verdict plus
	// the reviews of the queue (stats.PPIMean). ReviewsOnly is the same
	// design's estimate from the reviews alone (λ = 0): what the judge
	// adds is the difference in width.
	PPI         stats.PPI `json:"ppi"`
	ReviewsOnly stats.PPI `json:"reviews_only"`

	Confusion stats.Confusion `json:"confusion"` // the judge against each review
	Kappa     stats.Float     `json:"kappa"`
	// Alpha is Krippendorff's alpha among the reviewers, over the
	// AlphaEpisodes episodes that more than one reviewed; NaN with none.
	Alpha         stats.Float    `json:"alpha"`
	AlphaEpisodes int            `json:"alpha_episodes"`
	ByTag         []TagAgreement `json:"by_tag,omitempty"`
	Plan          Plan           `json:"plan"`
	Level         float64        `json:"level"`
	Unknown       []Key          `json:"unknown,omitempty"` // reviewed episodes the log has no pass or fail record of

	// Variant names the variant a summary of Variants is of.
	Variant string `json:"variant,omitempty"`
	// Variants are the summaries of each variant of a log of variants,
	// in name order, each exactly the summary of a log holding that
	// variant's episodes, queue entries and reviews alone. A pass rate
	// pooled over variants describes no agent (the report pools none
	// either): the summary of a log of variants has no judge's,
	// prediction-powered or reviews-only rate (NaN, the intervals' Method
	// MethodByVariant) and no plan; its counts and the judge's agreement
	// with people (the judge is one) are over every variant.
	Variants []Summary `json:"variants,omitempty"`
}

// MethodByVariant is the Method of a Summary's intervals when the log has
// variants: they are estimated per variant only (Summary.Variants).
const MethodByVariant = "none: variants are not pooled (see variants)"

// TagAgreement is the judge's agreement with people on one tag value.
type TagAgreement struct {
	Tag       string          `json:"tag"`
	Value     string          `json:"value"`
	Confusion stats.Confusion `json:"confusion"`
	Kappa     stats.Float     `json:"kappa"`
	Low       bool            `json:"low"` // kappa below Options.LowKappa over at least Options.MinItems reviews
}

// Plan says how many reviews of a uniform sample an interval of Width
// needs, given the agreement observed so far: with the judge (PPI) and
// without it. Zero when there is too little to plan from.
type Plan struct {
	Width       float64 `json:"width"`
	WithJudge   int     `json:"with_judge"`
	ReviewsOnly int     `json:"reviews_only"`
}

// Summarize puts episodes (a run's log), its queue (nil if none) and its
// reviews together. The intervals are cluster-robust by sample, as the
// report's are: epochs of one sample are not independent.
//
// A queue entry's inclusion probability is scaled by the share of its
// cell (its stratum and probability) that was reviewed: a queue reviewed
// in part counts as a smaller sample of the same design, which is exact
// when it is reviewed in queue order and assumes, otherwise, that what was
// left is missing at random within its cell.
//
// In a log of variants (an episode names one), each variant is summarized
// apart, in Summary.Variants, and nothing is pooled.
func Summarize(episodes []Episode, q *Queue, reviews []Review, opts Options) *Summary {
	opts.setDefaults()
	s := summarize(episodes, q, reviews, opts)
	variants := map[string]bool{}
	for i := range episodes {
		variants[episodes[i].Variant] = true
	}
	if len(variants) == 0 || (len(variants) == 1 && variants[""]) {
		return s
	}
	nan := math.NaN()
	none := stats.Interval{Lo: nan, Hi: nan, Level: opts.Level, Method: MethodByVariant}
	s.JudgeRate, s.JudgeCI = stats.Float(nan), none
	s.PPI = stats.PPI{Mean: nan, SE: nan, Interval: none, Lambda: nan, N: s.PPI.N, Labelled: s.PPI.Labelled}
	s.ReviewsOnly = stats.PPI{Mean: nan, SE: nan, Interval: none, Lambda: 0, N: s.ReviewsOnly.N, Labelled: s.ReviewsOnly.Labelled}
	s.Plan = Plan{Width: opts.Width}
	for _, v := range slices.Sorted(maps.Keys(variants)) {
		eps := slices.DeleteFunc(slices.Clone(episodes), func(e Episode) bool { return e.Variant != v })
		var vq *Queue
		if q != nil {
			c := *q
			c.Entries = slices.DeleteFunc(slices.Clone(q.Entries), func(e Entry) bool { return e.Variant != v })
			vq = &c
		}
		rs := slices.DeleteFunc(slices.Clone(reviews), func(r Review) bool { return r.Variant != v })
		vs := summarize(eps, vq, rs, opts)
		vs.Variant = v
		s.Variants = append(s.Variants, *vs)
	}
	return s
}

// summarize is Summarize of episodes taken as one population.
func summarize(episodes []Episode, q *Queue, reviews []Review, opts Options) *Summary {
	s := &Summary{Level: opts.Level}
	pop := s.addJudged(episodes)
	final := Final(reviews)
	grade := Grade(final)
	s.addAgreement(final, pop, &opts)
	s.Unknown = pop.unknown(grade)
	labels := s.addQueue(q, pop, grade)
	// With no episode there is no estimate: NaN, as with too few reviews
	// (not a zero that reads as a certain pass rate of 0).
	s.PPI = stats.PPIMeanLambda(nil, nil, nil, 0, opts.Level)
	s.ReviewsOnly = s.PPI
	if s.Episodes > 0 {
		s.PPI = stats.PPIMean(pop.pred, labels, pop.clusters, opts.Level)
		s.ReviewsOnly = stats.PPIMeanLambda(pop.pred, labels, pop.clusters, 0, opts.Level)
	}
	s.Plan = s.plan(opts.Width, opts.Level)
	return s
}

func (o *Options) setDefaults() {
	if o.Level == 0 {
		o.Level = 0.95
	}
	if o.Width == 0 {
		o.Width = 0.05
	}
	if o.LowKappa == 0 {
		o.LowKappa = 0.4
	}
	if o.MinItems == 0 {
		o.MinItems = 5
	}
}

// population is the episodes the judge graded, pass or fail: the judge's
// verdicts as predictions, in log order, with their clusters by sample
// (epochs of one sample move together).
type population struct {
	index    map[Key]int // an episode's place in pred
	pred     []float64
	clusters []int
	verdicts map[Key]bool
	tags     map[Key]map[string]string
}

// addJudged builds the population from the episodes, and counts it and
// the judge's passes.
func (s *Summary) addJudged(episodes []Episode) *population {
	p := &population{index: map[Key]int{}, verdicts: map[Key]bool{}, tags: map[Key]map[string]string{}}
	sampleIndex := map[string]int{}
	for i := range episodes {
		r := &episodes[i]
		if r.Status != sink.Pass && r.Status != sink.Fail {
			continue
		}
		k := r.Key()
		pass := r.Status == sink.Pass
		p.index[k] = len(p.pred)
		p.pred = append(p.pred, b2f(pass))
		c, ok := sampleIndex[r.SampleID]
		if !ok {
			c = len(sampleIndex)
			sampleIndex[r.SampleID] = c
		}
		p.clusters = append(p.clusters, c)
		p.verdicts[k] = pass
		p.tags[k] = r.Tags
		if pass {
			s.JudgePasses++
		}
	}
	s.Episodes = len(p.pred)
	s.JudgeRate = stats.Float(math.NaN())
	if s.Episodes > 0 {
		s.JudgeRate = stats.Float(float64(s.JudgePasses) / float64(s.Episodes))
	}
	s.JudgeCI = stats.Wilson(s.JudgePasses, s.Episodes, s.Level)
	return p
}

// addAgreement counts the reviews that count and sets the judge's
// agreement with them, overall and by tag, and the reviewers' among
// themselves.
func (s *Summary) addAgreement(final []Review, p *population, opts *Options) {
	s.Reviews = len(final)
	reviewers := map[string]bool{}
	byTag := map[[2]string]*stats.Confusion{}
	units := map[Key][]int{}
	for _, r := range final {
		reviewers[r.Reviewer] = true
		if r.SawVerdict {
			s.Seen++
		}
		units[r.Key()] = append(units[r.Key()], int(b2f(r.Pass)))
		jv, ok := p.verdicts[r.Key()]
		if !ok {
			continue
		}
		s.Confusion.Add(jv, r.Pass)
		for t, v := range p.tags[r.Key()] {
			c := byTag[[2]string{t, v}]
			if c == nil {
				c = &stats.Confusion{}
				byTag[[2]string{t, v}] = c
			}
			c.Add(jv, r.Pass)
		}
	}
	s.Reviewers = len(reviewers)
	s.Kappa = stats.Float(s.Confusion.Kappa())
	var multi [][]int
	for _, u := range units {
		if len(u) > 1 {
			multi = append(multi, u)
		}
	}
	s.AlphaEpisodes = len(multi)
	s.Alpha = stats.Float(stats.KrippendorffAlpha(multi))
	for tv, c := range byTag {
		k := c.Kappa()
		s.ByTag = append(s.ByTag, TagAgreement{Tag: tv[0], Value: tv[1], Confusion: *c, Kappa: stats.Float(k),
			Low: c.N() >= opts.MinItems && k < opts.LowKappa})
	}
	slices.SortFunc(s.ByTag, func(a, b TagAgreement) int { return cmp.Or(cmp.Compare(a.Tag, b.Tag), cmp.Compare(a.Value, b.Value)) })
}

// unknown returns the reviewed episodes the population lacks, in order.
func (p *population) unknown(grade map[Key]float64) []Key {
	var out []Key
	for k := range grade {
		if _, ok := p.index[k]; !ok {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, compareKeys)
	return out
}

// addQueue counts the queue's episodes, those reviewed and the reviewed
// ones off the queue, and returns the labels: the reviewed queue entries,
// each inclusion probability scaled by its cell's response rate.
func (s *Summary) addQueue(q *Queue, p *population, grade map[Key]float64) []stats.Label {
	type cell struct {
		stratum string
		prob    float64
	}
	picked, done := map[cell]int{}, map[cell]int{}
	inQueue := map[Key]bool{}
	if q != nil {
		for _, e := range q.Entries {
			if _, ok := p.index[e.Key()]; !ok {
				continue
			}
			s.Picked++
			inQueue[e.Key()] = true
			c := cell{e.Stratum, e.Prob}
			picked[c]++
			if _, ok := grade[e.Key()]; ok {
				done[c]++
				s.Reviewed++
			}
		}
	}
	for k := range grade {
		if _, ok := p.index[k]; ok && !inQueue[k] {
			s.OffQueue++
		}
	}
	var labels []stats.Label
	if q != nil {
		for _, e := range q.Entries {
			g, ok := grade[e.Key()]
			i, known := p.index[e.Key()]
			if !ok || !known {
				continue
			}
			c := cell{e.Stratum, e.Prob}
			labels = append(labels, stats.Label{Index: i, Value: g, Prob: e.Prob * float64(done[c]) / float64(picked[c])})
		}
	}
	return labels
}

// plan is how many reviews an interval of width needs, from the reviews'
// pass rate and the judge's correlation with them.
func (s *Summary) plan(width, level float64) Plan {
	pl := Plan{Width: width}
	if p := s.ReviewsOnly.Mean; s.Episodes > 0 && p > 0 && p < 1 {
		sd := math.Sqrt(p * (1 - p))
		if rho := s.Confusion.Phi(); !math.IsNaN(rho) {
			pl.WithJudge = stats.PPISampleSize(width, sd, rho, s.Episodes, level)
		}
		pl.ReviewsOnly = stats.PPISampleSize(width, sd, 0, s.Episodes, level)
	}
	return pl
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
