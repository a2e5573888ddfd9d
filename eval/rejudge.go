package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// Rejudge runs only e's Judge over the outputs recorded in the log at
// fromLog — a new judge, or the same one after the grader failed — and
// records a new run (cfg.Log, cfg.Sinks) without calling the harness again.
// Each record of the new run links to the original run by parent_run_id,
// and its transcript starts with a link to the original transcript.
//
// Inputs and outputs are decoded from the log into T and O; e.Harness and
// e.Dataset are not used. Episodes that ended in error before the judge ran
// (no output was recorded) cannot be judged: they are left out, counted in
// a warning of the report. Judges that need the episode's sandbox cannot
// rejudge (Episode.Sandbox is nil). Rejudging resumes like Run: with the
// same cfg.Log only what is missing runs.
//
// Memory holds each sample's input and each episode's log offset, never the
// outputs, which are read back one at a time.
func (e *Eval[T, O]) Rejudge(ctx context.Context, fromLog string, cfg Config) (*report.Report, error) {
	if e.Judge == nil || e.Name == "" {
		return nil, &ConfigError{"Rejudge needs a Name and a Judge"}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Sequential != nil {
		return nil, &ConfigError{"Rejudge takes no Config.Sequential: a gate claims samples in its own order; gate a run instead"}
	}
	cfg = cfg.withDefaults()
	cfg.Sandbox = nil
	// One open file for the index and every read of an output: a log
	// rewritten meanwhile (a resume renames a new file over it) does not
	// move the offsets under the reads.
	f, err := safeopen.Open(fromLog)
	if err != nil {
		return nil, fmt.Errorf("eval: rejudging: %w", err)
	}
	defer f.Close()
	src, err := indexOutputs[T](f, fromLog)
	if err != nil {
		return nil, err
	}
	if len(src.samples) == 0 {
		return nil, fmt.Errorf("eval: %s holds no records to rejudge", fromLog)
	}
	d := &Eval[T, O]{Name: e.Name, Judge: e.Judge}
	h := replay[T, O](f, fromLog, src)
	if len(src.variants) == 1 && src.variants[0] == "" {
		d.Harness = h
	} else {
		// Every variant the log holds is judged again, under its name.
		for _, name := range src.variants {
			d.Variants = append(d.Variants, Variant[T, O]{Name: name, Harness: h})
		}
	}
	cfg.Variants = nil
	plan, err := newVariantPlan(d, &cfg, src.epochs)
	if err != nil {
		return nil, fmt.Errorf("eval: rejudging %s: %w", fromLog, err)
	}
	cfg.plan, cfg.Epochs = plan, plan.slots()
	samples, err := checkSamples(src.samples)
	if err != nil {
		return nil, err
	}
	setup := &runSetup[T, O]{e: d, cfg: cfg, samples: samples, parentRunID: src.runID,
		// Episodes with nothing to judge count as done.
		skip: func(i, slot int) bool {
			_, ok := src.outputs[sink.Key{Variant: plan.name(slot), SampleID: samples.id(i), Epoch: plan.epoch(slot)}]
			return !ok
		}}
	if src.unjudgeable > 0 {
		setup.warnings = append(setup.warnings, fmt.Sprintf("%d episodes of %s ended in error before the judge and have no output to rejudge", src.unjudgeable, src.runID))
	}
	return execute(ctx, setup)
}

type outputIndex[T any] struct {
	runID       string
	samples     []dataset.Sample[T]
	epochs      int
	variants    []string             // in the order the log first names them
	outputs     map[sink.Key]located // episodes with an output
	unjudgeable int
}

type located struct {
	offset int64 // of the record's line: its output is read back when judged
}

func indexOutputs[T any](f *os.File, path string) (*outputIndex[T], error) {
	idx := &outputIndex[T]{outputs: map[sink.Key]located{}}
	seen, seenVariant := map[string]bool{}, map[string]bool{}
	for e, err := range jsonl.ReadEntries(f, path) {
		var torn *jsonl.TornTailError
		if errors.As(err, &torn) {
			break // the committed records before it are all there is
		}
		if err != nil {
			return nil, fmt.Errorf("eval: rejudging: %w", err)
		}
		idx.runID = e.RunID
		if !seen[e.SampleID] {
			seen[e.SampleID] = true
			s := dataset.Sample[T]{ID: e.SampleID, Tags: e.Tags}
			if len(e.Input) > 0 {
				if err := json.Unmarshal(e.Input, &s.Input); err != nil {
					return nil, fmt.Errorf("eval: rejudging: %s: input of sample %q: %w", path, e.SampleID, err)
				}
			}
			idx.samples = append(idx.samples, s)
		}
		idx.epochs = max(idx.epochs, e.Epoch+1)
		if !seenVariant[e.Variant] {
			seenVariant[e.Variant] = true
			idx.variants = append(idx.variants, e.Variant)
		}
		if e.Status == sink.Error && e.ErrorKind != sink.KindJudge || len(e.Output) == 0 {
			idx.unjudgeable++
			continue
		}
		idx.outputs[e.Key()] = located{e.Offset}
	}
	return idx, nil
}

// replay is the harness of a rejudged run: it returns the output the
// original run recorded for the episode.
// The harness of a run with Config.ReuseFrom replays the same way for
// the episodes whose judge alone changed (replayHarness).
func replay[T, O any](f *os.File, path string, idx *outputIndex[T]) harness.Harness[T, O] {
	return harness.Func[T, O](func(ctx context.Context, ep *harness.Episode[T]) (O, error) {
		var out O
		loc := idx.outputs[sink.Key{Variant: ep.Variant, SampleID: ep.Sample.ID, Epoch: ep.Epoch}]
		line, err := jsonl.ReadLineFrom(f, loc.offset, nil)
		if err != nil {
			return out, err
		}
		rec, err := replayed(line, path, loc.offset, &out)
		if err != nil {
			return out, err
		}
		ep.Seed = rec.Seed // the judge sees the original episode's seed
		ep.AddEvent(rejudgedNote(path, rec))
		return out, nil
	})
}
