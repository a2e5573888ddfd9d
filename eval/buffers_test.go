package eval_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// keepingSink keeps every record it is given, as a buffering sink does.
type keepingSink struct {
	mu   sync.Mutex
	recs []sink.Record
}

func (k *keepingSink) Write(_ context.Context, r sink.Record) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.recs = append(k.recs, r)
	return nil
}

func (k *keepingSink) Close(context.Context) error { return nil }

// TestRecordsKeepTheirOwnInputsAndOutputs: a run without sinks encodes
// its records' inputs and outputs into buffers reused from episode to
// episode; every record of the log still holds its own episode's, of
// lengths that vary from episode to episode (some past the size of a
// buffer kept), and a sink that keeps the records it is given sees each
// its own too (there, no buffer is reused).
func TestRecordsKeepTheirOwnInputsAndOutputs(t *testing.T) {
	const n = 600
	input := func(i int) structInput {
		return structInput{Prompt: strings.Repeat("p", i%37) + strconv.Itoa(i), Expected: strconv.Itoa(i)}
	}
	output := func(id string, epoch int) string {
		i, _ := strconv.Atoi(strings.TrimPrefix(id, "s"))
		size := (i * 7) % 53
		if i%97 == 0 {
			size = 70 << 10 // past maxKeptBuffer
		}
		return strings.Repeat("o", size) + id + "/" + strconv.Itoa(epoch) + "\"<&>"
	}
	d := make(dataset.Slice[structInput], n)
	for i := range d {
		d[i] = dataset.Sample[structInput]{ID: "s" + strconv.Itoa(i), Input: input(i)}
	}
	h := harness.Func[structInput, string](func(_ context.Context, ep *harness.Episode[structInput]) (string, error) {
		return output(ep.Sample.ID, ep.Epoch), nil
	})
	j := judge.Func[structInput, string](func(_ context.Context, ep *harness.Episode[structInput], out string) (judge.Verdict, error) {
		return judge.Verdict{Pass: out == output(ep.Sample.ID, ep.Epoch)}, nil
	})
	e := &eval.Eval[structInput, string]{Name: "buffers", Dataset: d, Harness: h, Judge: j}
	check := func(t *testing.T, rec sink.Record) {
		t.Helper()
		i, err := strconv.Atoi(strings.TrimPrefix(rec.SampleID, "s"))
		require.NoError(t, err)
		wantIn, err := json.Marshal(input(i))
		require.NoError(t, err)
		wantOut, err := json.Marshal(output(rec.SampleID, rec.Epoch))
		require.NoError(t, err)
		require.Equal(t, string(wantIn), string(rec.Input), "input of %s epoch %d", rec.SampleID, rec.Epoch)
		require.Equal(t, string(wantOut), string(rec.Output), "output of %s epoch %d", rec.SampleID, rec.Epoch)
		require.Equal(t, sink.Pass, rec.Status)
	}
	for _, withSink := range []bool{false, true} {
		t.Run("sink="+strconv.FormatBool(withSink), func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log.jsonl")
			keep := &keepingSink{}
			cfg := eval.Config{Concurrency: 16, Epochs: 2, Log: log, Quiet: true, Report: report.Options{Resamples: -1}}
			if withSink {
				cfg.Sinks = []sink.Sink{keep}
			}
			rep, err := e.Run(context.Background(), cfg)
			require.NoError(t, err)
			require.Equal(t, 2*n, rep.Passed)
			records := 0
			for rec, err := range jsonl.Records(log) {
				require.NoError(t, err)
				check(t, rec)
				records++
			}
			require.Equal(t, 2*n, records)
			if withSink {
				require.Len(t, keep.recs, 2*n)
				for _, rec := range keep.recs {
					check(t, rec)
				}
			}
		})
	}
}
