package judge_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/scorer"
)

// Before trusting a judge, measure it against human labels. Here a lenient
// substring judge is calibrated on six graded answers: it agrees with the
// humans on five and passes one answer they failed.
func ExampleCalibrate() {
	type qa struct{ Question, Answer string }
	label := func(id, answer, output string, humanPass bool) judge.Labelled[qa, string] {
		v := judge.Fail("human")
		if humanPass {
			v = judge.Pass("human")
		}
		return judge.Labelled[qa, string]{Sample: dataset.Sample[qa]{ID: id, Input: qa{Answer: answer}}, Output: output, Human: v}
	}
	golden := []judge.Labelled[qa, string]{
		label("1", "Paris", "Paris", true),
		label("2", "Paris", "It is Paris.", true),
		label("3", "Lyon", "Paris", false),
		label("4", "Rome", "Not Rome, but Milan", false), // the substring judge passes it
		label("5", "Oslo", "oslo", true),
		label("6", "Bern", "Zurich", false),
	}
	lenient := scorer.Contains(func(q qa) string { return q.Answer })
	c, err := judge.Calibrate(context.Background(), lenient, golden, judge.CalibrateConfig{Resamples: -1})
	if err != nil {
		panic(err)
	}
	fmt.Printf("agreement %.2f, kappa %.2f\n", c.Agreement, c.Kappa)
	fmt.Printf("too lenient on %d, too strict on %d\n", c.Confusion.FalsePass, c.Confusion.FalseFail)
	fmt.Println(strings.Contains(c.AgreementCI.Method, "wilson"))
	// Output:
	// agreement 0.83, kappa 0.67
	// too lenient on 1, too strict on 0
	// true
}
