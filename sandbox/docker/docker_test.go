package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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

// Limits.DiskBytes bounds the workspace of every fork (a tmpfs volume),
// which still holds what the template and Setup put there and still
// works through the file API; the conformance suite checks the claim too.
func TestDiskLimit(t *testing.T) {
	cli := engine(t)
	p := docker.New(cli, nil)
	t.Cleanup(func() { docker.Cleanup(context.Background(), cli, runID(p)) })
	if !p.Guarantees().Disk {
		t.Error("Disk not claimed")
	}
	tmpl := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmpl, "from-template"), []byte("t"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{
		Image: testImage, Template: tmpl, WorkDir: "/work/space",
		Setup:  []sandbox.Cmd{{Args: []string{"sh", "-c", "mkdir sub && echo s > sub/from-setup && chmod 700 ."}}},
		Limits: sandbox.Limits{DiskBytes: 4 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for name, want := range map[string]string{"from-template": "t", "sub/from-setup": "s\n"} {
		if got, err := sb.ReadFile(ctx, name); err != nil || string(got) != want {
			t.Errorf("ReadFile %s = %q, %v; want %q", name, got, err, want)
		}
	}
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"sh", "-c", "stat -c %a . && head -c 1048576 /dev/zero > one && echo one-ok && head -c 16777216 /dev/zero > big; rc=$?; rm -f big; exit $rc"}})
	if err != nil {
		t.Fatal(err)
	}
	if out := string(res.Stdout); out != "700\none-ok\n" || res.ExitCode == 0 {
		t.Errorf("exit %d, stdout %q, stderr %q: want the workspace's mode, 1 MiB written and 16 MiB refused under a 4 MiB limit", res.ExitCode, out, res.Stderr)
	}
	if err := sb.WriteFile(ctx, "small", []byte("x"), 0o644); err != nil {
		t.Errorf("WriteFile within the limit: %v", err)
	}
	if err := sb.WriteFile(ctx, "big2", make([]byte, 16<<20), 0o644); err == nil {
		t.Error("WriteFile of 16 MiB under a 4 MiB limit succeeded")
	}
	// The workspace volume goes with its container.
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	vols, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", docker.LabelRun+"="+runID(p))})
	if err != nil {
		t.Fatal(err)
	}
	if len(vols.Items) > 0 {
		t.Errorf("%d volumes left after Close", len(vols.Items))
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

// Cleanup removes a workspace volume the engine kept (its container gone
// in a crash), as it removes containers and images.
func TestCleanupRemovesVolumes(t *testing.T) {
	cli := engine(t)
	ctx := context.Background()
	runID := "cleanup-volumes-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	_, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Labels: map[string]string{docker.LabelRun: runID, docker.LabelRole: "workspace"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := docker.Cleanup(ctx, cli, runID); err != nil {
		t.Fatal(err)
	}
	vols, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", docker.LabelRun+"="+runID)})
	if err != nil {
		t.Fatal(err)
	}
	if len(vols.Items) > 0 {
		t.Errorf("%d volumes left after Cleanup", len(vols.Items))
	}
}
