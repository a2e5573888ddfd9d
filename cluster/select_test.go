package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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

// Sandboxes go through the cluster: each worker provisions a sample's
// environment once (the local driver) and forks it per episode; the run
// reports as one process's with the same sandboxes.
func TestSandboxesThroughTheCluster(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" {
			t.Fatal("PROCTOR_REQUIRE_TOOLS=1 but sh is not on PATH")
		}
		t.Skip("the local sandbox driver's setup runs sh, which is not on PATH")
	}
	s := shape{Samples: 8, Sandbox: t.TempDir()}
	c, out := coordinate(t, s, runConfig(t.TempDir()+"/run.jsonl"), coordinatorOptions())
	w1 := start(t, s, workerArgs(c, 6)...)
	w2 := start(t, s, workerArgs(c, 6)...)
	res := finish(t, out, w1, w2)
	if res.rep.Errored > 0 {
		t.Fatalf("%d episodes ended in error: %v", res.rep.Errored, res.rep.Failures)
	}
	if n := logLines(filepath.Join(s.Sandbox, "provisions")); n != s.Samples {
		t.Errorf("%d environments provisioned for %d samples", n, s.Samples)
	}
	base := s
	base.Sandbox = t.TempDir()
	cfg := base.config(runConfig(t.TempDir() + "/base.jsonl"))
	want, err := testEval(base).Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	sameReport(t, want, res.rep)
}
