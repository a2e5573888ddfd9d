package cluster

// Benchmarks, as ratios against eval.Run in the same process and session:
//
//	go test ./cluster -run X -bench . -benchtime 1x
//
// Each iteration is a whole run: a coordinator in this process (embedded
// server, sync_always unless the name says sync50ms) and workers as child
// processes, started before the coordinator (they wait for it: -wait).
// eps is episodes per second from the first committed record to the last
// (the steady rate); wall_s runs from the coordinator's start (workers
// joining included) to the last record, first_s to the first; x_ideal is
// wall_s over episodes × duration ÷ slots; results/msg is the results a
// batch carries on average; coord_cpu_s is this process's CPU time
// (coordinator and embedded server), workers_cpu_s the workers'.
//
// The large run is a documented command, not CI:
//
//	PROCTOR_BENCH_LARGE=1 go test ./cluster -run X -bench Large -benchtime 1x -timeout 10m

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func BenchmarkNoOp(b *testing.B) {
	s := shape{Samples: 8000} // × 3 epochs: 24,000 episodes
	b.Run("run", func(b *testing.B) { benchRun(b, s, 64) })
	for _, n := range []int{1, 2, 4} {
		b.Run("workers="+strconv.Itoa(n), func(b *testing.B) { benchCluster(b, s, n, 64, 0) })
	}
	b.Run("workers=4/sync50ms", func(b *testing.B) { benchCluster(b, s, 4, 64, 50*time.Millisecond) })
}

// BenchmarkLatency: 20,000 episodes of 200 ms on 4 workers × 250 slots;
// the ideal is 4 s.
func BenchmarkLatency(b *testing.B) {
	s := shape{Samples: 6667, Sleep: 200 * time.Millisecond} // 20,001 episodes
	b.Run("run", func(b *testing.B) { benchRun(b, s, 1000) })
	b.Run("workers=4", func(b *testing.B) { benchCluster(b, s, 4, 250, 0) })
	b.Run("workers=4/sync50ms", func(b *testing.B) { benchCluster(b, s, 4, 250, 50*time.Millisecond) })
}

// BenchmarkLarge: 100,000 episodes of 1 s on 16 workers × 1,000 slots
// (the ideal is 100,000 / 16,000 × 1 s ≈ 6.3 s).
func BenchmarkLarge(b *testing.B) {
	if os.Getenv("PROCTOR_BENCH_LARGE") != "1" {
		b.Skip("set PROCTOR_BENCH_LARGE=1: 16 worker processes, 100k episodes")
	}
	s := shape{Samples: 33334, Sleep: time.Second}
	b.Run("workers=16", func(b *testing.B) { benchCluster(b, s, 16, 1000, 0) })
	b.Run("workers=16/sync50ms", func(b *testing.B) { benchCluster(b, s, 16, 1000, 50*time.Millisecond) })
}

func benchRun(b *testing.B, s shape, concurrency int) {
	e := testEval(s)
	for b.Loop() {
		cfg := runConfig(b.TempDir() + "/run.jsonl")
		cfg.Concurrency = concurrency
		cpu := cpuTime()
		start := time.Now()
		if _, err := e.Run(context.Background(), cfg); err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start)
		b.ReportMetric(float64(s.Samples*testEpochs)/wall.Seconds(), "eps")
		b.ReportMetric(wall.Seconds(), "wall_s")
		if s.Sleep > 0 {
			b.ReportMetric(wall.Seconds()/(float64(s.Samples*testEpochs)*s.Sleep.Seconds()/float64(concurrency)), "x_ideal")
		}
		b.ReportMetric((cpuTime() - cpu).Seconds(), "coord_cpu_s")
	}
}

func benchCluster(b *testing.B, s shape, workers, concurrency int, syncEvery time.Duration) {
	e := testEval(s)
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		listen := "127.0.0.1:" + strconv.Itoa(freePort(b))
		children := childCPU()
		var procs []*proc
		for range workers {
			procs = append(procs, start(b, s, "work", "-join", "nats://"+listen, "-token", "t", "-concurrency", strconv.Itoa(concurrency), "-wait", "1m"))
		}
		b.StartTimer()
		cpu := cpuTime()
		begin := time.Now()
		c, err := StartCoordinator(context.Background(), e, runConfig(dir+"/run.jsonl"),
			&CoordinatorOptions{Listen: listen, Token: "t", SyncEvery: syncEvery, Linger: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		var first time.Time
		var firstDone int64
		tick := time.NewTicker(time.Millisecond)
	wait:
		for {
			select {
			case <-c.rec.Complete():
				break wait
			case <-tick.C:
				if first.IsZero() {
					if d := c.rec.Stats().Done; d > 0 {
						first, firstDone = time.Now(), d
					}
				}
			}
		}
		end := time.Now()
		tick.Stop()
		b.StopTimer()
		if _, err := c.Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(c.rec.Stats().Total-firstDone)/end.Sub(first).Seconds(), "eps")
		b.ReportMetric(end.Sub(begin).Seconds(), "wall_s")
		b.ReportMetric(first.Sub(begin).Seconds(), "first_s")
		if s.Sleep > 0 {
			ideal := float64(s.Samples*testEpochs) * s.Sleep.Seconds() / float64(workers*concurrency)
			b.ReportMetric(end.Sub(begin).Seconds()/ideal, "x_ideal")
		}
		b.ReportMetric((cpuTime() - cpu).Seconds(), "coord_cpu_s")
		b.ReportMetric(float64(c.rec.Stats().Total)/float64(c.seen.Load()), "results/msg")
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		b.ReportMetric(float64(ru.Maxrss)/1024, "coord_maxrss_MB")
		for _, p := range procs {
			p.wait(b, 20*time.Second)
		}
		b.ReportMetric((childCPU() - children).Seconds(), "workers_cpu_s")
		b.StartTimer()
	}
}

// childCPU is the CPU time of the child processes waited for.
func childCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkKilledWorker: 6,000 episodes of 20 ms on 2 workers × 8 slots,
// one of them SIGKILLed 4 s in; the ideal, had the killed worker's work
// been run by the other from the moment it died, is about 11 s (4 s on
// 16 slots, the rest on 8). wall_s shows what waiting for the ack wait
// (30 s, the default) costs.
func BenchmarkKilledWorker(b *testing.B) {
	s := shape{Samples: 2000, Sleep: 20 * time.Millisecond} // × 3 epochs
	e := testEval(s)
	for b.Loop() {
		dir := b.TempDir()
		listen := "127.0.0.1:" + strconv.Itoa(freePort(b))
		var procs []*proc
		for range 2 {
			procs = append(procs, start(b, s, "work", "-join", "nats://"+listen, "-token", "t", "-concurrency", "8", "-wait", "1m"))
		}
		begin := time.Now()
		c, err := StartCoordinator(context.Background(), e, runConfig(dir+"/run.jsonl"), &CoordinatorOptions{Listen: listen, Token: "t", Linger: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		kill := time.AfterFunc(4*time.Second, func() { procs[0].cmd.Process.Kill() })
		waited := make(chan error, 1)
		go func() {
			_, err := c.Wait(context.Background())
			waited <- err
		}()
		<-c.rec.Complete()
		wall := time.Since(begin)
		kill.Stop()
		if err := <-waited; err != nil {
			b.Fatal(err)
		}
		procs[1].wait(b, 20*time.Second)
		b.ReportMetric(wall.Seconds(), "wall_s")
	}
}
