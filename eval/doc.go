// Package eval runs evaluations: an [Eval] composes a dataset, a harness and
// a judge; its [Eval.Run] drives bounded, concurrent episodes (one sample ×
// one epoch), streams one record per episode to the durable log and to
// sinks, and returns the standard [report.Report].
//
// The engine does the hard work once, so that harnesses, judges, sandboxes
// and sinks stay small: concurrency, timeouts, retries with backoff, panic
// recovery, error classification, record building, resume and reporting.
//
// # Around the engine
//
// Imports point down, and eval is the only package that knows them all.
// eval/report (the report, its
// aggregator and comparisons) and eval/manifest (what a run is) do not know
// the engine, so the proctor command prints reports without linking it.
// eval/cli makes an eval a command line (cli.Main); eval/evaltest is the
// `go test` gate.
//
// # The engine in parts
//
// Each part has one job and one file, which opens with what the part does:
//
//   - engine.go: a run wires the parts: open and check the log and its
//     manifest, start the recorder, run the scheduler, build the report.
//   - scheduler.go: which episode runs next (an atomic counter over
//     sample × epoch, skipping what the log holds), workers, the one
//     watchdog that enforces timeouts, retries with backoff, and the stops
//     (budget, error rate, cancel). It hands finished episodes to a
//     committer and knows nothing of logs or reports.
//   - attempt.go: one attempt: sandbox, harness, judge; panics and
//     runtime.Goexit become errors; conclude is the one function that
//     decides an attempt's status and error kind.
//   - record.go: what an attempt leaves, and the episode's seed.
//   - recorder.go: the single writer: the log, the transcript store, the
//     sinks, the exactly-once index and the aggregator. Workers encode
//     lines and transcripts in parallel; the recorder only appends, marks
//     and folds.
//   - samples.go, index.go, identity.go: the dataset as the engine holds
//     it (a dataset.Slice where it is, any other dataset streamed), the
//     sample index (ID → position), and the dataset's identity, added up as
//     the run goes.
//   - sandboxes.go: one environment per sample, a fork per attempt
//     (sandbox.Pool does the bookkeeping).
//   - reuse.go, select.go, rejudge.go: results taken from earlier logs
//     (Config.ReuseFrom), the samples a derived run selects (Config.Select,
//     Config.Subset), and judging a log again ([Eval.Rejudge]).
//   - progress.go, progress_print.go: the numbers of a run in flight
//     ([Progress], the tracker) and the line on stderr (the printer).
//   - otel.go: one OpenTelemetry trace per episode and each verdict as an
//     event, through the API only: nothing runs until a provider is set.
//   - shard.go, transcript.go, interrupt.go, manifest.go: shards of a run
//     without a broker, reading a record's transcript, Ctrl-C, and
//     [Versions].
//
// # The halves, for other engines
//
// A run is a scheduler feeding a recorder. work.go gives each half apart
// to package cluster, which carries episodes between machines, through
// internal/distrib: Work is the scheduler without a recorder (a worker
// runs the assignments it is given and returns each finished episode), and
// Open returns a Recording, the recorder fed from outside (a coordinator
// commits what workers send). Package cluster is built from these two and
// nothing else.
//
// # Invariants
//
//   - The log is the truth: a record is committed when its line is whole
//     and decodes; every reader (resume, reports, the viewer) applies that
//     one rule (sink/jsonl).
//   - Exactly once per key: a run's log holds each (sample, epoch) at most
//     once, whatever crashed, retried or resumed; error records are dropped
//     on resume so that their episodes run again.
//   - One writer per log, and a run knows what it is: a lock beside the
//     log, and a manifest that a resume must match (Config.AllowChanged).
//   - Agent failures are data: a panic, a hang or a sandbox fault costs one
//     episode's error record; Run returns an error only when the evaluation
//     cannot go on.
//   - The episode's seed depends only on the run's seed, the sample and the
//     epoch, never on scheduling.
package eval
