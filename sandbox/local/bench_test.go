package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/local"
)

// makeTree writes files files totalling size bytes under dir, 100 per
// directory.
func makeTree(b *testing.B, dir string, files, size int) {
	b.Helper()
	data := make([]byte, size/files)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for i := range files {
		d := filepath.Join(dir, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		data[0] = byte(i) // not all identical
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.txt", i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFork measures one fork of a provisioned 150 MB, 12,000-file
// tree, by each method this host supports (DESIGN P5: ≤ 10 ms median).
// Close is not timed. The median-ms metric is the median fork time.
//
//	go test -run '^$' -bench BenchmarkFork -benchtime 20x ./sandbox/local/
func BenchmarkFork(b *testing.B) {
	tmpl := b.TempDir()
	makeTree(b, tmpl, 12000, 150<<20)
	for _, m := range []local.Method{local.Overlay, local.Reflink, local.Copy} {
		b.Run(string(m), func(b *testing.B) {
			p := local.New(&local.Options{Dir: b.TempDir(), Method: m})
			if p.Driver().(*local.Driver).Method() == "" {
				b.Skipf("%s does not work on this host", m)
			}
			ctx := context.Background()
			env, err := p.Provision(ctx, sandbox.Spec{Template: tmpl})
			if err != nil {
				b.Fatal(err)
			}
			defer env.Close()
			var times []time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				sb, err := env.Fork(ctx)
				if err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
				b.StopTimer()
				sb.Close()
				b.StartTimer()
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
		})
	}
}
