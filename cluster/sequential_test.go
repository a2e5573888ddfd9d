package cluster

import (
	"testing"
	"time"

	"github.com/proctor-evals/proctor/eval/report"
)

// TestSequentialGateStopsADistributedRun: a coordinator with a sequential
// gate hands out work in claim order, stops its workers once decided, and
// decides as one process does, at the same point.
func TestSequentialGateStopsADistributedRun(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 300, Sleep: 5 * time.Millisecond}
	cfg := runConfig(t.TempDir() + "/run.jsonl")
	cfg.Sequential = &report.Sequential{Bar: 0.35}
	one := runConfig(t.TempDir() + "/one.jsonl")
	one.Sequential = cfg.Sequential
	want, err := testEval(s).Run(t.Context(), one)
	if err != nil {
		t.Fatal(err)
	}
	if want.Sequential.Decision != report.DecidedPass {
		t.Fatalf("one process: %+v", want.Sequential)
	}

	c, out := coordinate(t, s, cfg, coordinatorOptions())
	w := start(t, s, workerArgs(c, 8)...)
	o := await(t, out, 60*time.Second)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Errorf("the worker exited %d:\n%s", code, w.stderr)
	}
	got := o.rep.Sequential
	if got.Decision != want.Sequential.Decision || got.Samples != want.Sequential.Samples || got.Bounds != want.Sequential.Bounds {
		t.Errorf("distributed: %+v\none process: %+v", got, want.Sequential)
	}
	if o.rep.Episodes >= s.Samples*testEpochs {
		t.Errorf("the run did not stop: %d episodes", o.rep.Episodes)
	}
}
