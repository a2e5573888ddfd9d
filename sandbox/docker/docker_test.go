package docker_test

import (
	"context"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/docker"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

const testImage = "proctor-test-busybox:latest"

var (
	setupOnce sync.Once
	setupCli  *client.Client
	setupErr  string
)

// engine returns a client to a reachable engine with the test image built,
// or skips (fails, with PROCTOR_REQUIRE_DOCKER=1).
func engine(tb testing.TB) *client.Client {
	tb.Helper()
	setupOnce.Do(func() {
		if _, err := os.Stat(docker.BusyboxPath); err != nil {
			setupErr = "no busybox-static binary at " + docker.BusyboxPath + " (apt-get install busybox-static): " + err.Error()
			return
		}
		cli, err := docker.NewClient()
		if err != nil {
			setupErr = "no Docker client: " + err.Error()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
			setupErr = "no Docker engine reachable: " + err.Error()
			return
		}
		if err := docker.BuildBusyboxImage(ctx, cli, testImage, docker.BusyboxPath); err != nil {
			setupErr = "building the busybox test image: " + err.Error()
			return
		}
		setupCli = cli
	})
	if setupCli == nil {
		if os.Getenv("PROCTOR_REQUIRE_DOCKER") == "1" {
			tb.Fatalf("PROCTOR_REQUIRE_DOCKER=1 but %s", setupErr)
		}
		tb.Skip(setupErr)
	}
	return setupCli
}

func TestConformance(t *testing.T) {
	cli := engine(t)
	p := docker.New(cli, nil)
	t.Cleanup(func() {
		// Bounded: a wedged engine must fail the test, not hang it.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := docker.Cleanup(ctx, cli, runID(p)); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	opts := &sandboxtest.Options{Spec: sandbox.Spec{Image: testImage}}
	if runtime.GOOS != "linux" {
		// The probe is built for the host; the containers run Linux.
		opts.Without = []sandboxtest.Feature{sandboxtest.Binaries}
	}
	sandboxtest.Run(t, p, opts)
}

func runID(p *sandbox.Provider) string { return p.Driver().(*docker.Driver).RunID() }

// The driver claims no disk limit: the engine enforces one only with some
// storage drivers.
func TestGuaranteesDoNotClaimDisk(t *testing.T) {
	if docker.New(nil, nil).Guarantees().Disk {
		t.Fatal("Disk claimed")
	}
}

func TestRemovedContainerIsUnavailable(t *testing.T) {
	cli := engine(t)
	p := docker.New(cli, nil)
	defer docker.Cleanup(context.Background(), cli, runID(p))
	ctx := context.Background()
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// Remove the container behind the sandbox's back, as a crash would.
	if err := docker.Cleanup(ctx, cli, runID(p)); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Exec":      func() error { _, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"true"}}); return err }(),
		"ReadFile":  func() error { _, err := sb.ReadFile(ctx, "f"); return err }(),
		"WriteFile": sb.WriteFile(ctx, "f", []byte("x"), 0o644),
	} {
		if !errorsIs(err, sandbox.ErrUnavailable) {
			t.Errorf("%s after removal: %v, want ErrUnavailable", name, err)
		}
	}
}
