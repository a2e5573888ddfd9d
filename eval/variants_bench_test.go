package eval_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

// BenchmarkVariantMatrix compares a 4-variant matrix run as one eval
// (each sample's environment provisioned once, forked for every
// variant's episodes) with the same 4 variants run as 4 evals, one after
// the other: 32 samples, 2 epochs, concurrency 16, an environment that
// takes 20 ms to provision (its setup command), an agent as long.
// It reports provisions per op; ns/op is the wall time of the whole
// matrix.
func BenchmarkVariantMatrix(b *testing.B) {
	const (
		nSamples, epochs, variants = 32, 2, 4
		provision, agent           = 20 * time.Millisecond, 20 * time.Millisecond
	)
	var d dataset.Slice[string]
	for i := range nSamples {
		d = append(d, dataset.Sample[string]{ID: fmt.Sprintf("s%02d", i), Input: "x"})
	}
	slow := func(ctx context.Context, _ *harness.Episode[string]) (string, error) {
		t := time.NewTimer(agent)
		defer t.Stop()
		select {
		case <-t.C:
			return "ok", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	spec := func(dataset.Sample[string]) sandbox.Spec {
		return sandbox.Spec{Setup: []sandbox.Cmd{{Args: []string{"setup"}}}}
	}
	provider := func() *counting {
		return &counting{Provider: &sandboxtest.Fake{Exec: func(ctx context.Context, _ sandboxtest.Files, cmd sandbox.Cmd) (sandbox.Result, error) {
			if cmd.Args[0] == "setup" {
				time.Sleep(provision)
			}
			return sandbox.Result{}, nil
		}}}
	}
	cfg := func(c *counting) eval.Config {
		return eval.Config{Sandbox: c.provider(), Epochs: epochs, Concurrency: 16, Retries: -1, Quiet: true}
	}
	run := func(b *testing.B, e *eval.Eval[string, string], c *counting) {
		rep, err := e.Run(context.Background(), cfg(c))
		if err != nil {
			b.Fatal(err)
		}
		if rep.Errored > 0 {
			b.Fatalf("%d episodes errored: %v", rep.Errored, rep.Failures)
		}
	}
	b.Run("matrix", func(b *testing.B) {
		var provisions int32
		for b.Loop() {
			e := &eval.Eval[string, string]{Name: "matrix", Dataset: d, Judge: wantOK, Sandbox: spec}
			for v := range variants {
				e.Variants = append(e.Variants, eval.Variant[string, string]{Name: fmt.Sprintf("v%d", v), Harness: harness.Func[string, string](slow)})
			}
			c := provider()
			run(b, e, c)
			provisions += c.provisions.Load()
		}
		b.ReportMetric(float64(provisions)/float64(b.N), "provisions/op")
	})
	b.Run("separate", func(b *testing.B) {
		var provisions int32
		for b.Loop() {
			for v := range variants {
				e := &eval.Eval[string, string]{Name: fmt.Sprintf("v%d", v), Dataset: d, Judge: wantOK, Sandbox: spec, Harness: harness.Func[string, string](slow)}
				c := provider()
				run(b, e, c)
				provisions += c.provisions.Load()
			}
		}
		b.ReportMetric(float64(provisions)/float64(b.N), "provisions/op")
	})
}
