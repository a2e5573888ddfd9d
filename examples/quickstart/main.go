// Quickstart runs a complete evaluation with no network, no API key and no
// server: arithmetic tasks, an in-process stand-in "agent" that is right
// most of the time, an exact-match judge, three epochs per task, a durable
// JSONL log, and the standard report.
//
//	go run ./examples/quickstart [-dir DIR]
//
// Run it twice with the same -dir and the second run resumes the first:
// nothing is left to do, and the report is rebuilt from the log.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/scorer"
)

// Task is one arithmetic question with its answer.
type Task struct {
	A, B   int
	Op     string
	Answer string
}

func tasks() dataset.Slice[Task] {
	var d dataset.Slice[Task]
	for i := range 60 {
		a, b := 3*i+7, i%9+2
		t := Task{A: a, B: b}
		difficulty := "easy"
		switch i % 3 {
		case 0:
			t.Op, t.Answer = "+", strconv.Itoa(a+b)
		case 1:
			t.Op, t.Answer = "*", strconv.Itoa(a*b)
			difficulty = "medium"
		default:
			t.Op, t.Answer = "^2 mod", strconv.Itoa(a*a%b)
			difficulty = "hard"
		}
		d = append(d, dataset.Sample[Task]{ID: fmt.Sprintf("arith-%03d", i), Input: t, Tags: map[string]string{"difficulty": difficulty}})
	}
	return d
}

// agent is a stand-in for a model: deterministic given the episode's seed,
// worse on harder tasks, and with a flaky "API" that a retry gets past.
func agent(ctx context.Context, ep *harness.Episode[Task]) (string, error) {
	rng := rand.New(rand.NewPCG(ep.Seed, uint64(ep.Attempt)))
	errRate := map[string]float64{"easy": 0.05, "medium": 0.2, "hard": 0.45}[ep.Sample.Tags["difficulty"]]
	ep.AddEvent(harness.Event{Kind: "model", Name: "stand-in", Usage: harness.Usage{InputTokens: 40, OutputTokens: 3, CostUSD: 0.00002}})
	select {
	case <-time.After(time.Duration(rng.IntN(3)) * time.Millisecond):
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if rng.Float64() < 0.03 {
		return "", errors.New("stand-in API: 503 service unavailable")
	}
	answer, _ := strconv.Atoi(ep.Sample.Input.Answer)
	if rng.Float64() < errRate {
		answer += 1 + rng.IntN(5)
	}
	return strconv.Itoa(answer), nil
}

func main() {
	dir := flag.String("dir", "", "directory for the run's log, kept (default: a temporary directory, removed at the end)")
	flag.Parse()
	if *dir == "" {
		d, err := os.MkdirTemp("", "proctor-quickstart-")
		if err != nil {
			log.Fatal(err)
		}
		err = run(d)
		os.RemoveAll(d) // nothing left behind; -dir keeps the log
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("\nthe log was in a temporary directory, now removed: run with -dir DIR to keep it (then proctor view DIR)")
		return
	}
	if err := run(*dir); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\nlog: %s\n", filepath.Join(*dir, "arithmetic.jsonl"))
}

func run(dir string) error {
	e := &eval.Eval[Task, string]{
		Name:    "arithmetic",
		Dataset: tasks(),
		Harness: harness.Func[Task, string](agent),
		Judge:   scorer.Exact(func(t Task) string { return t.Answer }),
	}
	// Ctrl-C stops gracefully (run again with the same log to resume);
	// a second Ctrl-C exits at once.
	ctx, stop := eval.InterruptContext(context.Background())
	defer stop()
	report, err := e.Run(ctx, eval.Config{
		Epochs:      3,
		Concurrency: 8,
		Seed:        42,
		Backoff:     10 * time.Millisecond,
		Log:         filepath.Join(dir, "arithmetic.jsonl"),
	})
	if err != nil {
		return err
	}
	return report.WriteText(os.Stdout)
}
