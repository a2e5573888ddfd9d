package eval_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
)

// The engine's own cost per episode on the path a run takes when no
// feature is on (no sequential gate, no per-episode caps, no reuse, no
// sinks, no telemetry, no progress line): a fixed budget instead of a
// frozen copy of an earlier engine, which would have to be kept building
// against everything it calls. Allocations are the steady part of that
// cost, counted the same on any machine; CPU time is reported beside the
// Python recipe's, measured in the same run.
const (
	// episodeAllocBudget: 1.07 measured when it was set (3.07 before: an
	// attempt's cancel context is made only when something looks at it;
	// 5.07 before that: a run with no sink encodes an episode's input and
	// output into buffers its finished episode keeps from run to run; the
	// wave before that made 7.07: the episode and its deadline context
	// were two allocations, and the input was copied into an interface
	// first). What is left: the attempt's state.
	episodeAllocBudget = 1.5
	// episodeCPUBudgetNS is the CPU an episode cost the wave before's
	// engine on an idle 2-core machine (2.35 CPU-s per 1M episodes,
	// docs/performance.md P1).
	episodeCPUBudgetNS = 2350
)

// allocChildEnv marks the child process TestNoOpEpisodeAllocations counts
// in: alone in it, so that no other test's goroutines allocate meanwhile.
const allocChildEnv = "PROCTOR_TEST_ALLOC_CHILD"

// TestNoOpEpisodeAllocations holds the allocation budget: a feature that
// adds an allocation to every episode even when it is off fails here.
// Counted with testing.AllocsPerRun over 20,000 episodes (the run's
// setup, a few thousand allocations, is in it), in a process of its own.
func TestNoOpEpisodeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	if os.Getenv(allocChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNoOpEpisodeAllocations$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), allocChildEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	const n = 20_000
	e := benchEval(n, 0)
	dir := t.TempDir()
	runs := 0
	allocs := testing.AllocsPerRun(2, func() {
		runs++
		log := filepath.Join(dir, "log"+string(rune('a'+runs))+".jsonl")
		if _, err := e.Run(context.Background(), eval.Config{Concurrency: 64, Log: log, Quiet: true, Report: report.Options{Resamples: -1}}); err != nil {
			t.Fatal(err)
		}
	})
	if per := allocs / n; per > episodeAllocBudget {
		t.Errorf("a no-op episode allocates %.2f times, over the budget of %.1f", per, episodeAllocBudget)
	}
}

// BenchmarkNoOpBudget is BenchmarkNoOp beside the budget: allocations and
// CPU nanoseconds an episode, and the budget's. With PROCTOR_RECIPE set
// to shared/bench/py_asyncio_recipe.py (and python3 on PATH), the
// recipe's 20k no-op episodes at concurrency 5,000 run in the same
// benchmark, and their rate and ours as a multiple of it are reported:
// the figure docs/performance.md quotes.
//
//	PROCTOR_RECIPE=../shared/bench/py_asyncio_recipe.py go test ./eval -run X -bench NoOpBudget -benchtime 3x -count 5
func BenchmarkNoOpBudget(b *testing.B) {
	const n = 100_000
	e := benchEval(n, 0)
	var recipeRate float64
	recipe := os.Getenv("PROCTOR_RECIPE")
	runs := 0
	var ourWall time.Duration
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	cpu := cpuTime()
	b.ResetTimer()
	for range b.N {
		log := filepath.Join(b.TempDir(), "log.jsonl")
		start := time.Now()
		if _, err := e.Run(context.Background(), eval.Config{Concurrency: 64, Log: log, Quiet: true, Report: report.Options{Resamples: -1}}); err != nil {
			b.Fatal(err)
		}
		ourWall += time.Since(start)
		if recipe != "" {
			// Interleaved with ours: both see the machine as it is now.
			b.StopTimer()
			out := filepath.Join(b.TempDir(), "recipe.jsonl")
			start := time.Now()
			if err := exec.Command("python3", recipe, "20000", "5000", "0", out, "--keep-open").Run(); err != nil {
				b.Fatalf("the recipe: %v", err)
			}
			recipeRate += 20_000 / time.Since(start).Seconds()
			runs++
			b.StartTimer()
		}
	}
	b.StopTimer()
	cpuNS := float64((cpuTime() - cpu).Nanoseconds()) / float64(n*b.N)
	runtime.ReadMemStats(&ms)
	allocs := float64(ms.Mallocs-mallocs) / float64(n*b.N)
	ours := float64(n*b.N) / ourWall.Seconds()
	b.ReportMetric(ours, "episodes/s")
	b.ReportMetric(allocs, "allocs/episode")
	b.ReportMetric(episodeAllocBudget, "budget-allocs/episode")
	b.ReportMetric(cpuNS, "cpu-ns/episode") // the process's own: the recipe's is its child's
	b.ReportMetric(episodeCPUBudgetNS, "budget-cpu-ns/episode")
	if runs > 0 {
		b.ReportMetric(recipeRate/float64(runs), "recipe-episodes/s")
		b.ReportMetric(ours/(recipeRate/float64(runs)), "x-recipe")
	}
	if allocs > episodeAllocBudget {
		b.Errorf("a no-op episode allocates %.2f times, over the budget of %.1f", allocs, episodeAllocBudget)
	}
}
