package cluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// streamsOf lists the server's streams that belong to run id.
func streamsOf(t *testing.T, url, id string) []string {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []string
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		if strings.Contains(name, sanitize(id)) {
			out = append(out, name)
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A completed run removes its streams (the calls stream among them),
// buckets (the rates bucket among them) and object store (-keep keeps
// them), and the embedded server's store and token file.
func TestCompletedRunLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 8}
	srv := startNATS(t)
	for _, keep := range []bool{false, true} {
		log := t.TempDir() + "/run.jsonl"
		o := coordinatorOptions()
		o.NATS, o.Listen, o.Keep = srv.url, "", keep
		c, out := coordinate(t, s, runConfig(log), o)
		w := start(t, s, workerArgs(c, 4)...)
		if res := await(t, out, 60*time.Second); res.err != nil {
			t.Fatal(res.err)
		}
		w.wait(t, 10*time.Second)
		left := streamsOf(t, srv.url, c.RunID())
		if keep && len(left) != 7 || !keep && len(left) != 0 {
			t.Errorf("keep=%v: the run's streams left: %v", keep, left)
		}
	}

	dir := t.TempDir()
	log := dir + "/run.jsonl"
	c, out := coordinate(t, s, runConfig(log), coordinatorOptions())
	if _, err := os.Stat(dir + "/run.nats"); err != nil {
		t.Fatalf("no embedded store beside the log: %v", err)
	}
	w := start(t, s, workerArgs(c, 4)...)
	if res := await(t, out, 60*time.Second); res.err != nil {
		t.Fatal(res.err)
	}
	w.wait(t, 10*time.Second)
	for _, gone := range []string{"run.nats", "run.token"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); err == nil {
			t.Errorf("%s is left after the run completed", gone)
		}
	}
	checkLog(t, log, s)
}

// A coordinator that fails to start (its server is dead; its port is
// taken) leaves no file behind.
func TestFailedStartLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 4}
	taken := startNATS(t)
	for name, o := range map[string]*CoordinatorOptions{
		"dead server": {NATS: "nats://127.0.0.1:1"},
		"port taken":  {Listen: strings.TrimPrefix(taken.url, "nats://")},
	} {
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := StartCoordinator(ctx, testEval(s), runConfig(dir+"/run.jsonl"), o)
		cancel()
		if err == nil {
			t.Fatalf("%s: the coordinator started", name)
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("%s: left %v (%v)", name, names, err)
		}
	}
}

// gc removes the streams of runs that are done (kept with -keep) or
// abandoned, and keeps the others.
func TestGCRemovesFinishedAndAbandonedRuns(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 4}
	srv := startNATS(t)
	o := coordinatorOptions()
	o.NATS, o.Listen, o.Keep = srv.url, "", true
	done, out := coordinate(t, s, runConfig(t.TempDir()+"/done.jsonl"), o)
	w := start(t, s, workerArgs(done, 4)...)
	if res := await(t, out, 60*time.Second); res.err != nil {
		t.Fatal(res.err)
	}
	w.wait(t, 10*time.Second)
	o2 := coordinatorOptions()
	o2.NATS, o2.Listen, o2.Linger = srv.url, "", time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := StartCoordinator(ctx, testEval(s), runConfig(t.TempDir()+"/stopped.jsonl"), o2)
	if err != nil {
		t.Fatal(err)
	}
	cancel() // stopped, no worker: its streams stay, for a resume
	stopped.Wait(ctx)

	gc := start(t, s, "gc", "-nats", srv.url)
	if code := gc.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("gc exited %d:\n%s", code, gc.stderr)
	}
	if left := streamsOf(t, srv.url, done.RunID()); len(left) != 0 {
		t.Errorf("gc left the done run's %v:\n%s", left, gc.stdout)
	}
	if left := streamsOf(t, srv.url, stopped.RunID()); len(left) != 7 {
		t.Errorf("gc removed a stopped run's streams within -idle: %v left\n%s", left, gc.stdout)
	}
	time.Sleep(10 * time.Millisecond)
	gc = start(t, s, "gc", "-nats", srv.url, "-idle", "1ms")
	if code := gc.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("gc -idle 1ms exited %d:\n%s", code, gc.stderr)
	}
	if left := streamsOf(t, srv.url, stopped.RunID()); len(left) != 0 || !slices.ContainsFunc(strings.Split(gc.stdout.String(), "\n"), func(l string) bool { return strings.Contains(l, "removed") }) {
		t.Errorf("gc -idle 1ms left the abandoned run's %v:\n%s", left, gc.stdout)
	}
}

// gc -idle never removes a run a worker serves, however long its
// episodes write nothing: the worker's liveness and the work it holds
// say the run is live.
func TestGCKeepsALiveRunWithLongEpisodes(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 2, Sleep: 3 * time.Second}
	srv := startNATS(t)
	log := t.TempDir() + "/run.jsonl"
	o := coordinatorOptions()
	o.NATS, o.Listen, o.AckWait = srv.url, "", 30*time.Second
	c, out := coordinate(t, s, runConfig(log), o)
	w := start(t, s, workerArgs(c, 6)...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	until(t, 10*time.Second, "the worker running", func() bool {
		p, err := c.Progress(ctx)
		return err == nil && p.Running() > 0
	})
	time.Sleep(1500 * time.Millisecond) // nothing is written while the episodes run
	nc, err := nats.Connect(srv.url)
	require.NoError(t, err)
	defer nc.Close()
	runs, err := GC(ctx, nc, time.Second, false)
	require.NoError(t, err)
	for _, r := range runs {
		if r.Removed {
			t.Errorf("gc -idle 1s removed run %s while its worker ran its episodes (last write %v ago)", r.ID, time.Since(r.LastUse).Round(time.Millisecond))
		}
	}
	finish(t, out, w)
	checkLog(t, log, s)
}
