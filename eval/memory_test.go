package eval_test

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

type structInput struct {
	Prompt, Expected string
}

type structOutput struct {
	Answer string
	Steps  []string
}

// Thousands of workers wait in their harnesses at once, so each one's
// stack is memory times the concurrency: a worker's stack grows to its
// deepest call and stays so until a collection shrinks it. 4 KB a worker
// is 20 MB of the 100k-episode run at 5,000 workers; 8 KB would double
// it. With the collector off, so that no stack shrinks, 2,000 workers that
// each ran one episode (a struct input and output, encoded by
// encoding/json, whose calls are deep) wait in their second: their stacks
// must still be 4 KB each.
func TestWorkersKeepSmallStacks(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector deepens every call")
	}
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) { testWorkersKeepSmallStacks(t, streamed) })
	}
}

func testWorkersKeepSmallStacks(t *testing.T, streamed bool) {
	const workers = 2000
	d := make(dataset.Slice[structInput], workers)
	for i := range d {
		d[i] = dataset.Sample[structInput]{ID: "s" + strconv.Itoa(i), Input: structInput{"what is " + strconv.Itoa(i) + "+1?", strconv.Itoa(i + 1)}}
	}
	var calls atomic.Int64
	parked, release := make(chan struct{}), make(chan struct{})
	h := harness.Func[structInput, structOutput](func(ctx context.Context, ep *harness.Episode[structInput]) (structOutput, error) {
		switch n := calls.Add(1); {
		case n == 2*workers:
			close(parked)
			fallthrough
		case n > workers:
			<-release
		}
		return structOutput{Answer: ep.Sample.Input.Expected, Steps: []string{"add", "one"}}, nil
	})
	j := judge.Func[structInput, structOutput](func(_ context.Context, ep *harness.Episode[structInput], out structOutput) (judge.Verdict, error) {
		return judge.Verdict{Pass: out.Answer == ep.Sample.Input.Expected}, nil
	})
	e := &eval.Eval[structInput, structOutput]{Name: "stacks", Dataset: d, Harness: h, Judge: j}
	if streamed {
		e.Dataset = dataset.Func[structInput](func(ctx context.Context) iter.Seq2[dataset.Sample[structInput], error] { return d.Samples(ctx) })
	}

	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	var before, during runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan error)
	go func() {
		rep, err := e.Run(context.Background(), eval.Config{Concurrency: workers, Epochs: 3})
		if err == nil {
			require.Equal(t, 3*workers, rep.Passed)
		}
		done <- err
	}()
	<-parked
	runtime.ReadMemStats(&during)
	close(release)
	require.NoError(t, <-done)
	perWorker := float64(during.StackInuse-before.StackInuse) / workers
	t.Logf("%.0f bytes of stack per waiting worker", perWorker)
	require.Less(t, perWorker, 5000.0, "each worker's stack grew past 4 KB")
}
