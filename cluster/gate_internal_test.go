package cluster

import (
	"encoding/json"
	"testing"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
)

// TestWorkerAdoptsTheRunsGate: a worker started without the gate's flags
// ran a gated run's episodes under the ungated retry rule, drawing a timed
// out episode again; it takes the gate from the run's manifest, and keeps
// its own when it has one.
func TestWorkerAdoptsTheRunsGate(t *testing.T) {
	t.Parallel()
	m := &manifest.Manifest{Seed: "3", Epochs: 2, Dataset: manifest.DatasetIdentity{Samples: 10},
		Sequential: json.RawMessage(`{"bar":0.7,"order":["a","b"]}`)}
	cfg, err := adoptGate(eval.Config{}, m)
	if err != nil || cfg.Sequential == nil || cfg.Sequential.Bar != 0.7 || cfg.Sequential.Seed != 3 {
		t.Fatalf("adopted %+v, %v", cfg.Sequential, err)
	}
	own := &report.Sequential{Bar: 0.8}
	if cfg, _ = adoptGate(eval.Config{Sequential: own}, m); cfg.Sequential != own {
		t.Errorf("the worker's own gate was replaced: %+v", cfg.Sequential)
	}
	// Against a baseline the workers' copy has no figures: no file is read.
	m.Sequential = json.RawMessage(`{"baseline":"/nowhere/base.jsonl","margin":0.05}`)
	if cfg, err = adoptGate(eval.Config{}, m); err != nil || cfg.Sequential == nil || cfg.Sequential.Load() != nil {
		t.Errorf("a baseline gate: %+v, %v", cfg.Sequential, err)
	}
	if cfg, _ = adoptGate(eval.Config{}, &manifest.Manifest{Seed: "3"}); cfg.Sequential != nil {
		t.Errorf("an ungated run gave its worker a gate: %+v", cfg.Sequential)
	}
}

// TestWorkerAdoptsTheRunsElimination: under elimination an episode is
// drawn once, as under a gate: a worker started without
// -eliminate-variants takes the rule from the run's manifest, and keeps
// its own α when it has one.
func TestWorkerAdoptsTheRunsElimination(t *testing.T) {
	t.Parallel()
	m := &manifest.Manifest{Seed: "3", Epochs: 2, EliminateVariants: 0.05}
	if cfg, err := adoptGate(eval.Config{}, m); err != nil || cfg.EliminateVariants != 0.05 {
		t.Fatalf("adopted %v, %v", cfg.EliminateVariants, err)
	}
	if cfg, _ := adoptGate(eval.Config{EliminateVariants: 0.1}, m); cfg.EliminateVariants != 0.1 {
		t.Errorf("the worker's own α was replaced: %v", cfg.EliminateVariants)
	}
	if cfg, _ := adoptGate(eval.Config{}, &manifest.Manifest{Seed: "3"}); cfg.EliminateVariants != 0 {
		t.Errorf("a run without elimination gave its worker one: %v", cfg.EliminateVariants)
	}
}
