// Llmjudge runs a small QA evaluation judged by a model-graded rubric behind
// a deterministic gate: an answer that matches the reference after
// normalization passes at once; only the others (paraphrases, extra words,
// wrong answers) are sent to the grader model (judge.Cascade with
// judge.PassSettles).
//
// The grader is any OpenAI-compatible Chat Completions endpoint (OpenAI,
// vLLM, llama.cpp, Ollama, a gateway), configured by the environment:
//
//	OPENAI_BASE_URL   e.g. http://localhost:8000/v1 (default https://api.openai.com/v1)
//	OPENAI_API_KEY    if the endpoint needs one
//	OPENAI_MODEL      the grader model, e.g. gpt-4o-mini (required)
//
//	go run ./examples/llmjudge
//
// With no endpoint configured it prints what to set and exits 0.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/openai"
	"github.com/proctor-evals/proctor/scorer"
)

// QA is one question with its reference answer and the stand-in agent's
// canned answer.
type QA struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
	agent    string
}

func questions() dataset.Slice[QA] {
	qs := []QA{
		{"What is the capital of France?", "Paris", "Paris"},
		{"Who wrote 'Pride and Prejudice'?", "Jane Austen", "It was written by Jane Austen in 1813."},
		{"What is the chemical symbol for gold?", "Au", "au"},
		{"How many sides does a hexagon have?", "6", "six"},
		{"What planet is known as the Red Planet?", "Mars", "Jupiter"},
		{"In which year did the Berlin Wall fall?", "1989", "The wall came down in November 1989."},
		{"What is the largest ocean on Earth?", "The Pacific Ocean", "the Atlantic"},
		{"Who painted the Mona Lisa?", "Leonardo da Vinci", "Leonardo"},
	}
	var d dataset.Slice[QA]
	for i, q := range qs {
		d = append(d, dataset.Sample[QA]{ID: fmt.Sprintf("qa-%02d", i), Input: q})
	}
	return d
}

func main() {
	if os.Getenv("OPENAI_MODEL") == "" || (os.Getenv("OPENAI_BASE_URL") == "" && os.Getenv("OPENAI_API_KEY") == "") {
		fmt.Println(`llmjudge needs an OpenAI-compatible endpoint for its grader. Set:
  OPENAI_MODEL     the grader model, e.g. gpt-4o-mini             (required)
  OPENAI_BASE_URL  e.g. http://localhost:8000/v1 for vLLM        (default https://api.openai.com/v1)
  OPENAI_API_KEY   the key, if the endpoint needs one
then run: go run ./examples/llmjudge`)
		return
	}
	// One HTTP request per call from the driver; the decorators add the
	// retries (429, 5xx, timeouts; Retry-After honoured; a bad key fails
	// at once) and keep 4 requests in flight, attempts bounded to a minute.
	grader := judge.Retry(judge.Limit(openai.New(nil), 4), &judge.RetryOptions{Timeout: time.Minute})
	temperature := 0.0
	rubric := judge.Rubric[QA, string](grader, &judge.RubricOptions[QA]{
		// The grader sees the question as the task and the answer key only
		// as the reference, never as part of the task.
		Task:        func(q QA) any { return q.Question },
		Reference:   func(q QA) string { return q.Answer },
		Temperature: &temperature,
		MaxTokens:   400,
	})
	e := &eval.Eval[QA, string]{
		Name:    "qa-llmjudge",
		Dataset: questions(),
		// The stand-in agent answers from the dataset; a real one calls a model.
		Harness: harness.Func[QA, string](func(_ context.Context, ep *harness.Episode[QA]) (string, error) {
			return ep.Sample.Input.agent, nil
		}),
		Judge: judge.Cascade(scorer.Normalized(func(q QA) string { return q.Answer }), rubric, judge.PassSettles),
	}
	// The first Ctrl-C cancels gracefully; a second one exits at once.
	ctx, stop := eval.InterruptContext(context.Background())
	defer stop()
	report, err := e.Run(ctx, eval.Config{Concurrency: 4, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	report.WriteText(os.Stdout)
}
