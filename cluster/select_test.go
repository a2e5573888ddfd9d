package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/sink"
)

// A smoke run (-smoke) goes through the cluster as through one process:
// workers run the coordinator's selection from their whole dataset.
func TestSmokeRunDistributed(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 24, Sleep: 10 * time.Millisecond}
	cfg := runConfig(t.TempDir() + "/run.jsonl")
	cfg.Subset = eval.Subset{PerValue: 2, Tag: "level"}
	c, out := coordinate(t, s, cfg, coordinatorOptions())
	w := start(t, s, workerArgs(c, 4)...)
	res := finish(t, out, w)
	base := cfg
	base.Log = t.TempDir() + "/base.jsonl"
	want, err := testEval(s).Run(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	if want.Samples != 6 {
		t.Fatalf("the smoke run has %d samples, want 6", want.Samples)
	}
	sameReport(t, want, res.rep)
}

// A run derived from an earlier one (-from, -only failed) and a run that
// reuses an earlier one's results (-reuse-from) go through the cluster as
// through one process.
func TestFromAndReuseFromDistributed(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 24, Sleep: 10 * time.Millisecond}
	earlier := t.TempDir() + "/earlier.jsonl"
	half := s
	half.Samples = 12 // -reuse-from leaves the other 12 to run
	if _, err := testEval(half).Run(context.Background(), runConfig(earlier)); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*eval.Config){
		"from": func(c *eval.Config) {
			c.Select = &eval.Selection{From: earlier, Status: []sink.Status{sink.Fail}}
			c.Seed = testSeed + 1
		},
		"reuse-from": func(c *eval.Config) { c.ReuseFrom = []string{earlier} },
	} {
		cfg := runConfig(t.TempDir() + "/run.jsonl")
		edit(&cfg)
		c, out := coordinate(t, s, cfg, coordinatorOptions())
		w := start(t, s, workerArgs(c, 4)...)
		res := await(t, out, 60*time.Second)
		if res.err != nil {
			t.Fatalf("%s: %v", name, res.err)
		}
		if code := w.wait(t, 10*time.Second); code != 0 {
			t.Errorf("%s: the worker exited %d:\n%s", name, code, w.stderr)
		}
		base := cfg
		base.Log = t.TempDir() + "/base.jsonl"
		want, err := testEval(s).Run(context.Background(), base)
		if err != nil {
			t.Fatal(err)
		}
		if name == "from" && (want.Samples == 0 || want.Samples == s.Samples) {
			t.Fatalf("-from -only failed selected %d of %d samples", want.Samples, s.Samples)
		}
		if name == "reuse-from" && (want.Reused == 0 || want.Reused == want.Episodes) {
			t.Fatalf("-reuse-from reused %d of %d episodes", want.Reused, want.Episodes)
		}
		sameReport(t, want, res.rep)
	}
}
