// Loadtest measures proctor's orchestration overhead: a simulated agent that
// only waits a fixed latency, an exact-match judge and the JSONL log, the
// workload of the peer baseline in shared/bench (the asyncio recipe).
//
//	go run ./examples/loadtest -n 100000 -c 5000 -latency 50ms -log /tmp/load.jsonl
//
// Running it again with the same -log resumes: only missing episodes run.
// With -stream the samples are made as the engine reads them (a
// dataset.Func, which it streams) instead of held in a slice.
// It prints one JSON line: episodes, wall_s, episodes_per_s, peak_rss_mb…
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"io"
	"iter"
	"log"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/scorer"
)

// Task is the baseline's task: "what is i+1?".
type Task struct {
	Prompt   string `json:"prompt"`
	Expected string `json:"expected"`
}

func main() {
	n := flag.Int("n", 100_000, "episodes: n/epochs samples × epochs")
	epochs := flag.Int("epochs", 1, "epochs per sample")
	c := flag.Int("c", 5000, "concurrency")
	latency := flag.Duration("latency", 50*time.Millisecond, "simulated agent latency")
	logPath := flag.String("log", "", "JSONL log (resumes when it exists); default: none")
	quiet := flag.Bool("quiet", false, "no progress line on stderr")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	stream := flag.Bool("stream", false, "make each sample as the engine reads it (a dataset.Func, which the engine streams) instead of holding them all in a slice")
	flag.Parse()

	if *epochs < 1 || *n%*epochs != 0 {
		log.Fatalf("-n %d is not a multiple of -epochs %d", *n, *epochs)
	}
	sample := func(i int) dataset.Sample[Task] {
		return dataset.Sample[Task]{ID: "t" + strconv.Itoa(i),
			Input: Task{Prompt: "what is " + strconv.Itoa(i) + "+1?", Expected: strconv.Itoa(i + 1)}}
	}
	var samples dataset.Dataset[Task]
	if *stream {
		samples = dataset.Func[Task](func(context.Context) iter.Seq2[dataset.Sample[Task], error] {
			return func(yield func(dataset.Sample[Task], error) bool) {
				for i := range *n / *epochs {
					if !yield(sample(i), nil) {
						return
					}
				}
			}
		})
	} else {
		d := make(dataset.Slice[Task], *n / *epochs)
		for i := range d {
			d[i] = sample(i)
		}
		samples = d
	}
	start := time.Now()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	var firstEpisode atomic.Int64 // ns from start to the first episode this process ran
	agent := harness.Func[Task, string](func(ctx context.Context, ep *harness.Episode[Task]) (string, error) {
		if firstEpisode.Load() == 0 {
			firstEpisode.CompareAndSwap(0, int64(time.Since(start)))
		}
		if *latency > 0 {
			t := time.NewTimer(*latency)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return "", ctx.Err()
			}
		}
		x, _ := strconv.Atoi(strings.TrimSuffix(strings.Fields(ep.Sample.Input.Prompt)[2], "+1?"))
		return strconv.Itoa(x + 1), nil
	})
	e := &eval.Eval[Task, string]{
		Name:    "loadtest",
		Dataset: samples,
		Harness: agent,
		Judge:   scorer.Exact(func(t Task) string { return t.Expected }),
	}
	// Ctrl-C stops gracefully (run again with the same log to resume);
	// a second Ctrl-C exits at once.
	ctx, stop := eval.InterruptContext(context.Background())
	defer stop()
	rep, err := e.Run(ctx, eval.Config{
		Concurrency: *c, Epochs: *epochs, Log: *logPath, Quiet: *quiet,
		Report: report.Options{Resamples: -1},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	wall := time.Since(start).Seconds()
	ran := rep.Episodes - rep.Resumed
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"episodes":        ran,
		"resumed":         rep.Resumed,
		"first_episode_s": round(time.Duration(firstEpisode.Load()).Seconds()),
		"passed":          rep.Passed,
		"wall_s":          round(wall),
		"episodes_per_s":  round(float64(ran) / wall),
		"peak_rss_mb":     round(peakRSSMB()),
	})
}

func round(f float64) float64 { return float64(int64(f*1000)) / 1000 }

// peakRSSMB reads the process's high-water resident set size (Linux).
func peakRSSMB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(io.LimitReader(f, 1<<16))
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}
