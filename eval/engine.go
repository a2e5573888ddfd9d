package eval

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// runner is one execution of Run. Workers (at most Concurrency, plus the
// replacements of abandoned ones) claim episodes from an atomic counter, so
// no goroutine or channel entry exists per pending episode; finished
// episodes go through one channel to a single consumer that writes the
// traces, the log and the sinks, and folds the report.
type runner[T, O any] struct {
	e       *Eval[T, O]
	cfg     Config
	ctx     context.Context
	cancel  context.CancelCauseFunc
	runID   string
	start   time.Time
	samples []dataset.Sample[T]
	index   map[string]int // sample ID → position in samples

	// Episodes the log already holds, by index sample*Epochs + epoch: a
	// bitset, so that resuming a million-record log needs no map of keys.
	done      []uint64
	doneCount int64

	next  atomic.Int64 // the next episode index to claim: sample*Epochs + epoch
	total int64
	wg    sync.WaitGroup

	// Sandboxes: one environment per sample, closed after its last episode.
	envs      []envSlot
	left      []atomic.Int32 // episodes of each sample not yet settled
	sandboxes chan struct{}  // capacity tokens; nil when unbounded

	workersMu sync.Mutex
	workers   []*workerState[T]

	out          chan finished
	log          *jsonl.Writer
	traces       *jsonl.Writer
	logSize      int64 // committed bytes of the log when the run started
	sinks        []sink.Sink
	sinkErr      error
	agg          *report.Aggregator
	warnings     []string
	resumed      int
	parentRunID  string // set when rejudging
	budgetHit    atomic.Bool
	spentNanoUSD atomic.Int64 // cost of the episodes this run finished
	cancelled    atomic.Int64
}

// job is one episode on its way through its attempts.
type job struct {
	sample, epoch, attempt int
	rec                    sink.Record // the outcome of the latest attempt
	events                 []harness.Event

	mu      sync.Mutex
	sb      sandbox.Sandbox // the open sandbox of the attempt in flight
	release func()          // gives back its capacity slot
}

type finished struct {
	sample int // index in runner.samples
	rec    sink.Record
	events []harness.Event
}

// newRunner prepares a run of samples, which index maps by ID to their
// positions (as checkSamples returns them).
func newRunner[T, O any](ctx context.Context, e *Eval[T, O], cfg Config, samples []dataset.Sample[T], index map[string]int) (*runner[T, O], error) {
	r := &runner[T, O]{e: e, cfg: cfg, samples: samples, index: index, start: time.Now(),
		total: int64(len(samples)) * int64(cfg.Epochs)}
	// The report indexes samples as the engine does, so that folding a
	// record in needs no lookup by ID.
	r.agg = report.NewIndexed(&cfg.Report, len(samples), func(i int) (string, map[string]string) { return samples[i].ID, samples[i].Tags })
	r.runID = cfg.RunID
	if cfg.Log != "" {
		if err := r.openLog(); err != nil {
			return nil, err
		}
	}
	if r.runID == "" {
		r.runID = newRunID()
	}
	if r.logSize == 0 {
		// Only resuming needs to find samples by ID; a million-sample run
		// need not keep the map.
		r.index = nil
	}
	r.sinks = cfg.Sinks
	if p := cfg.Sandbox; p != nil {
		r.envs = make([]envSlot, len(samples))
		r.left = make([]atomic.Int32, len(samples))
		for i := range samples {
			for ep := range cfg.Epochs {
				if !r.isDone(int64(i)*int64(cfg.Epochs) + int64(ep)) {
					r.left[i].Add(1)
				}
			}
		}
		if n := p.Capacity(); n > 0 {
			r.sandboxes = make(chan struct{}, n)
		}
	}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	return r, nil
}

// openLog recovers the log and adopts (or checks) the run it holds.
func (r *runner[T, O]) openLog() error {
	if err := os.MkdirAll(filepath.Dir(r.cfg.Log), 0o755); err != nil {
		return fmt.Errorf("eval: the log's directory: %w", err)
	}
	foreign := 0 // records of samples or epochs this run does not have
	w, rec, err := jsonl.Open(r.cfg.Log, &jsonl.OpenOptions{DropErrors: true, Visit: func(id []byte, epoch int) {
		if i, ok := r.index[string(id)]; ok && epoch < r.cfg.Epochs {
			r.markDone(int64(i)*int64(r.cfg.Epochs) + int64(epoch))
		} else {
			foreign++
		}
	}})
	if err != nil {
		return fmt.Errorf("eval: opening the log: %w", err)
	}
	if rec.RunID != "" {
		if r.runID != "" && r.runID != rec.RunID {
			w.Close(context.Background())
			return &ConfigError{fmt.Sprintf("the log %s holds run %q, not %q: resume with its run ID or use a new log", r.cfg.Log, rec.RunID, r.runID)}
		}
		r.runID = rec.RunID
	}
	if rec.Torn != nil {
		msg := fmt.Sprintf("%v: cut off; those episodes run again", rec.Torn)
		r.warnings = append(r.warnings, msg)
		r.cfg.Logger.Warn("proctor: torn log tail cut", "log", r.cfg.Log, "line", rec.Torn.Line, "bytes", rec.Torn.Bytes)
	}
	if rec.Dropped > 0 {
		r.cfg.Logger.Info("proctor: retrying errored episodes from the log", "log", r.cfg.Log, "episodes", rec.Dropped)
	}
	if foreign > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("the log holds %d records of samples or epochs this run does not have: they stay in the log and the report", foreign))
	}
	r.log = w
	r.logSize = w.Size()
	traces, err := jsonl.Append(tracePath(r.cfg.Log), nil)
	if err != nil {
		w.Close(context.Background())
		return fmt.Errorf("eval: opening the trace store: %w", err)
	}
	r.traces = traces
	w.FlushFirst(traces)
	return nil
}

// tracePath is where the transcripts of the run logged at log go: one
// append-only file beside the log, not one file per episode.
func tracePath(log string) string {
	return strings.TrimSuffix(log, filepath.Ext(log)) + ".traces.jsonl"
}

func newRunID() string {
	var b [4]byte
	crand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

func (r *runner[T, O]) run() (*report.Report, error) {
	r.out = make(chan finished, 1024)
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		r.consume()
	}()

	pending := r.total - r.doneCount
	workers := min(int64(r.cfg.Concurrency), max(pending, 0))
	r.wg.Add(int(workers))
	for range workers {
		go r.worker(nil)
	}
	stopWatchdog := make(chan struct{})
	go r.watchdog(stopWatchdog)
	r.wg.Wait()
	close(stopWatchdog)
	close(r.out)
	<-consumed

	// Cleanup runs even when the run was canceled, with a context that is
	// not, so that every sink flushes what it was given.
	cleanup := context.WithoutCancel(r.ctx)
	for i := range r.envs {
		if env := r.envs[i].env; env != nil {
			env.Close()
		}
	}
	errs := []error{r.sinkErr}
	if r.log != nil {
		errs = append(errs, r.log.Close(cleanup), r.traces.Close(cleanup))
	}
	for _, s := range r.sinks {
		errs = append(errs, s.Close(cleanup))
	}
	rep := r.agg.Report()
	rep.Eval, rep.RunID = r.e.Name, r.runID
	rep.StartedAt, rep.Wall = r.start, time.Since(r.start)
	rep.Cancelled = int(r.cancelled.Load())
	rep.Resumed = r.resumed
	rep.BudgetExhausted = r.budgetHit.Load()
	rep.Warnings = append(r.warnings, rep.Warnings...)
	if err := errors.Join(errs...); err != nil {
		return rep, fmt.Errorf("eval: %w", err)
	}
	if cause := context.Cause(r.ctx); cause != nil && r.ctx.Err() != nil {
		return rep, cause
	}
	r.cancel(nil)
	return rep, nil
}

// consume writes each finished episode's trace, record and sinks, and folds
// it into the report. A sink that fails stops the run: results that cannot
// be recorded must not be computed.
func (r *runner[T, O]) consume() {
	if r.log != nil && r.logSize > 0 {
		r.ingestLog()
	}
	ctx := context.WithoutCancel(r.ctx)
	for f := range r.out {
		if r.sinkErr != nil {
			continue // draining: the run is stopping
		}
		if err := r.write(ctx, &f); err != nil {
			r.sinkErr = err
			r.cancel(fmt.Errorf("eval: recording results: %w", err))
			continue
		}
		r.agg.AddAt(f.sample, &f.rec)
		if r.cfg.MaxCostUSD > 0 && r.agg.Usage().CostUSD >= r.cfg.MaxCostUSD {
			r.budgetHit.Store(true)
		}
	}
}

func (r *runner[T, O]) write(ctx context.Context, f *finished) error {
	if r.traces != nil && len(f.events) > 0 {
		line, err := json.Marshal(traceLine{RunID: r.runID, SampleID: f.rec.SampleID, Epoch: f.rec.Epoch, Attempt: f.rec.Attempt, Events: f.events})
		if err != nil {
			return err
		}
		off, err := r.traces.WriteLine(line)
		if err != nil {
			return err
		}
		f.rec.Trace = traceLink(r.traces.Path(), off)
	}
	if r.log != nil {
		if err := r.log.Write(ctx, f.rec); err != nil {
			return err
		}
	}
	for _, s := range r.sinks {
		if err := s.Write(ctx, f.rec); err != nil {
			return err
		}
	}
	return nil
}

// ingestLog folds the records a resumed log already held into the report,
// while new episodes already run.
func (r *runner[T, O]) ingestLog() {
	f, err := os.Open(r.cfg.Log)
	if err != nil {
		r.warnings = append(r.warnings, fmt.Sprintf("reading earlier records: %v", err))
		return
	}
	defer f.Close()
	for rec, err := range jsonl.Read(io.LimitReader(f, r.logSize), r.cfg.Log) {
		if err != nil {
			r.warnings = append(r.warnings, fmt.Sprintf("reading earlier records: %v", err))
			return
		}
		r.agg.Add(&rec)
		r.resumed++
	}
}

func (r *runner[T, O]) markDone(i int64) {
	if r.done == nil {
		r.done = make([]uint64, (r.total+63)/64)
	}
	if r.done[i/64]&(1<<(i%64)) == 0 {
		r.done[i/64] |= 1 << (i % 64)
		r.doneCount++
	}
}

func (r *runner[T, O]) isDone(i int64) bool {
	return r.done != nil && r.done[i/64]&(1<<(i%64)) != 0
}
