package eval

// The oracle pass: an eval's reference solution (Eval.Oracle) run once
// per sample, before the agent, in the environment the agent gets and
// judged by the same judge. A sample whose oracle does not pass is
// broken (its environment or its test, not the agent): the run's report
// leaves its episodes out of every rate and lists it (report.Options
// Broken). Its records are a log of their own beside the run's
// (sidecar.Oracle), so that it resumes as a run does and `proctor report`
// reads it again.

import (
	"context"
	"fmt"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/sidecar"
)

// oracleVersion stands for the harness version in the oracle log's
// manifest: the agent's version changes between runs, the oracle's log
// stays the oracle's.
const oracleVersion = "oracle"

// errOracleDistributed: the oracle pass is Run's; a distributed run
// would need its coordinator to hand out the oracle's work too.
var errOracleDistributed = &ConfigError{"Config.Oracle is not supported by a distributed run (Open, Work) yet: it runs with Run"}

// runOracle runs the oracle over the run's samples and returns the
// broken ones.
func (e *Eval[T, O]) runOracle(ctx context.Context, cfg Config) (map[string]bool, error) {
	if e.Oracle == nil {
		return nil, &ConfigError{"Config.Oracle is set: want an Eval.Oracle, the reference solution to run"}
	}
	o := *e
	o.Harness, o.Oracle, o.Variants = e.Oracle, nil, nil
	o.Versions.Harness = oracleVersion
	oc := cfg
	oc.Oracle, oc.Epochs, oc.RunID, oc.plan, oc.Variants, oc.EliminateVariants = false, 1, "", nil, nil, 0
	oc.Sinks, oc.ReuseFrom, oc.OnProgress = nil, nil, nil
	oc.Report = report.Options{Level: cfg.Report.Level, Resamples: -1}
	if cfg.Log != "" {
		oc.Log = sidecar.Oracle(cfg.Log)
	}
	rep, err := o.Run(ctx, oc)
	if err != nil {
		return nil, fmt.Errorf("eval: the oracle pass: %w", err)
	}
	broken, unknown := report.BrokenSamples(rep)
	if unknown > 0 {
		cfg.Logger.Warn("proctor: the oracle gave no verdict on some samples: whether they are broken is not known", "samples", unknown)
	}
	return broken, nil
}
