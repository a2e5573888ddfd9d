package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
)

// A worker whose samples' sandboxes have other limits than the run's is
// refused, as a local resume under other resources is: its records would
// mix environments. AllowChanged lets it join (warned), its records
// naming their resources.
func TestWorkerUnderOtherResourcesIsRefused(t *testing.T) {
	t.Parallel()
	run := manifest.Manifest{Eval: "e", Seed: "1", Epochs: 1, Resources: []string{"memory=1073741824 image=python:3.12"}}
	mine := run
	mine.Resources = []string{"memory=2147483648 image=python:3.12"}
	w := &worker{runID: "r", manifest: run}
	_, err := join(context.Background(), w, &mine, eval.Config{}, WorkerOptions{})
	var mm *MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("joined under twice the memory: %v", err)
	}
	want := "sandbox resources: [memory=1073741824 image=python:3.12] for the run, [memory=2147483648 image=python:3.12] here"
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "AllowChanged") {
		t.Errorf("the refusal: %v\nwant it to say %q and how to allow it", err, want)
	}
	same := run
	if d := resourcesDiff(&run, &same); d != "" {
		t.Errorf("the same resources differ: %s", d)
	}
}
