package eval

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
)

// gateSink blocks its first Write until released.
type gateSink struct {
	entered, release chan struct{}
	once             sync.Once
	mu               sync.Mutex
	n                int
}

func (g *gateSink) Write(context.Context, sink.Record) error {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
	return nil
}

func (g *gateSink) Close(context.Context) error { return nil }

// Workers that outrun the recorder wait once maxQueued records are queued,
// so memory does not grow with the episodes of a run; nothing is lost.
func TestRecorderBlocksCommitsWhenItsQueueIsFull(t *testing.T) {
	total := int64(maxQueued + 2)
	done := newDoneSet(total)
	agg := report.NewIndexed(nil, int(total), func(i int) (string, map[string]string) { return "s", nil })
	r := newRecorder(done, epochsOnly(1), agg, func(err error) { t.Error(err) })
	g := &gateSink{entered: make(chan struct{}), release: make(chan struct{})}
	r.sinks = []sink.Sink{g}
	r.start(nil)

	rec := func(i int64) *finished { return &finished{sample: int(i), rec: sink.Record{Status: sink.Pass}} }
	r.commit(rec(0))
	<-g.entered // the recorder holds record 0, stuck in the sink
	for i := int64(1); i <= maxQueued; i++ {
		r.commit(rec(i)) // fills the queue without blocking
	}
	returned := make(chan struct{})
	go func() {
		r.commit(rec(total - 1))
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatalf("commit returned with %d records queued: the queue is unbounded", maxQueued)
	case <-time.After(100 * time.Millisecond):
	}
	close(g.release)
	<-returned
	require.NoError(t, r.close(context.Background()))
	require.Equal(t, int(total), g.n, "every record reached the sink")
	require.Equal(t, total, done.count())
	select {
	case <-r.complete:
	default:
		t.Fatal("complete not closed after every episode was recorded")
	}
}

// orderSink keeps the attempt and epoch of the records it is given.
type orderSink struct{ keys [][2]int }

func (o *orderSink) Write(_ context.Context, r sink.Record) error {
	o.keys = append(o.keys, [2]int{r.Attempt, r.Epoch})
	return nil
}

func (o *orderSink) Close(context.Context) error { return nil }

// Many workers committing at once, faster than the recorder at times: every
// record is written once, and each worker's records in the order it
// committed them (the queue is a stack the recorder reverses).
func TestRecorderConcurrentCommitsKeepEachWorkersOrder(t *testing.T) {
	const workers, each = 8, 3 * maxQueued
	done := newDoneSet(workers * each)
	agg := report.NewIndexed(nil, workers, func(i int) (string, map[string]string) { return "s", nil })
	r := newRecorder(done, epochsOnly(each), agg, func(err error) { t.Error(err) })
	o := &orderSink{}
	r.sinks = []sink.Sink{o}
	r.start(nil)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for e := range each {
				r.commit(&finished{sample: w, slot: e, rec: sink.Record{Status: sink.Pass, Attempt: w, Epoch: e}})
			}
		})
	}
	wg.Wait()
	require.NoError(t, r.close(context.Background()))
	require.Len(t, o.keys, workers*each)
	last := make([]int, workers)
	for w := range last {
		last[w] = -1
	}
	for _, key := range o.keys {
		w, e := key[0], key[1]
		require.Greater(t, e, last[w], "worker %d's records out of order", w)
		last[w] = e
	}
	require.Equal(t, int64(workers*each), done.count())
}

// The scheduler's clock, its start plus the monotonic time since, tells
// the time as time.Now does, and keeps a monotonic reading for durations.
func TestSchedulerClock(t *testing.T) {
	s := &scheduler[string, string]{clock: time.Now().Add(-time.Hour)}
	before := time.Now()
	got := s.now()
	after := time.Now()
	require.False(t, got.Before(before), "%v before %v", got, before)
	require.False(t, got.After(after), "%v after %v", got, after)
	require.InDelta(t, float64(before.UnixNano()), float64(got.UnixNano()), float64(time.Millisecond), "the wall time")
	require.Contains(t, got.String(), "m=+", "a monotonic reading")
}

// Far more workers than the queue has room for, all committing while the
// recorder is held up: none deadlocks (waiting workers hold no slot the
// recorder needs), and every record is written once.
func TestRecorderMoreWorkersThanQueueSlots(t *testing.T) {
	const workers, each = 3*maxQueued + 7, 3
	done := newDoneSet(workers * each)
	agg := report.NewIndexed(nil, workers, func(i int) (string, map[string]string) { return "s", nil })
	r := newRecorder(done, epochsOnly(each), agg, func(err error) { t.Error(err) })
	g := &gateSink{entered: make(chan struct{}), release: make(chan struct{})}
	r.sinks = []sink.Sink{g}
	r.start(nil)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for e := range each {
				r.commit(&finished{sample: w, slot: e, rec: sink.Record{Status: sink.Pass, Epoch: e}})
			}
		})
	}
	<-g.entered
	time.Sleep(50 * time.Millisecond) // let the workers fill the queue and wait
	close(g.release)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatal("workers still waiting to commit: deadlocked")
	}
	require.NoError(t, r.close(context.Background()))
	require.Equal(t, workers*each, g.n)
	require.Equal(t, int64(workers*each), done.count())
}
