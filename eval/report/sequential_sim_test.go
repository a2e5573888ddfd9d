package report_test

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/stats"
)

// The sequential gate by simulation: a run of n samples at concurrency c,
// each sample passing with probability rate, claimed in the gate's order
// by c workers; a failing episode takes slow times as long as a passing
// one (each ±50%), and an erroring one (errRate of the failures) as long
// as a failure. Records reach the aggregator in completion order, as they
// reach the engine's recorder; once it decides, no sample is claimed and
// the episodes in flight finish.

type simRun struct {
	decision report.Decision
	samples  int // in claim order, at the decision
	episodes int // run
	saved    float64
	// The decision a sequence fed in completion order would have taken (the
	// order trap), over the same completions.
	naive report.Decision
	wall  float64 // simulated time to the last episode's end, in passing-episode units
}

type inFlight struct {
	at     float64
	sample int
}

type flights []inFlight

func (f flights) Len() int           { return len(f) }
func (f flights) Less(i, j int) bool { return f[i].at < f[j].at }
func (f flights) Swap(i, j int)      { f[i], f[j] = f[j], f[i] }
func (f *flights) Push(x any)        { *f = append(*f, x.(inFlight)) }
func (f *flights) Pop() any {
	old := *f
	x := old[len(old)-1]
	*f = old[:len(old)-1]
	return x
}

type simConfig struct {
	n, concurrency int
	rate, bar      float64
	slow, errRate  float64
	method         string
	// window bounds the claims beyond the finished prefix as the engine
	// does (concurrency + 5%); 0 for none.
	window int
}

func simulate(cfg simConfig, seed uint64) simRun {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	ids := make([]string, cfg.n)
	status := make([]sink.Status, cfg.n)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%05d", i)
		status[i] = sink.Pass
		if r.Float64() >= cfg.rate {
			status[i] = sink.Fail
			if r.Float64() < cfg.errRate {
				status[i] = sink.Error
			}
		}
	}
	seq := &report.Sequential{Bar: cfg.bar, Method: cfg.method, Seed: seed, Epochs: 1, Samples: cfg.n}
	agg := report.NewIndexed(&report.Options{Sequential: seq, Resamples: -1}, cfg.n, func(i int) (string, map[string]string) { return ids[i], nil })
	order := agg.ClaimOrder()
	naive := stats.NewBettingTest(cfg.bar, 2*report.DefaultAlpha)
	res := simRun{naive: report.Undecided}

	var q flights
	now, next := 0.0, 0
	claim := func() {
		i := int(order[next])
		next++
		d := 1.0
		if status[i] != sink.Pass {
			d = cfg.slow
		}
		heap.Push(&q, inFlight{now + d*(0.5+r.Float64()), i})
	}
	open := func() bool {
		if cfg.window == 0 {
			return true
		}
		_, fed := agg.Decided()
		return next < fed+cfg.window
	}
	for next < cfg.n && q.Len() < cfg.concurrency && open() {
		claim()
	}
	for q.Len() > 0 {
		f := heap.Pop(&q).(inFlight)
		now = f.at
		rec := sink.Record{SampleID: ids[f.sample], Status: status[f.sample], CostUSD: 0.01}
		agg.AddAt(f.sample, &rec)
		res.episodes++
		if res.naive == report.Undecided && status[f.sample] != sink.Error {
			naive.Add(map[bool]float64{true: 1}[status[f.sample] == sink.Pass])
			switch {
			case naive.Above():
				res.naive = report.DecidedPass
			case naive.Below():
				res.naive = report.DecidedFail
			}
		}
		for d, _ := agg.Decided(); d == report.Undecided && next < cfg.n && q.Len() < cfg.concurrency && open(); d, _ = agg.Decided() {
			claim()
		}
	}
	res.wall = now
	res.decision, res.samples = agg.Decided()
	res.saved = float64(cfg.n-res.episodes) * 0.01
	return res
}

// wrong reports whether d is a false decision at the true rate.
func wrong(d report.Decision, rate, bar float64) bool {
	return d == report.DecidedPass && rate < bar || d == report.DecidedFail && rate >= bar
}

type simSummary struct {
	runs, wrong, naiveWrong, undecided int
	medianSamples, meanEpisodes        float64
	savedUSD                           float64
}

func summarize(cfg simConfig, runs int, seed0 uint64) simSummary {
	s := simSummary{runs: runs}
	var samples []int
	var episodes int
	for k := range runs {
		res := simulate(cfg, seed0+uint64(k))
		if wrong(res.decision, cfg.rate, cfg.bar) {
			s.wrong++
		}
		if wrong(res.naive, cfg.rate, cfg.bar) {
			s.naiveWrong++
		}
		if res.decision == report.Undecided {
			s.undecided++
		}
		samples = append(samples, res.samples)
		episodes += res.episodes
		s.savedUSD += res.saved
	}
	slices.Sort(samples)
	s.medianSamples = float64(samples[len(samples)/2])
	s.meanEpisodes = float64(episodes) / float64(runs)
	s.savedUSD /= float64(runs)
	return s
}

// TestSequentialGateErrorRateBySimulation is the short version of
// BenchmarkSequentialGate: 2,000 samples, bar 0.7, α = 0.05, failing
// episodes 10× slower than passing ones at concurrency 64, 150 runs at
// true rates just either side of the bar. False decisions stay near or
// under α (the bound tested, 2α, leaves room for the noise of 150 runs;
// the benchmark's 2,000 runs measure it); the same completions fed in the
// order they finish decide wrongly most of the time.
func TestSequentialGateErrorRateBySimulation(t *testing.T) {
	t.Parallel()
	const runs = 150
	for _, rate := range []float64{0.68, 0.72} {
		cfg := simConfig{n: 2000, concurrency: 64, rate: rate, bar: 0.7, slow: 10}
		s := summarize(cfg, runs, 1000)
		t.Logf("rate %.2f: %d wrong, %d undecided of %d runs (completion order: %d wrong); median samples %.0f",
			rate, s.wrong, s.undecided, runs, s.naiveWrong, s.medianSamples)
		if s.wrong > 2*report.DefaultAlpha*runs {
			t.Errorf("rate %.2f: %d false decisions in %d runs", rate, s.wrong, runs)
		}
		if rate < 0.7 && s.naiveWrong < runs/2 {
			t.Errorf("rate %.2f: completion order decided wrongly in only %d of %d runs: the simulation lost its slow failures", rate, s.naiveWrong, runs)
		}
	}
}

// TestSequentialClaimWindowBySimulation: what bounding the claims beyond
// the finished prefix (the engine's claim window, concurrency + 5%) costs
// and saves, 100 runs per case, concurrency 64, failures 10× slower:
// episodes run beyond the decision and simulated time, with and without
// the window. The episodes beyond the decision stay within the window.
func TestSequentialClaimWindowBySimulation(t *testing.T) {
	t.Parallel()
	const runs, c = 100, 64
	width := c + (c+19)/20
	for _, rate := range []float64{0.6, 0.8, 0.9} {
		var beyond, wall [2]float64
		worst := 0
		for k, window := range []int{0, width} {
			cfg := simConfig{n: 2000, concurrency: c, rate: rate, bar: 0.7, slow: 10, window: window}
			for r := range runs {
				res := simulate(cfg, 500+uint64(r))
				b := res.episodes - res.samples
				beyond[k] += float64(b) / runs
				wall[k] += res.wall / runs
				if window > 0 && res.decision != report.Undecided {
					worst = max(worst, b)
				}
			}
		}
		t.Logf("rate %.1f: episodes beyond the decision %.0f → %.0f (worst %d), simulated time %.0f → %.0f (×%.2f)",
			rate, beyond[0], beyond[1], worst, wall[0], wall[1], wall[1]/wall[0])
		if worst > width {
			t.Errorf("rate %.1f: %d episodes beyond the decision, over the window's %d", rate, worst, width)
		}
	}
}

// TestSequentialGateDecidesSoon: the median samples to decide at true
// rates 0.1 either side of the bar, against the targets (300 at
// 0.8, 550 at 0.6), for both sequences.
func TestSequentialGateDecidesSoon(t *testing.T) {
	t.Parallel()
	for _, method := range []string{report.MethodBetting, report.MethodEmpiricalBernstein} {
		for _, tc := range []struct{ rate, most float64 }{{0.8, 300}, {0.6, 550}} {
			cfg := simConfig{n: 2000, concurrency: 64, rate: tc.rate, bar: 0.7, slow: 10, method: method}
			s := summarize(cfg, 60, 7)
			t.Logf("%s at %.1f: median %.0f samples, %.0f episodes run on average", method, tc.rate, s.medianSamples, s.meanEpisodes)
			if s.medianSamples > tc.most {
				t.Errorf("%s at %.1f: median %.0f samples to decide, want at most %.0f", method, tc.rate, s.medianSamples, tc.most)
			}
		}
	}
}

// BenchmarkSequentialGate is the full simulation: 2,000 runs per case, at
// true rates just either side of the bar (the error rate), with failures
// as fast as passes and 10× slower, and at bar ± 0.05, ± 0.1 and ± 0.2
// (what is saved). Each iteration simulates every run; the metrics are
// per run:
//
//	go test ./eval/report -run XXX -bench SequentialGate -benchtime 1x
func BenchmarkSequentialGate(b *testing.B) {
	const runs = 2000
	type tc struct {
		rate, slow float64
	}
	var cases []tc
	for _, rate := range []float64{0.68, 0.72} {
		cases = append(cases, tc{rate, 1}, tc{rate, 10})
	}
	for _, d := range []float64{-0.2, -0.1, -0.05, 0.05, 0.1, 0.2} {
		cases = append(cases, tc{0.7 + d, 10})
	}
	for _, method := range []string{report.MethodBetting, report.MethodEmpiricalBernstein} {
		for _, c := range cases {
			b.Run(fmt.Sprintf("%s/rate=%.2f/slow=%gx", method, c.rate, c.slow), func(b *testing.B) {
				cfg := simConfig{n: 2000, concurrency: 64, rate: c.rate, bar: 0.7, slow: c.slow, method: method}
				var s simSummary
				for range b.N {
					s = summarize(cfg, runs, 1<<20)
				}
				b.ReportMetric(float64(s.wrong)/runs, "false-decisions/run")
				b.ReportMetric(float64(s.undecided)/runs, "undecided/run")
				b.ReportMetric(s.medianSamples, "median-samples")
				b.ReportMetric(1-s.meanEpisodes/float64(cfg.n), "episodes-saved/run")
				b.ReportMetric(s.savedUSD, "usd-saved/run")
				b.ReportMetric(float64(s.naiveWrong)/runs, "completion-order-false/run")
			})
		}
	}
}
