package judge

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/stats"
)

// Labelled is one item of a golden set: a sample, an output, and the
// verdict a human gave it (Pass, and Score for graded judges).
type Labelled[T, O any] struct {
	Sample dataset.Sample[T]
	Output O
	Human  Verdict
}

// CalibrateConfig tunes [Calibrate]. The zero value is valid.
type CalibrateConfig struct {
	Level       float64 // confidence level of the intervals; default 0.95
	Resamples   int     // bootstrap resamples for the kappa and Spearman intervals; default 1000, negative for none
	Seed        uint64  // of the bootstrap and of the episodes' seeds
	Concurrency int     // judge calls in flight; default 8
}

// Confusion counts the judge's verdicts against the human's.
type Confusion = stats.Confusion

// Calibration is how well a judge agrees with human labels.
type Calibration struct {
	N        int // golden items
	Unscored int // items the judge could not score; excluded below
	Scored   int // N − Unscored

	Agreement   float64        // share of scored items where judge and human agree on pass/fail
	AgreementCI stats.Interval // Wilson interval
	Kappa       float64        // Cohen's kappa on pass/fail: agreement beyond chance
	KappaCI     stats.Interval // percentile bootstrap; zero when Resamples < 0
	Spearman    float64        // rank correlation of judge and human scores; NaN when either is constant
	SpearmanCI  stats.Interval // percentile bootstrap; zero when Resamples < 0
	Confusion   Confusion
}

func (c *Calibration) String() string {
	return fmt.Sprintf("calibration: %d items (%d unscored): agreement %.3f [%.3f, %.3f], kappa %.3f [%.3f, %.3f], spearman %.3f; "+
		"both pass %d, false pass %d, false fail %d, both fail %d",
		c.N, c.Unscored, c.Agreement, c.AgreementCI.Lo, c.AgreementCI.Hi, c.Kappa, c.KappaCI.Lo, c.KappaCI.Hi, c.Spearman,
		c.Confusion.BothPass, c.Confusion.FalsePass, c.Confusion.FalseFail, c.Confusion.BothFail)
}

// Calibrate runs j over a golden set of human-labelled outputs and reports
// how well it agrees with the humans: pass/fail agreement with a Wilson
// interval, Cohen's kappa (agreement corrected for chance: a judge that
// passes everything on a set that is 90% passes agrees 90% of the time
// and has kappa 0), the Spearman correlation of judge and human scores
// (for graded judges), with bootstrap intervals, and the confusion counts.
//
// Each item is judged in a fresh episode (RunID "calibration", the item's
// sample, a seed derived from cfg.Seed and the sample ID); events the judge
// records are dropped. Items the judge leaves unscored are counted and
// excluded; a judge error ends the calibration with that error, since
// statistics over the rest would be biased.
func Calibrate[T, O any](ctx context.Context, j Judge[T, O], golden []Labelled[T, O], cfg CalibrateConfig) (*Calibration, error) {
	if cfg.Level == 0 {
		cfg.Level = 0.95
	}
	if cfg.Resamples == 0 {
		cfg.Resamples = 1000
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if len(golden) == 0 {
		return nil, errors.New("judge: calibrate: empty golden set")
	}
	type result struct {
		v   Verdict
		err error
	}
	results := make([]result, len(golden))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range golden {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			results[i].err = ctx.Err()
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			g := &golden[i]
			h := fnv.New64a()
			h.Write([]byte(g.Sample.ID))
			ep := &harness.Episode[T]{RunID: "calibration", Sample: g.Sample, Seed: splitmix(h.Sum64() ^ cfg.Seed)}
			results[i].v, results[i].err = j.Judge(ctx, ep, g.Output)
			if results[i].err != nil && !errors.Is(results[i].err, ErrUnscored) {
				cancel()
			}
		})
	}
	wg.Wait()
	c := &Calibration{N: len(golden)}
	var jl, hl []int
	var js, hs []float64
	for i, r := range results {
		if r.err != nil {
			if errors.Is(r.err, ErrUnscored) {
				c.Unscored++
				continue
			}
			return nil, fmt.Errorf("judge: calibrate: item %d (%s): %w", i, golden[i].Sample.ID, r.err)
		}
		human := golden[i].Human
		c.Confusion.Add(r.v.Pass, human.Pass)
		jl, hl = append(jl, b2i(r.v.Pass)), append(hl, b2i(human.Pass))
		js, hs = append(js, r.v.Score), append(hs, human.Score)
	}
	c.Scored = len(jl)
	agree := c.Confusion.BothPass + c.Confusion.BothFail
	if c.Scored > 0 {
		c.Agreement = float64(agree) / float64(c.Scored)
	}
	c.AgreementCI = stats.Wilson(agree, c.Scored, cfg.Level)
	c.Kappa = stats.CohenKappa(jl, hl)
	c.Spearman = stats.Spearman(js, hs)
	if cfg.Resamples > 0 && c.Scored > 0 {
		c.KappaCI = stats.CohenKappaInterval(jl, hl, cfg.Resamples, cfg.Level, cfg.Seed)
		c.SpearmanCI = stats.SpearmanInterval(js, hs, cfg.Resamples, cfg.Level, cfg.Seed)
	}
	return c, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
