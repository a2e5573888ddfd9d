package jsonl_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// writeLog writes n realistic records (about 350 bytes each).
func writeLog(b *testing.B, path string, n int) {
	w, err := jsonl.Create(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		r := sink.Record{Schema: 1, RunID: "20261122T000000Z-abcdef01", Eval: "bench", SampleID: fmt.Sprintf("t%d", i),
			Status: sink.Pass, Score: 1, Input: []byte(fmt.Sprintf(`{"prompt":"what is %d+1?","expected":"%d"}`, i, i+1)),
			Output: []byte(fmt.Sprintf(`"%d"`, i+1)), Tags: map[string]string{"difficulty": "easy"},
			StartedAt: time.Now(), DurationMS: 50.1, Seed: uint64(i) * 0x9e3779b97f4a7c15}
		if err := w.Write(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWrite measures the log's append path (group commit).
func BenchmarkWrite(b *testing.B) {
	w, err := jsonl.Create(filepath.Join(b.TempDir(), "log.jsonl"), nil)
	if err != nil {
		b.Fatal(err)
	}
	r := sink.Record{Schema: 1, RunID: "20261122T000000Z-abcdef01", Eval: "bench", SampleID: "t12345",
		Status: sink.Pass, Score: 1, Input: []byte(`{"prompt":"what is 12345+1?","expected":"12346"}`),
		Output: []byte(`"12346"`), Tags: map[string]string{"difficulty": "easy"}, StartedAt: time.Now(), DurationMS: 50.1}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.Write(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkOpen1M is P4's first half: recovering a 1M-record log (the key
// index resume needs) before any new episode can start.
func BenchmarkOpen1M(b *testing.B) {
	path := filepath.Join(b.TempDir(), "log.jsonl")
	writeLog(b, path, 1_000_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w, rec, err := jsonl.Open(path, &jsonl.OpenOptions{DropErrors: true})
		if err != nil || rec.Records != 1_000_000 {
			b.Fatal(err, rec.Records)
		}
		w.Close(context.Background())
	}
}

// BenchmarkOpen1MVisit is Open as the engine calls it: keys visited into
// the caller's own index (here counted), no map of keys built.
func BenchmarkOpen1MVisit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "log.jsonl")
	writeLog(b, path, 1_000_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		w, rec, err := jsonl.Open(path, &jsonl.OpenOptions{DropErrors: true, Visit: func([]byte, []byte, int) { n++ }})
		if err != nil || rec.Records != 1_000_000 || n != 1_000_000 {
			b.Fatal(err, rec.Records)
		}
		w.Close(context.Background())
	}
}
