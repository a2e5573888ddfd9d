package jsonl_test

import (
	"path/filepath"
	"testing"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/sink/sinktest"
)

// TestConformance runs the sink suite against the log. JSON cannot carry
// NaN or ±Inf: the log writes null, which reads back as 0.
func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Target{
		New: func(dir string) (sink.Sink, error) { return jsonl.Create(filepath.Join(dir, "log.jsonl"), nil) },
		Read: func(dir string) ([]sink.Record, error) {
			var out []sink.Record
			for r, err := range jsonl.Records(filepath.Join(dir, "log.jsonl")) {
				if err != nil {
					return out, err
				}
				out = append(out, r)
			}
			return out, nil
		},
		NonFinite:  sinktest.NonFiniteZero,
		Concurrent: true,
	})
}
