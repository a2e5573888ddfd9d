// Package distrib holds the engine's two halves a distributed run is built
// of (package cluster): a worker runs episodes and records nothing (Work);
// a coordinator records the results of workers (Open, Recording). It is
// internal so that package eval's documentation shows a user only what a
// user calls. Package eval sets Open and Work when it is loaded, as
// package harness sets internal/judging's functions: an init-time hook,
// because the methods behind them are on the generic eval.Eval.
package distrib

import (
	"context"
	"time"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sink"
)

// Open opens the run e.Run(ctx, cfg) would run, without running anything:
// the Recording's Commit feeds it. e is an *eval.Eval of any types and
// cfg an eval.Config.
var Open func(e any, ctx context.Context, cfg any) (Recording, error)

// Work runs the episodes of the assignments it receives on this machine,
// with Run's scheduler, and gives each finished episode to done, from
// many goroutines at once; it records nothing itself. e is an *eval.Eval
// of any types and cfg an eval.Config. With spend, the run's budgets
// (cfg.MaxTokens, cfg.MaxCostUSD, which are then the run's, not this
// worker's) hold on the model gateway's wire against what every worker
// spent. See eval's work.go for the rules.
var Work func(e any, ctx context.Context, cfg any, spend RunSpend, assignments <-chan Assignment, done func(Finished)) error

// RunSpend is a distributed run's spend, shared by its workers (package
// cluster keeps it in the run's key-value bucket). Its methods are called
// concurrently, on the path of every model call: they must not block.
type RunSpend interface {
	// Add counts what this worker spent, in tokens and nano-dollars. A
	// negative figure takes back what was counted ahead: a model call of
	// an attempt in flight counts as it ends, and is taken back just
	// before the attempt's whole usage counts.
	Add(tokens, nanoUSD int64)
	// Spent is what the run spent on all its workers, this one's Adds
	// included.
	Spent() (tokens, nanoUSD int64)
}

// Assignment is work for a worker: epochs of one sample, run on one
// machine so that the sample's sandbox environment is provisioned once.
// With the eval's variants, Epochs are the sample's slots, variant ×
// epochs + epoch, the variant numbered by its place in eval.Eval.Variants
// (so every process of the run numbers them alike); without, slots are
// epochs.
type Assignment struct {
	SampleID string `json:"sample_id"`
	Epochs   []int  `json:"epochs"`
	// Refused, when set, is called instead of ending Work when this
	// worker cannot run the assignment (a sample its dataset lacks, an
	// epoch out of range): Work goes on with the next.
	Refused func(error) `json:"-"`
}

// Finished is an episode with its final record and its transcript (nil
// when the harness recorded none).
type Finished struct {
	Record     sink.Record
	Transcript []harness.Event
	// Slot is the episode's slot (Assignment.Epochs): its epoch without
	// variants. Set by Work; a Recording finds it from the record (Slot).
	Slot int
}

// RunningEpisode is an episode in flight on a worker: eval.RunningEpisode,
// which a coordinator's progress shows.
type RunningEpisode struct {
	SampleID       string
	Variant        string
	Epoch, Attempt int
	Elapsed        time.Duration
}

// Stats count a Recording's episodes. Records, Errors, CostUSD and Tokens
// are of the records committed since Open (not those a resumed log held).
type Stats struct {
	Done, Total     int64
	Records, Errors int64
	CostUSD         float64
	Tokens          int64 // input and output
}

// Recording is an open run fed with finished episodes from elsewhere: the
// coordinator of a distributed run. It owns what Run's recorder owns (the
// log, its manifest and lock, the transcript store, the sinks, the
// exactly-once index and the report) and runs nothing itself. Its methods
// are documented on eval's recording.
type Recording interface {
	RunID() string
	Manifest() *manifest.Manifest
	Pending() []Assignment
	Has(sampleID string, slot int) bool
	// Slot returns the slot of a record's episode (Assignment.Epochs), and
	// false when the run has no such variant or epoch.
	Slot(r *sink.Record) (int, bool)
	HasSample(sampleID string) bool
	CheckInput(sampleID string, input []byte) error
	Commit(f Finished) error
	Complete() <-chan struct{}
	Decided() <-chan struct{}
	// Retired returns the variants whose sequential gate decided or
	// which were eliminated: their episodes are no longer run.
	Retired() []string
	Stats() Stats
	SetStopped(cancelled int, budgetExhausted bool)
	// SetRunning gives the Recording what is in flight on the workers,
	// for its progress: the count, and the longest-running episodes,
	// longest first.
	SetRunning(running func() (int, []RunningEpisode))
	Close(ctx context.Context) (*report.Report, error)
}
