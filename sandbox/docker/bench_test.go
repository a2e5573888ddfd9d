package docker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/docker"
)

// BenchmarkForkVsFresh compares getting a ready sandbox per episode by
// forking a provisioned environment (its files and Setup committed once)
// with creating a fresh container from the base image and writing the
// files and running Setup in it, and a fork with Limits.DiskBytes (its
// workspace a tmpfs volume). Close is not timed.
//
//	go test -run '^$' -bench ForkVsFresh -benchtime 10x ./sandbox/docker/
func BenchmarkForkVsFresh(b *testing.B) {
	cli := engine(b)
	p := docker.New(cli, nil)
	defer docker.Cleanup(context.Background(), cli, runID(p))
	ctx := context.Background()
	files := map[string][]byte{"task.txt": []byte("the task\n"), "src/main.sh": []byte("echo hi\n")}
	setup := []sandbox.Cmd{{Args: []string{"sh", "-c", "mkdir -p build && cat task.txt src/main.sh > build/ready"}}}

	bench := func(b *testing.B, env *sandbox.Environment, prepare func(*sandbox.Sandbox)) {
		var times []time.Duration
		for b.Loop() {
			start := time.Now()
			sb, err := env.Fork(ctx)
			if err != nil {
				b.Fatal(err)
			}
			prepare(sb)
			times = append(times, time.Since(start))
			b.StopTimer()
			sb.Close()
			b.StartTimer()
		}
		slices.Sort(times)
		b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
	}

	b.Run("fork", func(b *testing.B) {
		env, err := p.Provision(ctx, sandbox.Spec{Image: testImage, Files: files, Setup: setup})
		if err != nil {
			b.Fatal(err)
		}
		defer env.Close()
		bench(b, env, func(*sandbox.Sandbox) {})
	})
	// A disk limit mounts a tmpfs volume per fork and copies the
	// workspace into it.
	b.Run("fork-disk-limited", func(b *testing.B) {
		env, err := p.Provision(ctx, sandbox.Spec{Image: testImage, Files: files, Setup: setup, Limits: sandbox.Limits{DiskBytes: 64 << 20}})
		if err != nil {
			b.Fatal(err)
		}
		defer env.Close()
		bench(b, env, func(*sandbox.Sandbox) {})
	})
	b.Run("fresh", func(b *testing.B) {
		env, err := p.Provision(ctx, sandbox.Spec{Image: testImage}) // the bare base image
		if err != nil {
			b.Fatal(err)
		}
		defer env.Close()
		bench(b, env, func(sb *sandbox.Sandbox) {
			for name, data := range files {
				if err := sb.WriteFile(ctx, name, data, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			for _, c := range setup {
				if res, err := sb.Exec(ctx, c); err != nil || res.ExitCode != 0 {
					b.Fatalf("setup: %v %+v", err, res)
				}
			}
		})
	})
}
