// Package stats holds the statistics behind proctor's reports: confidence
// intervals for pass rates, unbiased pass@k, cluster-robust standard errors,
// a seeded cluster bootstrap, paired comparisons of two runs, power
// planning, multiple-comparison adjustment, and agreement measures for
// judges.
//
// Every function is pure: it reads its arguments, never retains or
// modifies them, and returns the same result for the same inputs (the
// bootstrap takes an explicit seed, and its result does not depend on
// GOMAXPROCS). Each function's doc comment states its formula and a
// reference.
//
// # Samples, epochs and clusters
//
// An eval runs each sample for one or more epochs. Epochs of one sample are
// not independent observations: a hard sample tends to fail on every epoch.
// Treating the N = samples × epochs episodes as independent understates the
// standard error of the pass rate. The remedy (Miller, "Adding Error Bars to
// Evals", 2024, arXiv:2411.00640) is to treat each sample as a
// cluster:
//
//   - [ClusteredMean] computes the mean and the cluster-robust standard error
//     from per-cluster totals (sum of scores, number of scored episodes),
//     which is all an incremental aggregator over millions of records needs
//     to keep; [ClusteredSE] is the same formula over raw scores.
//   - [BootstrapClusters] resamples whole clusters for a percentile interval
//     that does not lean on the normal approximation.
//
// For a single 0/1 pass rate over independent trials, use [Wilson] (the
// recommended default) or [ClopperPearson] (exact, conservative). Both return
// an [Interval].
//
// # Comparing two runs
//
// Two runs over the same samples are paired: [Paired] takes per-sample
// scores of a base run a and a head run b and reports Mean = mean(b) −
// mean(a) (positive means the head is better) with a paired t-interval.
// For binary outcomes [McNemar] gives an exact p-value from the discordant
// pairs. [Holm] adjusts a family of p-values (one per breakdown, say) for
// multiple comparisons.
//
// # Planning
//
// [SampleSize] and [MinDetectableEffect] answer "how many samples do I need
// to detect a 3-point regression?" for a paired comparison, from the
// standard deviation of per-sample differences. [EffectiveSD] folds in the
// number of epochs, and [PairedSD] builds that standard deviation from the
// two runs' standard deviations and their correlation.
//
// # pass@k
//
// [PassAtK] is the unbiased estimator of the probability that at least one
// of k attempts passes (Chen et al., 2021); [PassHatK] is the probability
// that all k pass (τ-bench's pass^k, Yao et al., 2024).
//
// # Judges
//
// [CohenKappa] and [Spearman] measure agreement between a judge and human
// labels (or between two judges); [CohenKappaInterval] and
// [SpearmanInterval] add bootstrap intervals, and [Bootstrap] is the generic
// percentile bootstrap they are built on.
//
// # Invalid input
//
// Functions panic on programmer errors: slices of mismatched lengths, a
// level, alpha or power outside (0, 1), negative counts, more successes than
// trials. They return NaN where a quantity is statistically undefined for
// valid input: the mean of nothing, a standard error from a single cluster,
// the correlation of a constant, pass@k with k greater than the number of
// attempts (which happens when some episodes errored and were excluded).
// Intervals over n = 0 trials are the uninformative [0, 1].
//
// # JSON
//
// [Interval] and [Difference] marshal in snake_case, with undefined
// statistics (NaN) and infinities as null, which read back as NaN; [Float]
// gives any other float64 statistic the same form.
package stats
