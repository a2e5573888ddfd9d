package otlp_test

import (
	"context"
	"fmt"
	"time"

	"github.com/proctor-evals/proctor/dataset/otlp"
	"github.com/proctor-evals/proctor/harness/replay"
)

// The GenAI operations of one hour of traces, as samples for the replay
// harness.
func ExampleTraces() {
	hour := replay.WindowAt(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), time.Hour)
	d := hour.Filter(otlp.Traces("testdata/traces.jsonl", &otlp.Options{Tags: []string{"gen_ai.request.model"}}))
	for s, err := range d.Samples(context.Background()) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(s.ID, s.Tags["gen_ai.request.model"], string(s.Input.Output)[:40])
	}
	// Output:
	// 5b8efff798038103d269b633813fc60c-eee19b7ec3c1b174 m-small [{"role": "assistant", "parts": [{"type"
	// 5b8efff798038103d269b633813fc60c-eee19b7ec3c1b175 m-small [{"role": "assistant", "parts": [{"type"
	// 4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7 m-large [{"finish_reason":"stop","parts":[{"cont
	// 0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331 m-small [{"role": "assistant", "content": "Refun
	// 0af7651916cd43dd8448eb211c80319c-b7ad6b7169203332 m-small [{"content":"Sorry, I cannot help with t
}
