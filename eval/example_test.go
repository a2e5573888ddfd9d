package eval_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/scorer"
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
