package eval_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/scorer"
	"github.com/proctor-evals/proctor/sink"
)

// An eval is a dataset, a harness and a judge; Run returns the report.
func Example() {
	d := dataset.Slice[string]{
		{ID: "q1", Input: "hello"},
		{ID: "q2", Input: "world"},
		{ID: "q3", Input: "proctor"},
	}
	shout := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		if ep.Sample.ID == "q3" {
			return "Proctor", nil // the agent gets this one wrong
		}
		return strings.ToUpper(ep.Sample.Input), nil
	})
	e := &eval.Eval[string, string]{
		Name:    "shout",
		Dataset: d,
		Harness: shout,
		Judge:   scorer.Exact(strings.ToUpper),
	}
	report, err := e.Run(context.Background(), eval.Config{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d/%d passed (%s)\n", report.Passed, report.Episodes, report.Interval.Method)
	fmt.Println(report.Failures[0].SampleID, report.Failures[0].Reason)
	// Output:
	// 2/3 passed (wilson)
	// q3 exact: got "Proctor", want "PROCTOR"
}

// An eval of variants runs each harness on every sample, on the same
// seeds (and environments); records name their variant.
func Example_variants() {
	d := dataset.Slice[string]{{ID: "q1", Input: "hello"}, {ID: "q2", Input: "World"}}
	upper := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		return strings.ToUpper(ep.Sample.Input), nil
	})
	echo := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		return ep.Sample.Input, nil
	})
	e := &eval.Eval[string, string]{
		Name:    "shout",
		Dataset: d,
		Judge:   scorer.Exact(strings.ToUpper),
		Variants: []eval.Variant[string, string]{
			{Name: "upper", Harness: upper, Version: "1"},
			{Name: "echo", Harness: echo, Version: "1"},
		},
	}
	mem := &memSink{}
	report, err := e.Run(context.Background(), eval.Config{Sinks: []sink.Sink{mem}, Quiet: true})
	if err != nil {
		panic(err)
	}
	passed := map[string]int{}
	for _, r := range mem.recs {
		if r.Status == sink.Pass {
			passed[r.Variant]++
		}
	}
	fmt.Println(report.Episodes, "episodes; passed: upper", passed["upper"], "echo", passed["echo"])
	// Output:
	// 4 episodes; passed: upper 2 echo 0
}
