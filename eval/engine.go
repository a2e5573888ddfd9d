package eval

// A run wires the parts: the recorder (log, sinks, exactly-once index,
// report) and the scheduler (workers, attempts, stops) that feeds it.

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"time"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/sidecar"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// runSetup is what a run is given: the eval, its config and samples, and
// for a rejudge the episodes already settled.
type runSetup[T, O any] struct {
	e           *Eval[T, O]
	cfg         Config
	samples     *sampleTable[T]
	parentRunID string
	skip        func(sample, epoch int) bool // episodes that count as done without running
	warnings    []string
	// identity is the dataset's, when computed before the run opens (a
	// coordinator's manifest, a shard's run ID): hashed once.
	identity *manifest.DatasetIdentity
	inputs   *inputDigests // filled by hashDataset when set before
}

// hashDataset returns the dataset's identity, hashing it the first
// time.
func (s *runSetup[T, O]) hashDataset(ctx context.Context) (manifest.DatasetIdentity, error) {
	if s.identity == nil {
		id, err := identityOf(ctx, s.samples, s.inputs)
		if err != nil {
			return id, err
		}
		s.identity = &id
	}
	return *s.identity, nil
}

// execute runs the episodes of setup and returns the report: a run on
// one machine is an open run fed by a scheduler.
func execute[T, O any](ctx context.Context, setup *runSetup[T, O]) (*report.Report, error) {
	modelsURL, stopModels, err := serveModels(&setup.cfg)
	if err != nil {
		return nil, err
	}
	defer stopModels()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	run, err := openRun(ctx, setup, func(err error) { cancel(err) })
	if err != nil {
		return nil, err
	}
	defer run.reuse.close()
	calls, warnings, err := openCallStore(&setup.cfg)
	if err != nil {
		run.rec.close(context.WithoutCancel(ctx))
		return nil, err
	}
	run.warnings = append(run.warnings, warnings...)
	calls.flushOnStop(ctx)
	sc := schedule[T, O]{
		harnesses:   rejudging(run.reuse, setup.e.harnesses(), setup.samples.index, setup.cfg.plan),
		runID:       run.runID,
		parentRunID: setup.parentRunID,
		done:        run.done,
		out:         run.reuse.committer(run.rec, setup.cfg.plan),
		cancel:      cancel,
		ident:       run.ident,
	}
	if run.decided != nil {
		// A resumed log may hold the decision already: learn it before
		// claiming anything.
		<-run.rec.ingested
		sc.order, sc.decided, sc.window, sc.gates = run.agg.ClaimOrder(), run.decided, run.rec.window, run.gates
	}
	if run.elim != nil {
		// Samples in the tests' order, so that the prefix they are fed
		// grows as the run goes; an eliminated variant's episodes of a
		// resumed log are known before claiming.
		<-run.rec.ingested
		sc.order, sc.elim, sc.window = run.elim.order, run.elim, run.rec.window
	}
	tracker := newProgressTracker(run, &setup.cfg)
	prog := newProgressReporter(tracker, &setup.cfg)
	if prog != nil {
		sc.progressClock = &tracker.clock
	}
	s := newScheduler(setup.e, setup.cfg, setup.samples, sc)
	s.modelsURL = modelsURL
	tracker.setRunning(s.running)
	tracker.spent = s.spent
	s.announceAll()
	prog.start()
	s.run(ctx)
	run.cancelled = int(s.cancelled.Load())
	run.budgetHit = s.budgetHit.Load()
	rep, err := run.finish(ctx)
	if cerr := calls.close(rep); cerr != nil && rep != nil {
		rep.Warnings = append(rep.Warnings, "the call store: "+cerr.Error())
	}
	if rep != nil && run.budgetHit {
		rep.Budget = &report.Budget{CostUSD: setup.cfg.MaxCostUSD, Tokens: setup.cfg.MaxTokens, Spent: s.budgetSpent}
	}
	prog.finish()
	if err != nil {
		return rep, err
	}
	if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
		return rep, cause
	}
	return rep, nil
}

// run is an open run: the recorder and its log, the exactly-once index and
// the aggregator, fed by a scheduler on this machine (execute) or by the
// results of other machines (Recording).
type run struct {
	digests   *imageDigests // what the run's sandbox images resolved to
	resources []string      // the manifest's
	evalName  string
	start     time.Time
	total     int64
	owned     int64 // of total, the episodes this run runs (not other shards', not kept by a rejudge)
	done      *doneSet
	agg       *report.Aggregator
	rec       *recorder
	opened    *openedLog
	log       string
	// identity returns the dataset's identity once the run's episodes are
	// done (identity.go): the manifest gets it at the end.
	identity  func(context.Context) (manifest.DatasetIdentity, error)
	ident     *identityTracker // when the identity is added up as the run goes
	runID     string
	warnings  []string
	resumed   int // set by the recorder's goroutine before it stops
	excluded  int
	cancelled int // set by the caller before finish
	budgetHit bool
	// decided is closed, by the recorder's goroutine, when the sequential
	// gate is decided; nil without one.
	decided chan struct{}
	// reuse is the plan of Config.ReuseFrom for the episodes whose output
	// is judged again; nil without one.
	reuse *reuse
	// elim decides which variants stop being run (eliminate.go); nil
	// without Config.EliminateVariants.
	elim *eliminator
	// gates is the sequential gate of each variant (Config.Sequential
	// with variants); nil otherwise.
	gates *variantGates
}

// openRun opens the log (resuming what it holds), marks the episodes that
// count as done and starts the recorder. fail is called when results can
// no longer be recorded.
func openRun[T, O any](ctx context.Context, setup *runSetup[T, O], fail func(error)) (*run, error) {
	cfg, samples := setup.cfg, setup.samples
	n := samples.len()
	r := &run{evalName: setup.e.Name, start: time.Now(), log: cfg.Log, runID: cfg.RunID, warnings: setup.warnings,
		total: int64(n) * int64(cfg.Epochs), digests: &setup.samples.digests, resources: setup.samples.resources}
	r.done = newDoneSet(r.total)
	// The report indexes samples as the engine does, so that folding a
	// record in needs no lookup by ID.
	opts := cfg.Report
	if cfg.Sequential != nil {
		seq := *cfg.Sequential
		// Epochs per variant: with variants, each has its own gate.
		seq.Seed, seq.Epochs, seq.Samples = cfg.Seed, cfg.plan.epochs, n
		opts.Sequential = &seq
	}
	r.agg = report.NewIndexed(&opts, n, func(i int) (string, map[string]string) { return samples.id(i), samples.tagsOf(i) })
	if cfg.Sequential != nil {
		r.decided = make(chan struct{})
		if cfg.plan.named() {
			r.gates = newVariantGates(cfg.plan, r.agg, func() { close(r.decided) })
		} else {
			r.agg.OnDecided(func() { close(r.decided) })
		}
		if err := pinGate(ctx, setup, r.agg.ClaimOrder()); err != nil {
			return nil, err
		}
	}
	r.rec = newRecorder(r.done, cfg.plan, r.agg, fail)
	r.rec.sinks = cfg.Sinks
	if cfg.Sequential != nil {
		r.rec.window = newClaimWindow(cfg.Concurrency)
		if r.gates != nil {
			// As for elimination: a sample's last slot is claimed a block
			// of samples after its first.
			r.rec.gates = r.gates
			r.rec.window.width += int64(variantBlock(cfg.Concurrency)) * int64(cfg.Epochs)
		}
	}

	// Episodes this run does not own count as done: those of other shards,
	// and those a rejudge does not judge again.
	if cfg.Shard.Count > 1 {
		for i := range n {
			if !InShard(samples.id(i), cfg.Shard) {
				r.markSample(i, cfg.Epochs)
			}
		}
		if cfg.RunID == "" {
			id, err := shardRunID(ctx, setup)
			if err != nil {
				return nil, err
			}
			r.runID = id
			setup.cfg.RunID = r.runID
		}
	}
	// The variants this run does not run (Config.Variants) count as done.
	for v, run := range cfg.plan.selected {
		if !run {
			for i := range n {
				for ep := range cfg.plan.epochs {
					r.done.add(int64(i)*int64(cfg.Epochs) + int64(cfg.plan.slot(v, ep)))
				}
			}
		}
	}
	if setup.skip != nil {
		for i := range n {
			for ep := range cfg.Epochs {
				if setup.skip(i, ep) {
					r.done.add(int64(i)*int64(cfg.Epochs) + int64(ep))
				}
			}
		}
	}

	r.owned = r.total - r.done.count()
	var logSize int64
	if cfg.Log != "" {
		l, err := openLog(setup, r.done)
		if err != nil {
			return nil, err
		}
		r.opened = l
		trackIdentity(ctx, r, setup)
		r.rec.log, r.rec.transcripts, logSize = l.w, l.transcripts, l.size
		r.runID = l.runID
		r.warnings = append(r.warnings, l.warnings...)
	}
	if r.runID == "" {
		r.runID = newRunID()
	}
	if cfg.EliminateVariants > 0 {
		var earlier []manifest.Elimination
		if r.opened != nil {
			earlier = r.opened.manifest.Eliminations
		}
		r.elim = newEliminator(&cfg, n, samples.id, earlier)
		r.elim.withGates(r.gates)
		r.rec.elim, r.rec.window = r.elim, newClaimWindow(cfg.Concurrency)
		// Claims go a block of samples (claimAt) past the prefix the tests
		// were fed: a sample's last slot is claimed a block after its first.
		r.rec.window.width += int64(variantBlock(cfg.Concurrency)) * int64(cfg.Epochs)
	}
	var err error
	if r.reuse, err = reuseEarlier(r, setup); err != nil {
		return nil, err
	}

	var ingest func()
	if logSize > 0 {
		ingest = func() {
			var err error
			r.resumed, r.excluded, err = r.rec.ingestLog(cfg.Log, logSize, func(id string) (int, bool) {
				i, ok := samples.index.get(id)
				return i, ok
			})
			if err != nil {
				r.warnings = append(r.warnings, fmt.Sprintf("reading earlier records: %v", err))
			}
		}
	}
	r.rec.start(ingest)
	return r, nil
}

// trackIdentity sets how the run learns its dataset's identity: known
// already (a coordinator's, a shard's), or added up as it goes, the
// samples no worker will run (every epoch done already) hashed in the
// background from now, the rest by the workers that commit them, and any
// left (cancelled, reused) at the end. A streamed dataset is not read a
// third time beside the run: its samples no worker ran are hashed at the
// end, in one more reading, and only if there are any.
func trackIdentity[T, O any](ctx context.Context, r *run, setup *runSetup[T, O]) {
	if setup.identity != nil {
		id := *setup.identity
		r.identity = func(context.Context) (manifest.DatasetIdentity, error) { return id, nil }
		return
	}
	samples, epochs := setup.samples, setup.cfg.Epochs
	r.ident = newIdentityTracker(samples.len())
	notRun := make(chan struct{})
	if samples.streamed() {
		close(notRun)
	} else {
		go func() {
			defer close(notRun)
			hashSamples(ctx, r.ident, samples, func(i int) bool { return r.done.left(i, epochs) == 0 })
		}()
	}
	r.identity = func(ctx context.Context) (manifest.DatasetIdentity, error) {
		<-notRun
		err := hashSamples(ctx, r.ident, samples, func(int) bool { return true })
		return r.ident.sum.Identity(samples.len()), err
	}
}

func (r *run) markSample(i, epochs int) {
	for ep := range epochs {
		r.done.add(int64(i)*int64(epochs) + int64(ep))
	}
}

// finish closes the recorder, completes the manifest and returns the
// report. Cleanup runs even when the run was canceled, with a context
// that is not, so that every sink flushes what it was given.
func (r *run) finish(ctx context.Context) (*report.Report, error) {
	// The report needs what the recorder took, not the log's last fsyncs:
	// it is made while the files are closed.
	r.rec.drain()
	final := make(chan *report.Report, 1)
	go func() { final <- r.agg.Final() }()
	recErr := r.rec.close(context.WithoutCancel(ctx))
	warnings := r.warnings
	if r.opened != nil {
		identity, err := r.identity(context.WithoutCancel(ctx))
		if err != nil {
			// The records are all there; only the manifest keeps the
			// identity it had (a resume adds it up again).
			warnings = append(warnings, fmt.Sprintf("the manifest's dataset identity was not updated: %v", err))
		} else {
			var warning string
			warning, err = r.opened.finishManifest(r.log, identity, r.digests)
			if warning != "" {
				warnings = append(warnings, warning)
			}
			if err == nil && r.elim != nil {
				r.opened.manifest.Eliminations = r.elim.eliminations()
				err = writeManifest(r.log, r.opened.manifest)
			}
			recErr = errors.Join(recErr, err)
		}
	}
	rep := <-final
	rep.Eval, rep.RunID = r.evalName, r.runID
	rep.Resources = r.resources
	if r.opened != nil {
		rep.Resources, rep.ImageDigests = r.opened.manifest.Resources, r.opened.manifest.ImageDigests
		rep.AddVersions(r.opened.manifest)
	}
	rep.StartedAt, rep.Wall = r.start, time.Since(r.start)
	rep.Cancelled = r.cancelled
	rep.Resumed = r.resumed
	rep.Excluded = r.excluded
	rep.BudgetExhausted = r.budgetHit
	if int(r.owned) > rep.Episodes {
		rep.Planned = int(r.owned) // stopped early: how far it got
	}
	eliminations := r.elim.eliminations()
	if rep.Leaderboard != nil {
		// As a report of the log has them from its manifest: an eliminated
		// variant is left out of the gates.
		rep.Leaderboard.AddEliminations(eliminations)
	}
	for _, e := range eliminations {
		// Until the report has a place of its own for them (the manifest
		// holds them: manifest.Eliminations).
		warnings = append(warnings, fmt.Sprintf("variant %s stopped after %d samples: %s is better (α %g over the run's eliminations); %d of its episodes not run",
			e.Variant, e.AfterSamples, e.By, e.Alpha, e.Saved))
	}
	if r.excluded > 0 {
		warnings = append(warnings, fmt.Sprintf("%d records for samples or epochs not in this run: they stay in the log, excluded from the report", r.excluded))
	}
	if r.rec.duplicates > 0 {
		warnings = append(warnings, fmt.Sprintf("%d duplicate results of episodes already recorded were dropped", r.rec.duplicates))
	}
	rep.Warnings = append(warnings, rep.Warnings...)
	if recErr != nil {
		return rep, fmt.Errorf("eval: %w", recErr)
	}
	return rep, nil
}

// openedLog is a log recovered for a run.
type openedLog struct {
	w, transcripts *jsonl.Writer
	size           int64 // committed bytes when the run started
	runID          string
	warnings       []string
	// The manifest as written when the run started, and the dataset
	// identity it holds: the identity of this run's dataset (a hash of
	// every input) is computed while the run goes on, not before.
	manifest   *manifest.Manifest
	oldDataset manifest.DatasetIdentity
}

// finishManifest records the identity of the run's dataset in its
// manifest once known, warning when it differs from the one the log was
// written with.
func (l *openedLog) finishManifest(log string, identity manifest.DatasetIdentity, digests *imageDigests) (warning string, err error) {
	changed, warning := digests.merge(l.manifest)
	if identity == l.oldDataset {
		if changed {
			err = writeManifest(log, l.manifest)
		}
		return warning, err
	}
	// A log written by an older proctor hashed its dataset another way:
	// only its sample count can tell a change then.
	if l.oldDataset.Comparable(identity) || l.oldDataset.Hash != "" && l.oldDataset.Samples != identity.Samples {
		if warning != "" {
			warning += "; "
		}
		warning += fmt.Sprintf("the dataset changed since the log was written (%d samples then, %d now): new samples run, removed ones are excluded from the report", l.oldDataset.Samples, identity.Samples)
	}
	l.manifest.Dataset = identity
	return warning, writeManifest(log, l.manifest)
}

// openLog recovers the log, checks its manifest against this run (writing
// it for a new log) and marks the episodes it holds as done.
func openLog[T, O any](setup *runSetup[T, O], done *doneSet) (*openedLog, error) {
	cfg := setup.cfg
	if err := os.MkdirAll(filepath.Dir(cfg.Log), 0o755); err != nil {
		return nil, fmt.Errorf("eval: the log's directory: %w", err)
	}
	old, err := manifest.Read(cfg.Log)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	m := newManifest(setup)
	var d []string
	if old != nil {
		if d := m.GateDiff(old); len(d) > 0 {
			return nil, &manifest.MismatchError{Log: cfg.Log, Diffs: d, Gate: true}
		}
		d = append(m.Diff(old), variantsDiff(old.Variants, m.Variants)...)
	} else {
		d = recordsDiff(cfg.Log, setup.e.Name, cfg.Seed)
	}
	if len(d) > 0 && !cfg.AllowChanged {
		return nil, &manifest.MismatchError{Log: cfg.Log, Diffs: d}
	}
	epochs := int64(cfg.Epochs)
	// An episode ended at its cap is final unless the caps changed (or
	// the caller asks): run again, it would spend as much again. Any
	// error is final under a sequential gate: running it again would draw
	// it a second time (docs/stopping-early.md).
	keepLimits := !cfg.RetryLimited && (old == nil || old.Budget.Episode() == m.Budget.Episode())
	// So it is when variants are eliminated: the tests see each episode's
	// first draw.
	gated := cfg.Sequential != nil || cfg.EliminateVariants > 0
	plan := cfg.plan
	w, rec, err := jsonl.Open(cfg.Log, &jsonl.OpenOptions{DropErrors: !gated, KeepLimits: keepLimits, ErrorsFinal: gated, Visit: func(variant, id []byte, epoch int) {
		slot, ok := plan.slotOfBytes(variant, epoch)
		if !ok {
			return
		}
		if i, ok := setup.samples.index.getBytes(id); ok {
			done.add(int64(i)*epochs + int64(slot))
		}
	}})
	if err != nil {
		return nil, fmt.Errorf("eval: opening the log: %w", err)
	}
	l := &openedLog{w: w, size: w.Size(), runID: cfg.RunID}
	fail := func(err error) (*openedLog, error) {
		w.Close(context.Background())
		if l.transcripts != nil {
			l.transcripts.Close(context.Background())
		}
		return nil, err
	}
	logged := rec.RunID
	if logged == "" && old != nil {
		logged = old.RunID
	}
	if logged != "" {
		if l.runID != "" && l.runID != logged {
			return fail(&ConfigError{fmt.Sprintf("the log %s holds run %q, not %q: resume with its run ID or use a new log", cfg.Log, logged, l.runID)})
		}
		l.runID = logged
	}
	if l.runID == "" {
		l.runID = newRunID()
	}
	if old == nil && rec.Records > 0 && rec.RunID != "" {
		l.warnings = append(l.warnings, "the log has no manifest (written before manifests existed): adopting it")
	}
	if old != nil {
		m.CreatedAt, m.Dataset = old.CreatedAt, old.Dataset
		m.Variants = mergeVariants(m.Variants, old.Variants)
		m.Eliminations = old.Eliminations
	}
	m.RunID = l.runID
	if old == nil || cfg.AllowChanged || old.Epochs != m.Epochs || !reflect.DeepEqual(old.Budget, m.Budget) || !reflect.DeepEqual(old.Variants, m.Variants) || cfg.Sequential != nil {
		if err := writeManifest(cfg.Log, m); err != nil {
			return fail(err)
		}
	}
	l.manifest, l.oldDataset = m, m.Dataset
	if rec.Torn != nil {
		l.warnings = append(l.warnings, fmt.Sprintf("%v: cut off; those episodes run again", rec.Torn))
		cfg.Logger.Warn("proctor: torn log tail cut", "log", cfg.Log, "line", rec.Torn.Line, "bytes", rec.Torn.Bytes)
	}
	if rec.Dropped > 0 {
		cfg.Logger.Info("proctor: retrying errored episodes from the log", "log", cfg.Log, "episodes", rec.Dropped)
	}
	traces, err := jsonl.Append(transcriptPath(cfg.Log), nil)
	if err != nil {
		return fail(fmt.Errorf("eval: opening the transcript store: %w", err))
	}
	l.transcripts = traces
	if err := traces.SkipTo(rec.TraceEnd); err != nil {
		return fail(fmt.Errorf("eval: opening the trace store: %w", err))
	}
	w.FlushFirst(traces)
	return l, nil
}

// recordsDiff is Manifest.Diff for a log without a manifest (deleted, or
// older than manifests): its first record says which eval wrote it, and
// its episode seed which run seed. Before this check any eval adopted such
// a log, reported its records as its own and wrote its manifest over it.
func recordsDiff(log, name string, seed uint64) []string {
	for r, err := range jsonl.Records(log) {
		if err != nil {
			return nil // no record: Open says what the file is
		}
		var d []string
		if r.Eval != name {
			d = append(d, fmt.Sprintf("eval: %q in the log's records, %q now", r.Eval, name))
		}
		if r.Seed != 0 && r.Seed != episodeSeed(seed, r.SampleID, r.Epoch) {
			d = append(d, fmt.Sprintf("seed: the log's records were made with another run seed than %d", seed))
		}
		return d
	}
	return nil
}

func newManifest[T, O any](setup *runSetup[T, O]) *manifest.Manifest {
	samples := setup.samples
	m := &manifest.Manifest{
		Schema: manifestSchema, Eval: setup.e.Name, CreatedAt: time.Now().UTC(),
		Epochs: setup.cfg.plan.epochs, Variants: setup.cfg.plan.manifestVariants(), Seed: strconv.FormatUint(setup.cfg.Seed, 10),
		Versions: setup.e.Versions, Proctor: proctorVersion(),
		Dataset:   manifest.DatasetIdentity{Samples: samples.len()},
		Resources: samples.resources,
	}
	if c := setup.cfg; c.MaxCostUSD > 0 || c.MaxTokens > 0 || c.MaxEpisodeCostUSD > 0 || c.MaxEpisodeTokens > 0 {
		m.Budget = &manifest.Budget{CostUSD: c.MaxCostUSD, Tokens: c.MaxTokens,
			EpisodeCostUSD: c.MaxEpisodeCostUSD, EpisodeTokens: c.MaxEpisodeTokens}
	}
	if setup.cfg.Shard.Count > 1 {
		m.Shard = setup.cfg.Shard.String()
	}
	m.EliminateVariants = setup.cfg.EliminateVariants
	if setup.cfg.Sequential != nil {
		m.Sequential, _ = json.Marshal(setup.cfg.Sequential) // a struct of numbers and strings
		if setup.identity != nil {
			m.Dataset = *setup.identity // part of what the gate rests on (pinGate)
		}
	}
	return m
}

func identityOf[T any](ctx context.Context, samples *sampleTable[T], inputs *inputDigests) (manifest.DatasetIdentity, error) {
	t := newIdentityTracker(samples.len())
	t.inputs = inputs
	err := hashSamples(ctx, t, samples, func(int) bool { return true })
	return t.sum.Identity(samples.len()), err
}

// transcriptPath is where the transcripts of the run logged at log go: one
// append-only file beside the log, not one file per episode.
func transcriptPath(log string) string { return sidecar.Transcripts(log) }

func newRunID() string {
	var b [4]byte
	crand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}
