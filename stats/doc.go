// Package stats holds the statistics behind proctor's reports: confidence
// intervals for pass rates, unbiased pass@k, cluster-robust standard errors,
// a seeded cluster bootstrap, paired comparisons of two runs, power
// planning, multiple-comparison adjustment, agreement measures for judges,
// and confidence sequences for decisions taken while a run goes on.
//
// Every function is pure: it reads its arguments, never retains or
// modifies them, and returns the same result for the same inputs (the
// bootstrap takes an explicit seed, and its result does not depend on
// GOMAXPROCS). Each function's doc comment states its formula and a
// reference. The confidence sequences are the exception: values that
// take observations one at a time.
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
// percentile bootstrap they are built on. [Confusion] counts a judge's
// verdicts against people's grades; [KrippendorffAlpha] measures agreement
// among several reviewers, any of whom may have skipped items.
//
// # People correct the judge
//
// [PPIMean] turns every judge verdict plus a few people's grades, picked at
// random with known inclusion probabilities, into a pass rate whose
// interval is valid however biased the judge is (prediction-powered
// inference), and narrower than the grades alone give
// ([PPIMeanLambda] with λ = 0). [PPISampleSize] says how many grades a
// target width needs.
//
// # Deciding as the data arrive
//
// A fixed-sample interval is valid at one sample size chosen in advance:
// looked at after every observation, and acted on the first time it
// clears a bar, it is wrong far more often than its level says. A
// confidence sequence is valid at all sample sizes at once (time-uniform):
// the chance that it EVER excludes the true mean is at most α, so a run
// may stop as soon as it excludes a bar. This package implements, for the
// mean of observations in [0, 1], the two of I. Waudby-Smith and A.
// Ramdas, "Estimating means of bounded random variables by betting",
// JRSS-B 86(1), 2024 (arXiv:2010.09686):
//
//   - [EmpiricalBernstein]: the predictable plug-in empirical-Bernstein
//     (PrPl-EB) confidence sequence (their Theorem 2, eq. (13)-(15)), in
//     closed form, O(1) per observation;
//   - [Betting]: the hedged-capital betting confidence sequence (their
//     Theorem 3, section 4.3, θ = 1/2, c = 1/2, with the PrPl bets) over a
//     grid of candidate means, O(grid) per observation (about 20 µs at a
//     grid of 1,000), usually tighter;
//   - [BettingTest]: the same capital at one candidate mean, O(1): the
//     sequential test a gate needs ("is the pass rate above 0.7?").
//
// Each reports the running intersection of its intervals, and each takes
// an observation known only to lie in a range (AddRange: an episode that
// errored could have passed or failed), counting it against each bound:
// a range can delay a decision, never bring one about. The tests check
// them against the paper's formulas computed in one batch, and their
// time-uniform coverage by simulation.
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
