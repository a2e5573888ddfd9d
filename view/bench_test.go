package view_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/benchlog"
	"github.com/proctor-evals/proctor/view"
)

// writeLog1M writes the 1M-record log of the scale target (benchlog.Write1M).
func writeLog1M(b *testing.B, path string) { writeLog(b, path, 100_000, 10) }

// writeLog writes a log of samples × epochs records as writeLog1M does.
func writeLog(b *testing.B, path string, samples, epochs int) {
	if err := benchlog.Write(path, samples, epochs); err != nil {
		b.Fatal(err)
	}
}

// cpuSeconds is the user and system CPU time the process has used: on a
// shared machine, wall time says more about the neighbours.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// peakRSS is the process's peak resident set (VmHWM), in MB.
func peakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

// BenchmarkOpen1M is the viewer's scale target: a 1M-record log opened
// (read, folded, the run page rendered) within 2 s, the server well under
// 500 MB. Side by side: the text report of the same log, as `proctor
// report` computes it, and a sample page on the open log. Run with
//
//	go test ./view -run X -bench Open1M -benchtime 3x
//
// The log is generated first (about 10 s).
func BenchmarkOpen1M(b *testing.B) {
	dir := b.TempDir()
	log := filepath.Join(dir, "bench.jsonl")
	writeLog1M(b, log)
	st, _ := os.Stat(log)
	b.Logf("log: %d MB", st.Size()>>20)
	b.Run("viewer", func(b *testing.B) {
		// MB-peak-RSS is the process's, the log's generation included;
		// MB-peak-RSS-view, the viewer's alone, from a peak reset here.
		runtime.GC()
		debug.FreeOSMemory()
		viewOnly := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
		var retained uint64
		cpu := cpuSeconds()
		for range b.N {
			v, err := view.New([]string{log}, nil)
			if err != nil {
				b.Fatal(err)
			}
			rec := httptest.NewRecorder()
			v.ServeHTTP(rec, httptest.NewRequest("GET", "/run/bench.jsonl", nil))
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), `<span id="done">1000000</span>`) {
				b.Fatalf("%d: the page does not show 1M episodes", rec.Code)
			}
			b.StopTimer()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			retained = ms.HeapAlloc
			runtime.KeepAlive(v)
			b.StartTimer()
		}
		b.ReportMetric((cpuSeconds()-cpu)/float64(b.N), "cpu-s/op")
		b.ReportMetric(float64(retained)/(1<<20), "MB-heap-after")
		if viewOnly {
			b.ReportMetric(peakRSS(), "MB-peak-RSS-view")
		} else {
			b.ReportMetric(peakRSS(), "MB-peak-RSS")
		}
	})
	b.Run("sample-page", func(b *testing.B) {
		v, err := view.New([]string{log}, nil)
		if err != nil {
			b.Fatal(err)
		}
		v.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/run/bench.jsonl", nil))
		b.ResetTimer()
		for i := range b.N {
			rec := httptest.NewRecorder()
			v.ServeHTTP(rec, httptest.NewRequest("GET", fmt.Sprintf("/sample/bench.jsonl?s=t%d", i*7919%100_000), nil))
			if rec.Code != 200 || strings.Count(rec.Body.String(), `class="episode"`) != 10 {
				b.Fatalf("%d: not 10 epochs", rec.Code)
			}
		}
	})
	b.Run("text-report", func(b *testing.B) {
		cpu := cpuSeconds()
		for range b.N {
			rep, err := report.FromLog(log, nil) // what proctor report does
			if err != nil || rep.Episodes != 1_000_000 {
				b.Fatal(err)
			}
		}
		b.ReportMetric((cpuSeconds()-cpu)/float64(b.N), "cpu-s/op")
	})
}

// BenchmarkReport1M is `proctor report` (report.FromLog: read, decode,
// fold, report) of the two shapes of a million records whose folds cost
// differently: 100k samples × 10 epochs (the scale target's log: a fold
// per record) and 1M distinct samples × 1 epoch, as a log of production
// traces or examples/loadtest writes (every record a sample new to the
// report). Run with
//
//	go test ./view -run X -bench Report1M -benchtime 3x -count 5
//
// Each log is written first (about 10 s each). MB-peak-RSS is the
// process's peak from the start of the sub-benchmark (the logs' writing
// left out), where /proc/self/clear_refs can reset it.
func BenchmarkReport1M(b *testing.B) {
	dir := b.TempDir()
	for _, shape := range []struct {
		name            string
		samples, epochs int
	}{
		{"100k-samples-x10", 100_000, 10},
		{"1M-samples-x1", 1_000_000, 1},
	} {
		log := filepath.Join(dir, shape.name+".jsonl")
		writeLog(b, log, shape.samples, shape.epochs)
		b.Run(shape.name, func(b *testing.B) {
			runtime.GC()
			debug.FreeOSMemory()
			reset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
			cpu := cpuSeconds()
			b.ResetTimer()
			for range b.N {
				rep, err := report.FromLog(log, nil)
				if err != nil || rep.Episodes != 1_000_000 || rep.Samples != shape.samples {
					b.Fatalf("%v: %d episodes of %d samples", err, rep.Episodes, rep.Samples)
				}
			}
			b.ReportMetric((cpuSeconds()-cpu)/float64(b.N), "cpu-s/op")
			if reset {
				b.ReportMetric(peakRSS(), "MB-peak-RSS")
			}
		})
	}
}
