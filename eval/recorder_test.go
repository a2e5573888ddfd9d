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
	r := newRecorder(done, 1, agg, func(err error) { t.Error(err) })
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
