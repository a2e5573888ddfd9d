package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/proctor-evals/proctor/sandbox/kubernetes/internal/kubetest"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// The example runs on one machine against the test cluster, from
// $KUBECONFIG, every episode passing in a pod of its own.
func TestRunOnTheTestCluster(t *testing.T) {
	c := kubetest.Start(t)
	t.Setenv("KUBECONFIG", c.Kubeconfig())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("PROCTOR_SANDBOX_IMAGE", kubetest.BusyboxImage(t))
	t.Setenv("PROCTOR_SANDBOX_NAMESPACE", c.Namespace(t))
	// The example sets no node selector: the test kubelet's node is the
	// cluster's only one.
	var stdout, stderr bytes.Buffer
	log := filepath.Join(t.TempDir(), "run.jsonl")
	code := realMain(context.Background(), []string{"run", "-log", log}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), stdout.String())
	}
	n := 0
	for r, err := range jsonl.Records(log) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if r.Status != sink.Pass {
			t.Errorf("%s/%d: %s %s %s", r.SampleID, r.Epoch, r.Status, r.Reason, r.Error)
		}
	}
	if n != 24 {
		t.Errorf("%d records, want 12 samples × 2 epochs", n)
	}
}
