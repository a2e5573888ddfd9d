package eval

// One attempt of an episode: its sandbox, the harness and the judge, and
// the one function that decides the attempt's status and error kind.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/jsondepth"
	"github.com/proctor-evals/proctor/internal/judging"
	"github.com/proctor-evals/proctor/internal/permanent"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sink"
)

// attempt runs one attempt of j and stores its outcome in j.rec(). It returns
// false when the attempt was abandoned (its harness or judge ignored the
// expiry of its context, or called runtime.Goexit): then another goroutine
// has taken over j.
func (s *scheduler[T, O]) attempt(runCtx, base context.Context, w *workerState[T], j *job, smp *dataset.Sample[T]) bool {
	ctx, ep, k, start, phase := s.begin(runCtx, base, w, j, smp)
	if ctx == nil {
		return true // the sandbox could not be had: concluded already
	}
	res := &outcome[O]{}
	returned := false
	defer func() {
		if !returned { // runtime.Goexit in the harness or the judge
			res.fault, res.err = sink.KindPanic, fmt.Errorf("%s called runtime.Goexit (t.FailNow or t.SkipNow from a harness or judge?)", res.stage)
			if s.finish(w, phase, j, ep, start, res) {
				go s.worker(runCtx, j) // this goroutine is ending: hand over j and its place
			}
		}
	}()
	s.call(ctx, k, ep, j, res)
	returned = true
	return s.finish(w, phase, j, ep, start, res)
}

// begin readies an attempt: its episode, sandbox and context, published
// to the watchdog as running. A nil ctx means the attempt ended before it
// ran (no sandbox). It is out of line so that its temporaries are not on
// the stack of every worker while its harness waits: thousands of
// workers each hold attempt's frame, not begin's.
//
//go:noinline
func (s *scheduler[T, O]) begin(runCtx, base context.Context, w *workerState[T], j *job, smp *dataset.Sample[T]) (ctx context.Context, ep *harness.Episode[T], k *kept, start time.Time, phase uint64) {
	// j.epoch is the slot: the variant's epoch. Its seed is the epoch's,
	// whatever the variant: variants are compared on the same draws.
	v := s.variantIndex(j.epoch)
	epoch := j.epoch - v*s.plan.epochs
	a := &attemptState[T]{ep: harness.Episode[T]{RunID: s.runID, Sample: *smp, Variant: s.plan.names[v], Epoch: epoch, Attempt: j.attempt,
		Seed: episodeSeed(s.cfg.Seed, smp.ID, epoch)}}
	ep = &a.ep
	// Read before the attempt is published: once it runs, the watchdog may
	// abandon it and drop j.kept while the abandoned call still reads it.
	k = j.kept
	j.notRun = false
	sbCtx := runCtx
	if s.tel.tracer != nil {
		sbCtx, base = s.startAttempt(runCtx, base, j, ep, k == nil && s.cfg.Sandbox != nil)
	}
	if k != nil {
		ep.Sandbox = k.sb // the judge sees the world the harness left
	} else if s.cfg.Sandbox != nil {
		opened := time.Now()
		sb, kind, err := s.openSandbox(sbCtx, j, smp)
		if err != nil {
			s.conclude(j, ep, opened, &outcome[O]{fault: kind, err: err})
			j.notRun = true
			return nil, nil, nil, time.Time{}, 0
		}
		ep.Sandbox = sb
	}
	start = s.now()
	a.ctx.base = base
	w.cur, w.ep, w.start, w.ctx = j, ep, start, &a.ctx
	if s.capped() {
		w.capped.Store(&cappedAttempt[T]{ep: ep, earlier: j.usage, cancel: a.ctx.cancel})
	}
	if s.cfg.Models != nil && ep.Sandbox != nil {
		s.openModels(&a.ctx, j, ep, a.ctx.cancel)
	}
	if s.cfg.Timeout > 0 {
		a.ctx.deadline = start.Add(s.cfg.Timeout)
		w.deadline.Store(a.ctx.deadline.UnixNano())
	}
	ctx = &a.ctx
	phase = (w.phase.Load()>>2+1)<<2 | running
	w.phase.Store(phase)
	return ctx, ep, k, start, phase
}

// attemptState is an attempt's episode and context, allocated together:
// one allocation an attempt less.
type attemptState[T any] struct {
	ep  harness.Episode[T]
	ctx attemptCtx
}

// unreadable ends an attempt whose sample a streamed dataset failed to
// yield again: the run stops, and the episode runs on resume.
func (s *scheduler[T, O]) unreadable(j *job, err error) {
	ep := &harness.Episode[T]{RunID: s.runID, Sample: dataset.Sample[T]{ID: s.samples.id(j.sample)}, Variant: s.plan.name(j.epoch), Epoch: s.plan.epoch(j.epoch), Attempt: j.attempt}
	s.conclude(j, ep, s.now(), &outcome[O]{fault: sink.KindCancelled, err: err})
}

// finish ends an attempt that returned: it reports false when the watchdog
// abandoned it first (and owns j since).
func (s *scheduler[T, O]) finish(w *workerState[T], phase uint64, j *job, ep *harness.Episode[T], start time.Time, res *outcome[O]) bool {
	if !w.phase.CompareAndSwap(phase, phase&^3|returned) {
		return false
	}
	if s.cfg.Timeout > 0 {
		w.deadline.Store(0) // set by begin only then
	}
	if s.capped() {
		w.capped.Store(nil) // likewise: an atomic store an attempt less without caps
	}
	w.ctx.cancel(nil)
	if res.fault == sink.KindJudge && res.haveOut && !permanent.Is(res.err) {
		// Keep the output, and the sandbox the judge needs, for a retry
		// that judges again without running the agent again.
		j.mu.Lock()
		j.kept = &kept{out: res.out, sb: j.sb}
		j.sb = nil
		j.mu.Unlock()
	} else {
		j.dropKept()
	}
	j.freeSandbox()
	if res.haveOut {
		// Here, not in conclude: encoding/json needs a deep stack, and
		// thousands of workers each grow theirs to the deepest call.
		res.outJSON = s.encodeOutput(j, &res.out)
	}
	s.conclude(j, ep, start, res)
	return true
}

// outcome is what the harness and the judge returned for an attempt.
type outcome[O any] struct {
	stage   string     // "harness" or "judge": where it ended
	span    trace.Span // the stage's, while it runs (when traced)
	out     O
	haveOut bool            // the harness returned out
	outJSON json.RawMessage // out, encoded for the record
	v       judge.Verdict
	fault   sink.ErrorKind
	err     error
}

// call runs the harness (unless an earlier attempt's output is kept) and
// the judge for one attempt, turning a panic into an error of kind panic.
// An episode over a per-episode cap once the harness returns is not
// judged: it ends as an error of kind limit.
func (s *scheduler[T, O]) call(ctx context.Context, k *kept, ep *harness.Episode[T], j *job, res *outcome[O]) {
	res.stage = "harness"
	defer func() {
		if p := recover(); p != nil {
			res.fault, res.err = sink.KindPanic, fmt.Errorf("%s panicked: %v\n%s", res.stage, p, debug.Stack())
		}
		if res.span != nil { // a panic, or runtime.Goexit
			err := res.err
			if err == nil {
				err = fmt.Errorf("%s called runtime.Goexit", res.stage)
			}
			endStage(res.span, sink.KindPanic, err)
		}
	}()
	if k != nil {
		res.out, res.haveOut = k.out.(O), true
	} else {
		hctx, span := s.startStage(ctx, "harness")
		res.span = span
		out, err := s.harnesses[s.variantIndex(j.epoch)].Run(hctx, ep)
		res.span = nil
		capErr := s.overCap(ep, j)
		if capErr == nil && s.cfg.Models != nil {
			capErr = s.stoppedByModels(ctx, ep, j)
		}
		if capErr != nil {
			// Stopped at its cap by the watchdog, or past it on return.
			res.fault, res.err = sink.KindLimit, capErr
			endStage(span, res.fault, capErr)
			return
		}
		if oom := oomKilled(ep.Sandbox); oom != nil {
			// Whatever the harness made of it (a fail, an exit code in
			// its output), the sandbox's memory limit ended the agent's
			// command: infrastructure, retried.
			err = oom
		}
		if err != nil {
			res.fault, res.err = s.classify(ctx, err, sink.KindHarness), err
			endStage(span, res.fault, err)
			return
		}
		endStage(span, "", nil)
		res.out, res.haveOut = out, true
	}
	judging.Start(ep)
	res.stage = "judge"
	jctx, span := s.startStage(ctx, "judge")
	res.span = span
	v, err := s.e.Judge.Judge(jctx, ep, res.out)
	res.span = nil
	if v.Pass && v.Score == 0 {
		v.Score = 1 // a judge that only says pass
	}
	res.v = v
	if oom := oomKilled(ep.Sandbox); oom != nil {
		err = oom // a verifier killed for memory gave no verdict
	}
	switch {
	case err != nil:
		res.fault, res.err = s.classify(ctx, err, sink.KindJudge), err
	case !(v.Score >= 0 && v.Score <= 1):
		res.fault, res.err = sink.KindJudge, fmt.Errorf("judge returned score %v, want a number in [0,1]", v.Score)
	}
	if res.err != nil && !errors.Is(res.err, judge.ErrUnscored) {
		endStage(span, res.fault, res.err)
	} else {
		endStage(span, "", nil)
	}
	capErr := s.overCap(ep, j)
	if capErr == nil && s.cfg.Models != nil {
		capErr = s.stoppedByModels(ctx, ep, j)
	}
	if capErr != nil {
		res.fault, res.err = sink.KindLimit, capErr
	}
}

func (s *scheduler[T, O]) classify(ctx context.Context, err error, def sink.ErrorKind) sink.ErrorKind {
	if ctx.Err() != nil {
		if context.Cause(ctx) == errTimeout {
			return sink.KindTimeout
		}
		return sink.KindCancelled
	}
	if errors.Is(err, sandbox.ErrUnavailable) {
		return sink.KindSandbox
	}
	return def
}

// conclude decides an attempt's status and error kind — the one place
// that does — and stores its record in j. It is kept out of attempt (and
// out of line) so that its temporaries are not on the stack of every
// worker while its harness waits: with thousands of workers, a smaller
// frame lets goroutines start with the smallest stack.
//
//go:noinline
func (s *scheduler[T, O]) conclude(j *job, ep *harness.Episode[T], start time.Time, res *outcome[O]) {
	if j.models != nil {
		j.closeModels(&s.live)
	}
	// An input or output nested deeper than a record holds would be a
	// record no reader takes back (or, with sink's fallback, not the value
	// judged): the episode is an error, as it would be on every attempt.
	input, deep := j.input, ""
	if !s.inputsShallow && jsondepth.Exceeds(input, sink.MaxJSONDepth) {
		input, deep = nil, "input"
	}
	if !s.outputsShallow && jsondepth.Exceeds(res.outJSON, sink.MaxJSONDepth) {
		res.outJSON, deep = nil, "output"
	}
	if deep != "" {
		res.v, res.fault = judge.Verdict{}, sink.KindHarness
		res.err = Permanent(fmt.Errorf("eval: the %s is nested deeper than %d levels, more than a record holds (sink.MaxJSONDepth)", deep, sink.MaxJSONDepth))
	}
	agent, jdg, stage, badUsage := checkUsage(ep.UsageByRole())
	if badUsage != nil {
		res.v, res.fault, res.err, res.stage = judge.Verdict{}, sink.KindHarness, badUsage, stage
		if stage == "judge" {
			res.fault = sink.KindJudge
		}
	}
	v, err := &res.v, res.err
	var status sink.Status
	var kind sink.ErrorKind
	var msg string
	j.permanent = false
	switch {
	case err == nil:
		status = sink.Fail
		if v.Pass {
			status = sink.Pass
		}
	case errors.Is(err, judge.ErrUnscored):
		status = sink.Unscored
		var ue *judge.UnscoredError
		v.Reason = err.Error()
		if errors.As(err, &ue) {
			v.Reason = ue.Reason
		}
		if errors.Is(err, judge.ErrNotSampled) {
			kind = sink.KindNotSampled
		}
	default:
		status, kind, msg = sink.Error, res.fault, err.Error()
		if permanent.Is(err) {
			j.permanent = true
			if kind != sink.KindLimit {
				msg += " (permanent: not retried)"
			}
		}
	}
	used := s.buildRecord(j.rec(), ep, agent, jdg, start, status, kind, msg, v, input, res.outJSON, j)
	if status == sink.Error || status == sink.Unscored && kind != sink.KindNotSampled {
		j.rec().ErrorSource = errorSource(res.stage, kind, err)
	}
	if s.tel.tracer != nil || s.tel.events != nil {
		s.traceOutcome(j, ep, v)
	}
	j.events = usableEvents(ep.Events())
	s.spend(used)
}

// errorSource says where an attempt's error or unscored verdict came
// from, for the record's error_source: "sandbox/oom" for a command the
// out-of-memory killer ended, "sandbox" for any other sandbox fault
// wherever it happened, else the stage, and for a judge its path through
// the combinators (judge.Source).
func errorSource(stage string, kind sink.ErrorKind, err error) string {
	switch {
	case errors.Is(err, sandbox.ErrOOM):
		return "sandbox/oom"
	case kind == sink.KindSandbox || stage == "":
		return "sandbox"
	case stage == "judge":
		if p := judge.Source(err); p != "" {
			return "judge/" + p
		}
	}
	return stage
}

// oomKilled is the error of sb's first command the out-of-memory killer
// ended, if any.
func oomKilled(sb *sandbox.Sandbox) error {
	if sb == nil {
		return nil
	}
	return sb.OOMKilled()
}

// Permanent marks err as permanent: an episode that ends in it is not
// retried (a bad request, a missing credential). Any error with a method
// Permanent() bool that returns true is permanent too, as a model's
// [judge.APIError] for a request that cannot succeed. It is
// [judge.Permanent]: either marks an error for both the engine and
// judge.Retry.
func Permanent(err error) error { return permanent.Wrap(err) }

// dropKept closes the sandbox kept for a judge retry, if any.
func (j *job) dropKept() {
	j.mu.Lock()
	k := j.kept
	j.kept = nil
	j.mu.Unlock()
	if k != nil && k.sb != nil {
		k.sb.Close()
	}
}

func usageOf(rec *sink.Record) harness.Usage {
	return harness.Usage{InputTokens: rec.InputTokens, OutputTokens: rec.OutputTokens, CostUSD: rec.CostUSD}
}

// simulatorUsageOf is a simulated user's part of rec's usage.
func simulatorUsageOf(rec *sink.Record) harness.Usage {
	return harness.Usage{InputTokens: rec.SimulatorInputTokens, OutputTokens: rec.SimulatorOutputTokens,
		CostUSD: rec.SimulatorCostUSD, Model: rec.SimulatorModel}
}

// judgeUsageOf is the judge's part of rec's usage.
func judgeUsageOf(rec *sink.Record) harness.Usage {
	return harness.Usage{InputTokens: rec.JudgeInputTokens, OutputTokens: rec.JudgeOutputTokens,
		CostUSD: rec.JudgeCostUSD, Model: rec.JudgeModel}
}
