package sinktest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/sinktest"
)

// memSink is the reference sink: it keeps deep copies of the records, in
// memory, keyed by directory. It is exact in every respect, so the suite
// must pass against it with the strictest harness.
type memSink struct {
	mu     sync.Mutex
	dir    string
	recs   []sink.Record
	closed bool
}

var stored sync.Map // dir → []sink.Record

func (m *memSink) Write(_ context.Context, r sink.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("mem: %w", sink.ErrClosed)
	}
	r.Scores = clone(r.Scores)
	r.Tags = clone(r.Tags)
	r.Input = append([]byte(nil), r.Input...)
	r.Output = append([]byte(nil), r.Output...)
	m.recs = append(m.recs, r)
	return nil
}

func (m *memSink) Close(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		stored.Store(m.dir, m.recs)
	}
	return nil
}

func clone[V any](m map[string]V) map[string]V {
	if m == nil {
		return nil
	}
	c := make(map[string]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func TestRunAgainstReferenceSink(t *testing.T) {
	sinktest.Run(t, reference(20_000))
}

// reference is the target of the reference sink.
func reference(many int) sinktest.Target {
	return sinktest.Target{
		New: func(dir string) (sink.Sink, error) { return &memSink{dir: dir}, nil },
		Read: func(dir string) ([]sink.Record, error) {
			v, ok := stored.Load(dir)
			if !ok {
				return nil, fmt.Errorf("nothing stored for %s", dir)
			}
			return v.([]sink.Record), nil
		},
		InvalidUTF8: sinktest.InvalidUTF8Exact,
		NonFinite:   sinktest.NonFiniteExact,
		Concurrent:  true,
		Many:        many,
	}
}

// TestRunWithDeclaredPrecision: a sink that keeps milliseconds passes when
// it declares so.
func TestRunWithDeclaredPrecision(t *testing.T) {
	sinktest.Run(t, sinktest.Target{
		New: func(dir string) (sink.Sink, error) { return &truncating{memSink{dir: dir}}, nil },
		Read: func(dir string) ([]sink.Record, error) {
			v, _ := stored.Load(dir)
			recs, _ := v.([]sink.Record)
			return recs, nil
		},
		TimePrecision: time.Millisecond,
		InvalidUTF8:   sinktest.InvalidUTF8Exact,
		Many:          1000,
	})
}

type truncating struct{ memSink }

func (s *truncating) Write(ctx context.Context, r sink.Record) error {
	r.StartedAt = r.StartedAt.Truncate(time.Millisecond)
	return s.memSink.Write(ctx, r)
}

// TestTestReturnsViolations: the error-returning entry point passes the
// reference sink and names the rules a broken sink breaks.
func TestTestReturnsViolations(t *testing.T) {
	t.Parallel()
	if err := sinktest.TestSink(reference(1000)); err != nil {
		t.Fatalf("reference sink: %v", err)
	}
	broken := reference(1000)
	broken.New = func(dir string) (sink.Sink, error) { return &dropping{memSink: memSink{dir: dir}}, nil }
	err := sinktest.TestSink(broken)
	if err == nil {
		t.Fatal("Test passes a sink that drops every tenth record")
	}
	for _, name := range []string{"ManyRecords", "ConcurrentWrites"} {
		if !strings.Contains(err.Error(), "sinktest: "+name+":") {
			t.Errorf("the error does not name %s:\n%v", name, err)
		}
	}
}

// dropping loses every tenth record.
type dropping struct {
	memSink
	n atomic.Int64
}

func (s *dropping) Write(ctx context.Context, r sink.Record) error {
	if s.n.Add(1)%10 == 0 {
		return nil
	}
	return s.memSink.Write(ctx, r)
}
