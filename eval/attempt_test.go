package eval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/scorer"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// Workers reuse their Episode from attempt to attempt; an abandoned
// attempt's harness, still running, must keep seeing its own.
func TestAbandonedHarnessKeepsItsEpisode(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	seen := make(chan string, 1)
	stubborn := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		if ep.Sample.Input == "hang" && ep.Attempt == 0 {
			<-release // ignores ctx, while other episodes run
			seen <- fmt.Sprintf("%s %s %d", ep.Sample.ID, ep.Sample.Input, ep.Attempt)
		}
		return ep.Sample.Input, nil
	})
	ids := []string{"hang"}
	for i := range 50 {
		ids = append(ids, "ok"+strconv.Itoa(i))
	}
	e := &eval.Eval[string, string]{Name: "t", Dataset: samples(ids...), Harness: stubborn,
		Judge: scorer.Exact(func(in string) string { return in })}
	rep, err := e.Run(context.Background(), eval.Config{Timeout: 30 * time.Millisecond, Retries: 1, Backoff: time.Millisecond, Concurrency: 1})
	require.NoError(t, err)
	require.Equal(t, 51, rep.Passed, "the retry of the abandoned episode and every other episode passed")
	close(release)
	select {
	case got := <-seen:
		require.Equal(t, "s0 hang 0", got, "the abandoned harness's episode was changed under it")
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned harness did not return")
	}
}

// recordChecker is a sink that checks each record's input and output
// when it receives it, while the workers go on encoding other records.
type recordChecker struct {
	mu   sync.Mutex
	bad  []string
	seen int
}

func (c *recordChecker) Write(_ context.Context, r sink.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen++
	if msg := checkRecord(r); msg != "" {
		c.bad = append(c.bad, msg)
	}
	return nil
}

func (c *recordChecker) Close(context.Context) error { return nil }

type task struct {
	Prompt string `json:"prompt"`
	N      int    `json:"n"`
}

func checkRecord(r sink.Record) string {
	n, _ := strconv.Atoi(r.SampleID[1:])
	want, _ := json.Marshal(task{Prompt: "what is <" + r.SampleID + ">?", N: n})
	if string(r.Input) != string(want) || string(r.Output) != strconv.Quote(r.SampleID) {
		return fmt.Sprintf("%s: input %s, output %s", r.SampleID, r.Input, r.Output)
	}
	return ""
}

// Inputs and outputs are encoded into buffers reused from record to
// record: every record, in the log and in the sinks, holds its own.
func TestRecordsKeepTheirInputAndOutput(t *testing.T) {
	t.Parallel()
	const n = 5000
	d := make(dataset.Slice[task], n)
	for i := range d {
		id := "s" + strconv.Itoa(i)
		d[i] = dataset.Sample[task]{ID: id, Input: task{Prompt: "what is <" + id + ">?", N: i}}
	}
	h := harness.Func[task, string](func(_ context.Context, ep *harness.Episode[task]) (string, error) {
		return ep.Sample.ID, nil
	})
	e := &eval.Eval[task, string]{Name: "t", Dataset: d, Harness: h, Judge: scorer.Exact(func(task) string { return "" })}
	c := &recordChecker{}
	log := filepath.Join(t.TempDir(), "log.jsonl")
	_, err := e.Run(context.Background(), eval.Config{Concurrency: 8, Epochs: 2, Log: log, Sinks: []sink.Sink{c}})
	require.NoError(t, err)
	require.Equal(t, 2*n, c.seen)
	require.Empty(t, c.bad)
	logged := 0
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		require.Empty(t, checkRecord(r))
		logged++
	}
	require.Equal(t, 2*n, logged)
}
