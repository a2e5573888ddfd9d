// Package cluster runs one eval across machines: one log, one report. A
// coordinator (the recorder: the log is the truth) queues the episodes its
// log lacks on NATS JetStream; workers on other machines pull them, run
// them with eval's scheduler and sandbox pool, and publish their results
// in batches (the results that finish while the previous batch is stored
// share one message, and one fsync); the coordinator commits, in the
// stream's order, the first result of each episode its log lacks, and
// reconciles: episodes neither logged nor queued are queued again.
// Workers that die, pause, or lose the server cost a redelivery, never a
// second record.
//
// Workers are trusted with their part only: on the embedded server they
// hold a role that cannot control the run or read others' work, each
// episode's work carries a tag its result must return, and the
// coordinator checks every record it commits (eval, input, ranges).
// docs/distributed.md is the operator's guide.
//
// [Main] gives the user's binary four commands: run (one machine, as
// cli.Main), coordinate, work and gc. [Coordinate], [Work] and [GC] are
// the library functions behind them. Package eval never imports this one:
// importing eval links no NATS.
package cluster
