package stats_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/stats"
)

// The setting: a judge that passes 95% of the true passes and 30%
// of the true failures (so it reports 0.69 where the truth is 0.6), 5,000
// episodes, 250 of them reviewed by people.
const (
	simTruth   = 0.6
	simTPR     = 0.95
	simFPR     = 0.30
	simN       = 5000
	simReviews = 250
)

// episodes draws n episodes: truth[i] is the human grade, pred[i] the
// judge's verdict, stratum[i] a tag (0: "easy", 1: "hard") when stratified;
// unstratified, every episode passes with probability simTruth. Stratified,
// 3,000 easy episodes pass at 0.75 and 2,000 hard ones at 0.375, so the
// mean is still 0.6.
func episodes(rng *rand.Rand, stratified bool, truth, pred []float64, stratum []int) {
	for i := range truth {
		p := simTruth
		stratum[i] = 0
		if stratified {
			p = 0.75
			if i >= 3*len(truth)/5 {
				p, stratum[i] = 0.375, 1
			}
		}
		y := rng.Float64() < p
		f := rng.Float64() < simFPR
		if y {
			f = rng.Float64() < simTPR
		}
		truth[i], pred[i] = b2f(y), b2f(f)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// A design picks the episodes to review and their inclusion probabilities.
type design struct {
	name       string
	stratified bool // the episodes have two tags with different pass rates
	pick       func(rng *rand.Rand, pred []float64, stratum []int, truth []float64) []stats.Label
}

// fixedPerGroup draws take[g] episodes without replacement from each group
// g (group(i) says which), each with probability take[g]/size(g).
func fixedPerGroup(rng *rand.Rand, n int, group func(int) int, take []int, truth []float64) []stats.Label {
	members := make([][]int, len(take))
	for i := range n {
		g := group(i)
		members[g] = append(members[g], i)
	}
	var labels []stats.Label
	for g, m := range members {
		k := min(take[g], len(m))
		for j := range k { // partial Fisher–Yates
			r := j + rng.IntN(len(m)-j)
			m[j], m[r] = m[r], m[j]
			labels = append(labels, stats.Label{Index: m[j], Value: truth[m[j]], Prob: float64(k) / float64(len(m))})
		}
	}
	return labels
}

var designs = []design{
	{name: "uniform", pick: func(rng *rand.Rand, pred []float64, _ []int, truth []float64) []stats.Label {
		return fixedPerGroup(rng, len(pred), func(int) int { return 0 }, []int{simReviews}, truth)
	}},
	// 125 reviews in each tag: the hard tag (2,000 episodes) is sampled at
	// 6.25%, the easy one (3,000) at 4.2%.
	{name: "stratified", stratified: true, pick: func(rng *rand.Rand, pred []float64, stratum []int, truth []float64) []stats.Label {
		return fixedPerGroup(rng, len(pred), func(i int) int { return stratum[i] }, []int{125, 125}, truth)
	}},
	// Suspected failures first: 150 reviews among the judge's ~1,550
	// failures (9.7%), 100 among its ~3,450 passes (2.9%).
	{name: "oversampled failures", pick: func(rng *rand.Rand, pred []float64, _ []int, truth []float64) []stats.Label {
		return fixedPerGroup(rng, len(pred), func(i int) int { return int(pred[i]) }, []int{150, 100}, truth)
	}},
	// Independent draws (Poisson sampling), failures at 12% and passes at
	// 3%, over stratified episodes: a random number of reviews.
	{name: "poisson", stratified: true, pick: func(rng *rand.Rand, pred []float64, _ []int, truth []float64) []stats.Label {
		var labels []stats.Label
		for i, f := range pred {
			p := 0.12
			if f == 1 {
				p = 0.03
			}
			if rng.Float64() < p {
				labels = append(labels, stats.Label{Index: i, Value: truth[i], Prob: p})
			}
		}
		return labels
	}},
}

// simResult sums the runs of one design.
type simResult struct {
	runs                       int
	judgeCovers, ppiCovers     int
	reviewsCovers, naiveCovers int
	ppiWidth, reviewsWidth     float64
}

// simulate runs a design runs times: the judge-only Wilson interval, the
// prediction-powered one, the one from the reviews alone, and a naive one
// that takes the reviews for a uniform sample (their inclusion
// probabilities replaced by their mean).
func simulate(d design, runs int, seed uint64) simResult {
	rng := rand.New(rand.NewPCG(seed, 26))
	truth, pred := make([]float64, simN), make([]float64, simN)
	stratum := make([]int, simN)
	var r simResult
	for range runs {
		episodes(rng, d.stratified, truth, pred, stratum)
		labels := d.pick(rng, pred, stratum, truth)
		passes := 0
		for _, f := range pred {
			passes += int(f)
		}
		r.runs++
		if stats.Wilson(passes, simN, 0.95).Contains(simTruth) {
			r.judgeCovers++
		}
		ppi := stats.PPIMean(pred, labels, nil, 0.95)
		if ppi.Interval.Contains(simTruth) {
			r.ppiCovers++
		}
		r.ppiWidth += ppi.Interval.Width()
		rev := stats.PPIMeanLambda(pred, labels, nil, 0, 0.95)
		if rev.Interval.Contains(simTruth) {
			r.reviewsCovers++
		}
		r.reviewsWidth += rev.Interval.Width()
		naive := make([]stats.Label, len(labels))
		for i, l := range labels {
			naive[i] = stats.Label{Index: l.Index, Value: l.Value, Prob: float64(len(labels)) / simN}
		}
		if stats.PPIMean(pred, naive, nil, 0.95).Interval.Contains(simTruth) {
			r.naiveCovers++
		}
	}
	r.ppiWidth /= float64(runs)
	r.reviewsWidth /= float64(runs)
	return r
}

func (r simResult) String() string {
	pct := func(k int) string { return fmt.Sprintf("%d/%d (%.1f%%)", k, r.runs, 100*float64(k)/float64(r.runs)) }
	return fmt.Sprintf("judge-only covers %s; PPI covers %s, mean width %.4f; reviews-only covers %s, mean width %.4f; ignoring inclusion probabilities covers %s",
		pct(r.judgeCovers), pct(r.ppiCovers), r.ppiWidth, pct(r.reviewsCovers), r.reviewsWidth, pct(r.naiveCovers))
}

// TestPPIMeanCoverage is the simulation, 2,000 runs of each
// design: the biased judge's own interval never holds the truth; the
// prediction-powered one holds it at the nominal 95% under every design,
// with its inclusion probabilities, and is narrower than the reviews
// alone. A count of 2,000 runs at 95% has a standard deviation of 10
// around 1,900; the bound 1,860 leaves 1,870 (three of them) plus one
// point for the normal interval's skew when a stratum's passes are rare
// (the judge's failures are 90% true failures): over 20,000 runs
// (BenchmarkPPIMeanCoverage) that design covers 94.2%.
func TestPPIMeanCoverage(t *testing.T) {
	t.Parallel()
	const runs = 2000
	for i, d := range designs {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			r := simulate(d, runs, uint64(i+1))
			t.Log(r)
			assert.Zero(t, r.judgeCovers, "the biased judge's interval should miss the truth")
			assert.GreaterOrEqual(t, r.ppiCovers, 1860, "PPI coverage below nominal")
			assert.LessOrEqual(t, r.ppiCovers, 1960, "PPI coverage far above nominal: the interval is needlessly wide")
			assert.GreaterOrEqual(t, r.reviewsCovers, 1870, "reviews-only coverage below nominal")
			assert.Less(t, r.ppiWidth, 0.85*r.reviewsWidth, "PPI should be clearly narrower than the reviews alone")
		})
	}
}

// TestPPIMeanIgnoringInclusionIsBiased is the control that shows the
// coverage test can fail: oversampled failures taken for a uniform sample
// pull the estimate down, and the interval misses.
func TestPPIMeanIgnoringInclusionIsBiased(t *testing.T) {
	t.Parallel()
	r := simulate(designs[2], 200, 99)
	t.Log(r)
	assert.Less(t, r.naiveCovers, 100, "ignoring the inclusion probabilities of an oversampled design should break coverage")
	assert.GreaterOrEqual(t, r.ppiCovers, 180)
}

// BenchmarkPPIMeanCoverage runs the simulation 20,000 times per design and
// reports the coverage: go test ./stats -run '^$' -bench PPIMeanCoverage -benchtime 1x
func BenchmarkPPIMeanCoverage(b *testing.B) {
	for i, d := range designs {
		b.Run(d.name, func(b *testing.B) {
			var r simResult
			for b.Loop() {
				r = simulate(d, 20000, uint64(100+i))
			}
			b.ReportMetric(float64(r.ppiCovers)/float64(r.runs), "ppi-coverage")
			b.ReportMetric(float64(r.reviewsCovers)/float64(r.runs), "reviews-coverage")
			b.ReportMetric(r.ppiWidth/r.reviewsWidth, "width-ratio")
			b.Log(r)
		})
	}
}

// TestPPIMeanByHand checks the formulas on a tiny example computed by
// hand: 4 items, predictions 1 1 0 1, items 0 and 2 labelled 1 and 1 with
// probability 1/2 each.
func TestPPIMeanByHand(t *testing.T) {
	t.Parallel()
	pred := []float64{1, 1, 0, 1}
	labels := []stats.Label{{Index: 0, Value: 1, Prob: 0.5}, {Index: 2, Value: 1, Prob: 0.5}}
	// λ = 1: f̄ = 0.75; r = (0, 1), r̄ = (0/0.5 + 1/0.5)/(2 + 2) = 0.5;
	// mean 1.25. φ = f + r̄ + (N/N̂)(r − r̄)/π with N/N̂ = 1:
	// φ = (1.5 − 1, 1.5, 0.5 + 1, 1.5) = (0.5, 1.5, 1.5, 1.5);
	// s² = (0.75² + 3·0.25²)/3 = 0.25, SE = √(0.25/4) = 0.25.
	got := stats.PPIMeanLambda(pred, labels, nil, 1, 0.95)
	assert.InDelta(t, 1.25, got.Mean, 1e-12)
	assert.InDelta(t, 0.25, got.SE, 1e-12)
	assert.InDelta(t, 1.25-1.959964*0.25, got.Interval.Lo, 1e-6)
	assert.Equal(t, stats.MethodPPI, got.Interval.Method)
	// Each item its own cluster: the same. Clusters {0}, {1, 2, 3}: the
	// deviations (−0.75, 0.25, 0.25, 0.25) sum to D = (−0.75, 0.75), and
	// SE² = 2/(2−1)·(0.75² + 0.75²)/4² = 0.140625.
	assert.InDelta(t, 0.25, stats.PPIMeanLambda(pred, labels, []int{7, 8, 9, 10}, 1, 0.95).SE, 1e-12)
	assert.InDelta(t, 0.375, stats.PPIMeanLambda(pred, labels, []int{3, 5, 5, 5}, 1, 0.95).SE, 1e-12)
	assert.Panics(t, func() { stats.PPIMean(pred, labels, []int{1}, 0.95) })
	// λ = 0: the labels alone: mean 1, and φ = 1 + 0 everywhere: SE 0.
	got = stats.PPIMeanLambda(pred, labels, nil, 0, 0.95)
	assert.InDelta(t, 1, got.Mean, 1e-12)
	assert.InDelta(t, 0, got.SE, 1e-12)
	// Tuned: the labels are constant, so the slope is 0.
	assert.Zero(t, stats.PPIMean(pred, labels, nil, 0.95).Lambda)
}

// TestPPIMeanEveryItemLabelled: with every item labelled for certain, the
// predictions cannot help (λ = 0) and the estimate is the plain mean with
// its usual standard error.
func TestPPIMeanEveryItemLabelled(t *testing.T) {
	t.Parallel()
	pred := []float64{1, 0, 1, 1, 0}
	y := []float64{1, 0, 0, 1, 1}
	var labels []stats.Label
	for i, v := range y {
		labels = append(labels, stats.Label{Index: i, Value: v, Prob: 1})
	}
	got := stats.PPIMean(pred, labels, nil, 0.9)
	assert.Zero(t, got.Lambda)
	assert.InDelta(t, 0.6, got.Mean, 1e-12)
	assert.InDelta(t, math.Sqrt(0.3/5), got.SE, 1e-12) // s² = 1.2/4
}

func TestPPIMeanTooFewLabels(t *testing.T) {
	t.Parallel()
	got := stats.PPIMean([]float64{1, 0, 1}, []stats.Label{{Index: 1, Value: 1, Prob: 0.5}}, nil, 0.95)
	assert.True(t, math.IsNaN(got.Mean) && math.IsNaN(got.SE) && math.IsNaN(got.Interval.Lo))
	assert.Equal(t, 1, got.Labelled)
}

func TestPPIMeanPanics(t *testing.T) {
	t.Parallel()
	pred := []float64{1, 0}
	for name, labels := range map[string][]stats.Label{
		"index":       {{Index: 2, Prob: 0.5}},
		"negative":    {{Index: -1, Prob: 0.5}},
		"twice":       {{Index: 0, Prob: 0.5}, {Index: 0, Prob: 0.5}},
		"probability": {{Index: 0, Prob: 0}},
		"above one":   {{Index: 0, Prob: 1.5}},
	} {
		assert.Panics(t, func() { stats.PPIMean(pred, labels, nil, 0.95) }, name)
	}
	assert.Panics(t, func() { stats.PPIMean(pred, nil, nil, 1) })
}

// TestPPISampleSize checks the planning formula against the variance the
// simulation measures: the reviews it says a width needs give that width.
func TestPPISampleSize(t *testing.T) {
	t.Parallel()
	sd := math.Sqrt(simTruth * (1 - simTruth))
	// In the setting: P(f=1) = 0.69, Cov(f, Y) = 0.57 − 0.69·0.6.
	cov := simTruth*simTPR - 0.69*simTruth
	rho := cov / (sd * math.Sqrt(0.69*0.31))
	r := simulate(designs[0], 300, 7)
	n := stats.PPISampleSize(r.ppiWidth, sd, rho, simN, 0.95)
	assert.InDelta(t, simReviews, n, 25, "the width 250 reviews give should need about 250 reviews")
	// Without a judge (rho = 0): the usual n = (2z·σ/w)², less the finite N.
	assert.Equal(t, 385, stats.PPISampleSize(0.1, 0.5, 0, 1_000_000, 0.95))
	// A width below what labelling everything gives is out of reach.
	assert.Equal(t, 101, stats.PPISampleSize(0.01, 0.5, 0.9, 100, 0.95))
	// A perfect judge needs the minimum.
	assert.Equal(t, 2, stats.PPISampleSize(0.1, 0.5, 1, 10_000, 0.95))
	// A judge that disagrees with people gets no weight (λ is clipped to
	// [0, 1]): it plans what the labels alone need, 1,537 for ±0.025 at
	// σ = 0.5, not the 334 a weight of −0.9 would need.
	assert.Equal(t, 1537, stats.PPISampleSize(0.05, 0.5, -0.9, 10_000, 0.95))
	require.Panics(t, func() { stats.PPISampleSize(0, 0.5, 0, 10, 0.95) })
	require.Panics(t, func() { stats.PPISampleSize(0.1, 0.5, 1.5, 10, 0.95) })
}

// TestPPISampleSizeOfAContraryJudge: a judge whose verdicts are the
// opposite of people's grades 95% of the time (ρ = −0.9), 10,000 items at a
// true rate of 0.5. The reviews PPISampleSize plans for a width of 0.05 give
// PPIMean intervals that wide on average over 200 draws (it planned 334,
// whose intervals are twice as wide).
func TestPPISampleSizeOfAContraryJudge(t *testing.T) {
	t.Parallel()
	const N, runs, width = 10_000, 200, 0.05
	rng := rand.New(rand.NewPCG(31, 1))
	n := stats.PPISampleSize(width, 0.5, -0.9, N, 0.95)
	pred, y := make([]float64, N), make([]float64, N)
	var sum float64
	for range runs {
		for i := range N {
			y[i] = float64(rng.IntN(2))
			pred[i] = 1 - y[i]
			if rng.Float64() < 0.05 {
				pred[i] = y[i]
			}
		}
		labels := make([]stats.Label, 0, n)
		for _, i := range rng.Perm(N)[:n] {
			labels = append(labels, stats.Label{Index: i, Value: y[i], Prob: float64(n) / N})
		}
		iv := stats.PPIMean(pred, labels, nil, 0.95).Interval
		sum += iv.Hi - iv.Lo
	}
	got := sum / runs
	t.Logf("%d reviews planned: mean width %.4f over %d draws", n, got, runs)
	assert.InDelta(t, width, got, 0.05*width)
}

// TestPPIMeanClustered: 1,000 samples × 5 epochs, where a sample is either
// easy (passes 95% of its epochs) or hard (7.5%), 60% easy, so the true
// rate is 0.6 but the epochs of one sample move together; the same biased
// judge, 250 episodes reviewed. Over 1,000 runs the cluster-robust
// interval holds the truth at the nominal rate (95% of 1,000 is 950, a
// standard deviation of 7); one that takes episodes for independent does
// not.
func TestPPIMeanClustered(t *testing.T) {
	t.Parallel()
	const runs, samples, epochs = 1000, 1000, 5
	rng := rand.New(rand.NewPCG(5, 26))
	n := samples * epochs
	truth, pred := make([]float64, n), make([]float64, n)
	clusters := make([]int, n)
	clustered, independent := 0, 0
	for range runs {
		for s := range samples {
			p := 0.075
			if rng.Float64() < 0.6 {
				p = 0.95
			}
			for e := range epochs {
				i := s*epochs + e
				y := rng.Float64() < p
				f := rng.Float64() < simFPR
				if y {
					f = rng.Float64() < simTPR
				}
				truth[i], pred[i], clusters[i] = b2f(y), b2f(f), s
			}
		}
		labels := designs[0].pick(rng, pred, nil, truth)
		if stats.PPIMean(pred, labels, clusters, 0.95).Interval.Contains(simTruth) {
			clustered++
		}
		if stats.PPIMean(pred, labels, nil, 0.95).Interval.Contains(simTruth) {
			independent++
		}
	}
	t.Logf("cluster-robust covers %d/%d, independent %d/%d", clustered, runs, independent, runs)
	assert.GreaterOrEqual(t, clustered, 929)
	assert.Less(t, independent, 920, "ignoring the clusters should cost coverage")
}
