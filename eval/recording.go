package eval

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/distrib"
	"github.com/proctor-evals/proctor/sink"
)

// recording is an open run fed with finished episodes from elsewhere: the
// coordinator of a distributed run. It owns what Run's recorder owns — the
// log (the truth: what is committed there is done), its manifest and lock,
// the transcript store, the sinks, the exactly-once index and the report — and
// runs nothing itself.
type recording struct {
	run      *run
	index    *sampleIndex
	samples  int
	id       func(i int) string
	epochs   int
	manifest *manifest.Manifest
	inputs   *inputDigests
	progress *progressTracker
	reporter *progressReporter // nil when nothing shows progress

	mu     sync.Mutex
	err    error // results can no longer be recorded
	closed bool
}

// open opens the run Run would run with cfg — the log, resumed when it
// holds records, checked against its manifest and locked — without running
// anything: Commit feeds it.
func (e *Eval[T, O]) open(ctx context.Context, cfg Config) (*recording, error) {
	if cfg.Oracle {
		return nil, errOracleDistributed
	}
	// A coordinator runs nothing: it streams the dataset (keeps its IDs),
	// unless it narrows it (Subset, Select) or reusing earlier results
	// compares their inputs, as Run.
	narrows := cfg.Subset.PerValue > 0 || cfg.Select != nil || len(cfg.ReuseFrom) > 0
	cfg, samples, err := e.prepare(ctx, cfg, !narrows)
	if err != nil {
		return nil, err
	}
	if samples, err = narrow(ctx, cfg, samples); err != nil {
		return nil, err
	}
	setup := &runSetup[T, O]{e: e, cfg: cfg, samples: samples, inputs: newInputDigests(samples.len())}
	if _, err := setup.hashDataset(ctx); err != nil { // the manifest workers check needs it now
		return nil, err
	}
	r := &recording{index: samples.index, samples: samples.len(), id: samples.id, epochs: cfg.Epochs, inputs: setup.inputs}
	run, err := openRun(ctx, setup, r.fail)
	if err != nil {
		return nil, err
	}
	// Its workers run whole the episodes whose judge alone changed: a
	// coordinator has no harness to wrap with the rejudge plan.
	run.reuse.close()
	run.reuse = nil
	r.run = run
	m := newManifest(setup)
	m.RunID = run.runID
	m.Dataset, _ = setup.hashDataset(ctx)
	m.Sequential = workersGate(setup.cfg.Sequential)
	r.manifest = m
	r.progress = newProgressTracker(run, &cfg)
	r.reporter = newProgressReporter(r.progress, &cfg).start()
	return r, nil
}

// Manifest returns what a run of e with cfg is: its manifest, with the
// dataset's identity (it loads and hashes the dataset). A worker compares
// it with its coordinator's before it runs anything.
func (e *Eval[T, O]) Manifest(ctx context.Context, cfg Config) (*manifest.Manifest, error) {
	cfg, samples, err := e.prepare(ctx, cfg, true)
	if err != nil {
		return nil, err
	}
	m := newManifest(&runSetup[T, O]{e: e, cfg: cfg, samples: samples})
	m.RunID = cfg.RunID
	m.Sequential = workersGate(cfg.Sequential)
	if m.Dataset, err = identityOf(ctx, samples, nil); err != nil {
		return nil, err
	}
	return m, nil
}

func (r *recording) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

// RunID returns the run's ID: the log's when it is resumed.
func (r *recording) RunID() string { return r.run.runID }

// Manifest returns the run's manifest (with its dataset identity), for
// workers to check theirs against.
func (r *recording) Manifest() *manifest.Manifest { return r.manifest }

// Pending returns, per sample in dataset order (in claim order for a
// sequential gate), the epochs without a final record: a snapshot (results
// committed but not yet written count as pending). The slots of a retired
// variant (its gate decided, or eliminated) are not pending: nothing runs
// them any more.
func (r *recording) Pending() []distrib.Assignment {
	var out []distrib.Assignment
	for i := range r.claimOrder() {
		var eps []int
		for ep := range r.epochs {
			if !r.run.done.has(int64(i)*int64(r.epochs)+int64(ep)) && !r.run.gates.outSlot(ep) && !r.run.elim.outSlot(ep) {
				eps = append(eps, ep)
			}
		}
		if len(eps) > 0 {
			out = append(out, distrib.Assignment{SampleID: r.id(i), Epochs: eps})
		}
	}
	return out
}

// Has reports whether the episode has a final record (or belongs to no
// sample of the run, so that nothing should run it).
func (r *recording) Has(sampleID string, epoch int) bool {
	i, ok := r.index.get(sampleID)
	if !ok || epoch < 0 || epoch >= r.epochs {
		return true
	}
	return r.run.done.has(int64(i)*int64(r.epochs) + int64(epoch))
}

// Slot returns the slot of r's episode (distrib.Assignment.Epochs), and
// false when the run has no such variant or epoch.
func (r *recording) Slot(rec *sink.Record) (int, bool) { return r.run.rec.plan.recordSlot(rec) }

// HasSample reports whether the run's dataset has the sample.
func (r *recording) HasSample(sampleID string) bool {
	_, ok := r.index.get(sampleID)
	return ok
}

// CheckInput returns an error unless input is the input of the run's
// sample sampleID, as its record holds it: a coordinator refuses a
// worker's record that claims another input.
func (r *recording) CheckInput(sampleID string, input []byte) error {
	i, ok := r.index.get(sampleID)
	if !ok {
		return fmt.Errorf("eval: a result for sample %q, which this run does not have", sampleID)
	}
	if r.inputs.of(input) != r.inputs.digests[i] {
		return fmt.Errorf("eval: the result of sample %q holds another input than the sample's", sampleID)
	}
	return nil
}

// Commit records a finished episode, once: a result for an episode that
// already has its record is dropped (and counted in the report's
// warnings). It is safe for concurrent use. It returns an error for an
// episode the run does not have, or once results can no longer be
// recorded (a failing log or sink).
func (r *recording) Commit(f distrib.Finished) error {
	r.mu.Lock()
	err, closed := r.err, r.closed
	r.mu.Unlock()
	switch {
	case err != nil:
		return err
	case closed:
		return errors.New("eval: commit on a closed Recording")
	}
	i, ok := r.index.get(f.Record.SampleID)
	slot, known := r.run.rec.plan.recordSlot(&f.Record)
	if !ok || !known {
		return fmt.Errorf("eval: a result for sample %q%s epoch %d, which this run does not have", f.Record.SampleID, variantOf(f.Record.Variant), f.Record.Epoch)
	}
	rec := f.Record
	rec.RunID = r.run.runID
	fin := getFinished()
	fin.sample, fin.slot, fin.rec, fin.events = i, slot, rec, f.Transcript
	r.run.rec.commit(fin)
	return nil
}

// Complete is closed once every episode of the run has its final record.
func (r *recording) Complete() <-chan struct{} { return r.run.rec.complete }

// Stats returns the counts so far.
func (r *recording) Stats() distrib.Stats {
	c := &r.run.rec.committed
	return distrib.Stats{
		Done: r.run.done.count(), Total: r.run.total,
		Records: c.records.Load(), Errors: c.errors.Load(),
		CostUSD: float64(c.costNanoUSD.Load()) / 1e9, Tokens: c.tokens.Load(),
	}
}

// SetStopped records in the report why the run stopped early: episodes
// that were in flight elsewhere when it stopped (they run on resume), and
// whether the budget was spent.
func (r *recording) SetStopped(cancelled int, budgetExhausted bool) {
	r.run.cancelled, r.run.budgetHit = cancelled, budgetExhausted
}

// Close writes what was committed, closes the log, the transcript store and the
// sinks, and returns the report of the run. No Commit may run concurrently
// with Close, or after it.
func (r *recording) Close(ctx context.Context) (*report.Report, error) {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	rep, err := r.run.finish(ctx)
	r.reporter.finish()
	return rep, err
}

// Progress returns a snapshot of the run's progress. Running and Longest
// are what the function given to SetRunning says (none before).
func (r *recording) Progress() Progress { return r.progress.snapshot(time.Now(), false) }

// SetRunning gives the Recording what is in flight elsewhere (on the
// workers of a distributed run), for Progress and the progress line: the
// count, and the longest-running episodes, longest first. It is called
// for every snapshot, from one goroutine at a time.
func (r *recording) SetRunning(running func() (int, []distrib.RunningEpisode)) {
	r.progress.setRunning(func() (int, []RunningEpisode) {
		n, longest := running()
		out := make([]RunningEpisode, len(longest))
		for i, ep := range longest {
			out[i] = RunningEpisode(ep)
		}
		return n, out
	})
}
