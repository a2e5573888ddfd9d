package sinktest_test

import (
	"context"
	"fmt"
	"sync"
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
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T, dir string) sink.Sink { return &memSink{dir: dir} },
		Read: func(t *testing.T, dir string) []sink.Record {
			v, ok := stored.Load(dir)
			if !ok {
				t.Fatalf("nothing stored for %s", dir)
			}
			return v.([]sink.Record)
		},
		InvalidUTF8: sinktest.InvalidUTF8Exact,
		NonFinite:   sinktest.NonFiniteExact,
		Concurrent:  true,
		Many:        20_000,
	})
}

// TestRunWithDeclaredPrecision: a sink that keeps milliseconds passes when
// it declares so.
func TestRunWithDeclaredPrecision(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T, dir string) sink.Sink { return &truncating{memSink{dir: dir}} },
		Read: func(t *testing.T, dir string) []sink.Record {
			v, _ := stored.Load(dir)
			recs, _ := v.([]sink.Record)
			return recs
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
