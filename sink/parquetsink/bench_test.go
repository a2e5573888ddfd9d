package parquetsink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/parquetsink"
)

// benchRecords are realistic records: short strings, a tags map of two
// keys, a score map of one, a small JSON output.
func benchRecords(n int) []sink.Record {
	recs := make([]sink.Record, n)
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for i := range recs {
		status, kind, errMsg := sink.Pass, sink.ErrorKind(""), ""
		switch i % 10 {
		case 7, 8:
			status = sink.Fail
		case 9:
			status, kind, errMsg = sink.Error, sink.KindTimeout, "episode timed out after 30s"
		}
		recs[i] = sink.Record{
			Schema:       sink.SchemaVersion,
			RunID:        "run-20250601-120000-abc123",
			Eval:         "swe-mini",
			SampleID:     "sample-" + strconv.Itoa(i%5000),
			Epoch:        i / 5000,
			Status:       status,
			Score:        float64(i%10) / 10,
			Scores:       map[string]float64{"exact": float64(i % 2)},
			Reason:       "output matches reference",
			Error:        errMsg,
			ErrorKind:    kind,
			Output:       json.RawMessage(`{"answer":"` + strconv.Itoa(i*7) + `","confidence":0.9}`),
			Tags:         map[string]string{"difficulty": []string{"easy", "medium", "hard"}[i%3], "category": []string{"math", "code", "qa", "tool"}[i%4]},
			StartedAt:    start.Add(time.Duration(i) * time.Millisecond),
			DurationMS:   float64(100 + i%900),
			InputTokens:  int64(500 + i%200),
			OutputTokens: int64(50 + i%100),
			CostUSD:      0.0001 * float64(1+i%50),
			Seed:         uint64(i) * 0x9E3779B97F4A7C15,
			Transcript:   "https://traces.example.com/t/" + strconv.Itoa(i),
		}
	}
	return recs
}

// distributedRecords are benchRecords as the workers of a distributed,
// traced run write them: each names its worker, trace and span, and one in
// four reuses an earlier run's result.
func distributedRecords(n int) []sink.Record {
	recs := benchRecords(n)
	for i := range recs {
		recs[i].Worker = "worker-" + strconv.Itoa(i%4) + ".cluster.local:4821" + strconv.Itoa(i%4)
		recs[i].TraceID = fmt.Sprintf("%016x%016x", uint64(i)*0x9E3779B97F4A7C15, uint64(i)^0xC2B2AE3D27D4EB4F)
		recs[i].SpanID = fmt.Sprintf("%016x", uint64(i)*0xBF58476D1CE4E5B9)
		if i%4 == 0 {
			recs[i].ReusedFrom = "run-20250531-090000-def456"
		}
	}
	return recs
}

// BenchmarkWrite measures the write throughput of the Parquet sink, zstd,
// default row groups (DESIGN P6: ≥ 500k records/s). Each iteration writes
// one record; files roll at the default size. zstd-distributed writes
// records that carry worker, trace and span IDs.
func BenchmarkWrite(b *testing.B) {
	for _, c := range []struct {
		name string
		opt  parquetsink.Compression
		recs func(int) []sink.Record
	}{
		{"zstd", parquetsink.Zstd, benchRecords},
		{"snappy", parquetsink.Snappy, benchRecords},
		{"none", parquetsink.Uncompressed, benchRecords},
		{"zstd-distributed", parquetsink.Zstd, distributedRecords},
	} {
		b.Run(c.name, func(b *testing.B) {
			recs := c.recs(1 << 16)
			w, err := parquetsink.New(b.TempDir(), &parquetsink.Options{Compression: c.opt})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				if err := w.Write(ctx, recs[i&(1<<16-1)]); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// BenchmarkMemory writes 2M records with 64k-row row groups and reports the
// writer's live heap (after a GC, less the heap before the writer existed,
// which holds the test records) at the end and its peak, sampled every 64k
// records: both stay near a constant of a few row groups' worth, whatever
// the number of records.
func BenchmarkMemory(b *testing.B) {
	const n = 2_000_000
	recs := benchRecords(1 << 16)
	for b.Loop() {
		dir := b.TempDir()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		w, err := parquetsink.New(dir, &parquetsink.Options{RowGroupRows: 64 << 10})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		var peak uint64
		var ms runtime.MemStats
		base := before.HeapInuse
		start := time.Now()
		for i := range n {
			if err := w.Write(ctx, recs[i&(1<<16-1)]); err != nil {
				b.Fatal(err)
			}
			if i%(64<<10) == 64<<10-1 {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		}
		elapsed := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if err := w.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(ms.HeapInuse-base)/(1<<20), "heap-MiB-end")
		b.ReportMetric(float64(peak-base)/(1<<20), "heap-MiB-peak")
		b.ReportMetric(n/elapsed.Seconds(), "records/s")
		var size int64
		files, _ := filepath.Glob(filepath.Join(dir, "*.parquet"))
		for _, f := range files {
			if st, err := os.Stat(f); err == nil {
				size += st.Size()
			}
		}
		b.ReportMetric(float64(size)/n, "bytes/record")
		b.Logf("%d files, %.1f MiB", len(files), float64(size)/(1<<20))
	}
}
