package jsonl_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/sink/sinktest"
)

// TestConformance runs the sink suite against the log. JSON cannot carry
// NaN or ±Inf: the log writes null, which reads back as 0.
func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T, dir string) sink.Sink {
			w, err := jsonl.Create(filepath.Join(dir, "log.jsonl"), nil)
			require.NoError(t, err)
			return w
		},
		Read: func(t *testing.T, dir string) []sink.Record {
			var out []sink.Record
			for r, err := range jsonl.Records(filepath.Join(dir, "log.jsonl")) {
				require.NoError(t, err)
				out = append(out, r)
			}
			return out
		},
		NonFinite:  sinktest.NonFiniteZero,
		Concurrent: true,
	})
}
