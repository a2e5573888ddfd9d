// Package proctor is a Go SDK for evaluating AI agents at scale. This
// package holds only documentation: the code lives in the packages below.
//
// # The idea
//
// Every evaluation is one standard value, an [eval.Eval]: a dataset of
// samples, the harness that runs the agent on a sample, and the judge that
// decides whether its output is right. Its Run drives bounded, concurrent
// episodes (one sample × one epoch), each in its own sandbox if the eval
// needs one, streams one record per episode to a crash-safe JSONL log and to
// other sinks, and returns a standard report: pass rate with a confidence
// interval that accounts for repeated epochs, pass@k, breakdowns by tag,
// latency, tokens and cost, and the failures with links to their
// transcripts. Kill a run at any moment and run it again with the same log:
// only the missing episodes run, and every episode is recorded once.
//
// # The flow
//
//	dataset ──► episode (sample, epoch, seed) ──► sandbox ──► harness ──► judge ──► record ──► sinks
//	                                                                                   └──────► report
//
// # The packages
//
//   - dataset: Sample, Dataset, Slice, JSONL and CSV loaders, transforms;
//     dataset/parquetdataset (Parquet files), dataset/otlp (OpenTelemetry
//     traces as a dataset of recorded operations), dataset/recorded (their
//     element type).
//   - harness: Episode (with its transcript and usage recorder), Harness,
//     Func, Command (an agent CLI run in the sandbox); harness/replay
//     (recorded production traffic judged again, by time window).
//   - judge: Verdict, Judge, Func, Unscored; combinators (All, Any,
//     Weighted, Cascade, Subsample, Vote); model-graded Rubric judges over a
//     small Model interface, with judge/openai and judge/anthropic clients;
//     Calibrate against human labels.
//   - scorer: deterministic judges: Exact, Normalized, Contains, Regex,
//     Numeric, JSON, ExitCode.
//   - sandbox: Provider, Environment, Sandbox over the driver interfaces of
//     sandbox/driver; sandbox/local (overlayfs forks, the embedded default),
//     sandbox/docker, sandbox/kubernetes (a module of its own, over
//     client-go: a pod per environment and per fork); sandbox/sandboxtest
//     (the conformance suite and an in-memory fake).
//   - stats: Wilson and Clopper–Pearson intervals, clustered standard
//     errors, cluster bootstrap, pass@k, paired comparison, McNemar, sample
//     size, Holm, confidence sequences, prediction-powered means, kappa and
//     Krippendorff's alpha.
//   - review: human review: the queue (Pick, with inclusion
//     probabilities), append-only review files, CSV/JSONL exchange,
//     Summarize (agreement, the prediction-powered pass rate).
//   - sink: Record (the standard row), Sink, Multi; sink/jsonl (the durable
//     log), sink/parquetsink, sink/sinktest (the conformance suite).
//   - eval: Eval, Config, Run, Rejudge, ReadTranscript; eval/cli (an eval
//     as a command line); eval/report: Report, FromRecords, Aggregator,
//     Compare (the analysis half, without the engine); eval/report/ci
//     (JUnit, GitHub annotations, a pull-request comment); eval/manifest (what
//     a run is); eval/evaltest: the `go test` gate.
//   - harbor: Harbor tasks (task.toml, a Dockerfile, tests/test.sh, a
//     solution) as a dataset, their verifier as a judge that fails closed
//     and their solution as a harness; harness/atif: ATIF trajectories into
//     a transcript and out of one.
//   - cluster: one run across machines over NATS JetStream (a coordinator
//     and its workers, one log).
//   - telemetry: OpenTelemetry SDK wiring (OTLP/HTTP) for Config's tracer
//     and logger providers.
//   - view: the web viewer and the HTML report.
//   - history: a run's summary row, baselines, fingerprint changes, drift
//     alerts; history/catalog: the Parquet catalog of runs.
//   - cmd/proctor: report, compare, export, merge, review, trace, view,
//     history, compact and version from the command line.
//
// # A first eval
//
//	e := &eval.Eval[Q, string]{
//		Name:    "capitals",
//		Dataset: dataset.JSONL[Q]{Path: "capitals.jsonl"},
//		Harness: harness.Func[Q, string](myAgent),
//		Judge:   scorer.Normalized(func(q Q) string { return q.Answer }),
//	}
//	report, err := e.Run(ctx, eval.Config{Epochs: 3, Log: "runs/capitals.jsonl"})
//
// and, in a test, the gate on the lower confidence bound:
//
//	evaltest.Run(t, e, eval.Config{Epochs: 3}, evaltest.Gate{MinLowerBound: 0.85})
//
// See examples/quickstart for a complete program with no network and no key,
// examples/coding for a SWE-bench-style eval in sandboxes,
// examples/llmjudge for a model-graded judge, examples/online for
// production traces judged by the hour, examples/distributed for one run
// across machines and examples/loadtest for the engine's own overhead.
package proctor
