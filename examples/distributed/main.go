// Distributed is one eval binary for every way a run goes beyond one
// machine: shards without a broker (a Kubernetes Indexed Job, a Slurm
// array), merged afterwards, or a coordinator with workers over NATS
// JetStream. The eval is small and deterministic (arithmetic tasks, a
// stand-in agent that is right unless its episode's seed says otherwise,
// a little latency), so that every mode gives the same report.
//
// One machine:
//
//	go run ./examples/distributed run -log runs/one.jsonl
//
// Three shards, anywhere, then merged (the shards share the run's ID,
// derived from the eval, seed and dataset; a killed shard is rerun with
// the same command and resumes its log):
//
//	go run ./examples/distributed run -shard 0/3 -log runs/shard-0.jsonl   # and 1/3, 2/3
//	proctor merge -o runs/run.jsonl runs/shard-*.jsonl
//	proctor report runs/run.jsonl
//
// In a Kubernetes Indexed Job, -shard comes from JOB_COMPLETION_INDEX and
// JOB_COMPLETIONS: see k8s/indexed-job.yaml.
//
// A coordinator and workers:
//
//	go run ./examples/distributed coordinate -log runs/run.jsonl -listen 0.0.0.0:4222
//	PROCTOR_TOKEN=$(cat runs/run.token) go run ./examples/distributed work -join nats://HOST:4222 -run-id ID
//
// (the coordinator prints the second line; docs/distributed.md has the rest)
// k8s/coordinator.yaml and k8s/worker.yaml run those on a cluster.
package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/proctor-evals/proctor/cluster"
	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

// Task is one arithmetic question with its answer.
type Task struct {
	A, B   int
	Op     string
	Answer int
}

// samples is the dataset: 60 tasks tagged by difficulty and operation.
func samples() dataset.Slice[Task] {
	var d dataset.Slice[Task]
	for i := range 60 {
		a, b := 3*i+7, i%9+2
		t := Task{A: a, B: b}
		difficulty := []string{"easy", "medium", "hard"}[i%3]
		switch i % 2 {
		case 0:
			t.Op, t.Answer = "+", a+b
		default:
			t.Op, t.Answer = "*", a*b
		}
		d = append(d, dataset.Sample[Task]{ID: fmt.Sprintf("task-%d", i), Input: t,
			Tags: map[string]string{"difficulty": difficulty, "op": t.Op}})
	}
	return d
}

// agent stands in for a model: it takes a little time, and it is wrong on
// some episodes, more often on harder tasks, as the episode's seed (derived
// from the run's seed, the sample and the epoch) says: the same episode
// gives the same answer on any machine.
func agent(ctx context.Context, ep *harness.Episode[Task]) (int, error) {
	select {
	case <-time.After(latency):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	ep.AddEvent(harness.Event{Kind: "model", Name: "stand-in", Usage: harness.Usage{InputTokens: 20, OutputTokens: 3}})
	odds := map[string]uint64{"easy": 10, "medium": 5, "hard": 3}[ep.Sample.Tags["difficulty"]]
	if ep.Seed%odds == 0 {
		return ep.Sample.Input.Answer + 1, nil
	}
	return ep.Sample.Input.Answer, nil
}

// latency is how long the stand-in agent takes per episode.
const latency = 40 * time.Millisecond

func newEval() *eval.Eval[Task, int] {
	return &eval.Eval[Task, int]{
		Name:    "distributed-arith",
		Dataset: samples(),
		Harness: harness.Func[Task, int](agent),
		Judge: judge.Func[Task, int](func(_ context.Context, ep *harness.Episode[Task], got int) (judge.Verdict, error) {
			if got == ep.Sample.Input.Answer {
				return judge.Pass("right"), nil
			}
			return judge.Fail("got " + strconv.Itoa(got) + ", want " + strconv.Itoa(ep.Sample.Input.Answer)), nil
		}),
		Versions: eval.Versions{Harness: "stand-in-1", Judge: "exact-1"},
	}
}

// config is the run's configuration; flags override it.
func config() eval.Config {
	return eval.Config{Epochs: 3, Seed: 2026, Concurrency: 2}
}

func main() {
	cluster.Main(newEval(), config())
}
