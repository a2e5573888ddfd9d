package kubernetes_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/docker"
	"github.com/proctor-evals/proctor/sandbox/kubernetes"
	"github.com/proctor-evals/proctor/sandbox/kubernetes/internal/kubetest"
)

// BenchmarkDrivers measures, side by side in one run, Provision (files
// and one Setup command; the environment closed untimed), Fork (a sandbox
// ready for an episode; closed untimed; also from a workspace of 20 MB)
// and an Exec of this driver on the test cluster and of the Docker driver
// on the engine behind it, from the same local image. Each sub-benchmark
// reports its median.
//
//	go test -run '^$' -bench Drivers -benchtime 10x ./
func BenchmarkDrivers(b *testing.B) {
	c := kubetest.Start(b)
	image := kubetest.BusyboxImage(b)
	kp, err := kubernetes.New(kubernetes.Options{Config: c.RESTConfig(), Namespace: c.Namespace(b), NodeSelector: c.NodeSelector()})
	if err != nil {
		b.Fatal(err)
	}
	defer kp.Driver().(*kubernetes.Driver).Cleanup(context.Background())
	dp := docker.New(c.Docker(), nil)
	defer docker.Cleanup(context.Background(), c.Docker(), dp.Driver().(*docker.Driver).RunID())
	ctx := context.Background()
	spec := sandbox.Spec{
		Image: image,
		Files: map[string][]byte{"task.txt": []byte("the task\n"), "src/main.sh": []byte("echo hi\n")},
		Setup: []sandbox.Cmd{{Args: []string{"sh", "-c", "mkdir -p build && cat task.txt src/main.sh > build/ready"}}},
	}
	median := func(b *testing.B, op func() func()) {
		var times []time.Duration
		for b.Loop() {
			start := time.Now()
			release := op()
			times = append(times, time.Since(start))
			b.StopTimer()
			release()
			b.StartTimer()
		}
		slices.Sort(times)
		b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
	}
	for _, d := range []struct {
		name string
		p    *sandbox.Provider
	}{{"docker", dp}, {"kubernetes", kp}} {
		b.Run(d.name+"/provision", func(b *testing.B) {
			median(b, func() func() {
				env, err := d.p.Provision(ctx, spec)
				if err != nil {
					b.Fatal(err)
				}
				return func() { env.Close() }
			})
		})
		b.Run(d.name+"/fork", func(b *testing.B) {
			env, err := d.p.Provision(ctx, spec)
			if err != nil {
				b.Fatal(err)
			}
			defer env.Close()
			median(b, func() func() {
				sb, err := env.Fork(ctx)
				if err != nil {
					b.Fatal(err)
				}
				return func() { sb.Close() }
			})
		})
		// A workspace of 20 MB in 2000 files: the copy a fork costs here
		// (Docker's fork shares the committed image's layers); with a disk
		// limit, a Kubernetes fork's workspace is a tmpfs of that size.
		for _, limit := range []int64{0, 64 << 20} {
			name := "/fork-20MB"
			if limit > 0 {
				name += "-disk-limit"
			}
			b.Run(d.name+name, func(b *testing.B) { forkBig(b, d.p, spec, limit, median) })
		}
		b.Run(d.name+"/exec", func(b *testing.B) {
			sb, err := sandbox.Open(ctx, d.p, spec)
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close()
			median(b, func() func() {
				if res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"cat", "build/ready"}}); err != nil || res.ExitCode != 0 {
					b.Fatalf("%v %+v", err, res)
				}
				return func() {}
			})
		})
	}
}

// forkBig measures forks of an environment whose Setup wrote 20 MB in
// 2000 files to the workspace, under a disk limit of limit bytes if any.
func forkBig(b *testing.B, p *sandbox.Provider, spec sandbox.Spec, limit int64, median func(*testing.B, func() func())) {
	ctx := context.Background()
	spec.Setup = []sandbox.Cmd{{Args: []string{"sh", "-c", "mkdir big && cd big && i=0; while [ $i -lt 2000 ]; do head -c 10000 /dev/urandom > f$i; i=$((i+1)); done"}}}
	spec.Limits.DiskBytes = limit
	env, err := p.Provision(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	median(b, func() func() {
		sb, err := env.Fork(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return func() { sb.Close() }
	})
}
