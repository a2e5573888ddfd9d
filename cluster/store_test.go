package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/internal/distrib"
)

// A full JetStream store refuses results: the worker keeps each one and
// publishes it again later (never running its episode again), takes no
// new work meanwhile, and the coordinator says what holds the run up.
// Once space is freed the run completes, each episode run once.
func TestFullStorePausesTheRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := shape{Samples: 12, Sleep: 20 * time.Millisecond, Calls: dir + "/calls"}
	log := dir + "/run.jsonl"
	var warnings syncBuf
	o := coordinatorOptions()
	o.MaxStore = 1 << 20
	o.Logger = slog.New(slog.NewTextHandler(&warnings, nil))
	c, out := coordinate(t, s, runConfig(log), o)

	// Fill what is left of the store with another stream.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fill, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: "FILL", Subjects: []string{"fill"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 16<<10)
	for {
		if _, err := c.js.Publish(ctx, "fill", chunk); err != nil {
			if !strings.Contains(err.Error(), "insufficient resources") {
				t.Fatalf("filling the store: %v", err)
			}
			break
		}
	}
	const slots = 4
	w := start(t, s, workerArgs(c, slots)...)
	until(t, 30*time.Second, "the worker's first refusal", func() bool { return strings.Contains(w.stderr.String(), "keeping them and retrying") })
	// The coordinator says so within its check's period (2 s) and the
	// worker's report (at once), not once the worker's backoff grew (20 s).
	until(t, 8*time.Second, "the coordinator to report the full store", func() bool {
		return strings.Contains(warnings.String(), "the run is paused") && strings.Contains(warnings.String(), "insufficient resources")
	})
	// And again beside the progress line, every 10 s, while it lasts.
	until(t, 15*time.Second, "the coordinator to say the run is still paused", func() bool {
		return strings.Count(warnings.String(), "the run is paused") >= 2
	})
	// A worker takes a sample's epochs at once: it may hold slots-1+epochs.
	if n := logLines(s.Calls); n > slots-1+testEpochs {
		t.Errorf("%d agent calls while the store was full, with %d slots", n, slots)
	}
	if err := c.js.DeleteStream(ctx, fill.CachedInfo().Config.Name); err != nil {
		t.Fatal(err)
	}
	res := finish(t, out, w)
	if n, want := logLines(s.Calls), s.Samples*testEpochs; n != want {
		t.Errorf("%d agent calls for %d episodes", n, want)
	}
	checkLog(t, log, s)
	sameReport(t, baseline(t, s), res.rep)
	if !strings.Contains(w.stderr.String(), "keeping them and retrying") {
		t.Errorf("the worker did not say it keeps its results:\n%s", w.stderr)
	}
}

// Work for a sample the worker's dataset lacks (here queued behind the
// coordinator's back) is terminated with a warning, and the worker goes
// on: it neither hangs holding it nor ends.
func TestWorkForAMissingSampleIsTerminated(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 12, Sleep: 20 * time.Millisecond}
	log := t.TempDir() + "/run.jsonl"
	o := coordinatorOptions()
	o.ReconcileEvery = time.Hour // the coordinator would purge it
	c, out := coordinate(t, s, runConfig(log), o)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := workMsg{Assignment: distrib.Assignment{SampleID: "nope", Epochs: []int{0}}, Tags: []string{episodeTag(c.tagKey, c.RunID(), "nope", 0)}}
	body, _ := json.Marshal(m)
	if _, err := c.js.Publish(ctx, c.n.workSubject("nope"), body); err != nil {
		t.Fatal(err)
	}
	w := start(t, s, workerArgs(c, 4)...)
	finish(t, out, w)
	if msg := w.stderr.String(); !strings.Contains(msg, "terminating work this worker cannot run") || !strings.Contains(msg, `is not in this worker`) {
		t.Errorf("the worker did not say why it dropped the work:\n%s", msg)
	}
	checkLog(t, log, s)
	info, err := c.work.Info(ctx)
	if err == nil && info.State.Msgs != 0 {
		t.Errorf("%d messages left in the work queue", info.State.Msgs)
	}
}

// A coordinator started again on its log with samples removed from the
// dataset purges the work its predecessor queued for them, and the run
// completes with the samples it has.
func TestRestartWithSamplesRemoved(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 24, Sleep: 20 * time.Millisecond}
	log := t.TempDir() + "/run.jsonl"
	o := coordinatorOptions()
	o.Linger = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	first, err := StartCoordinator(ctx, testEval(s), runConfig(log), o)
	if err != nil {
		t.Fatal(err)
	}
	cancel() // no worker joined: every sample's work stays queued
	if _, err := first.Wait(ctx); err == nil {
		t.Fatal("a stopped coordinator returned no error")
	}
	fewer := s
	fewer.Samples = 16
	var warnings syncBuf
	o2 := coordinatorOptions()
	o2.Logger = slog.New(slog.NewTextHandler(&warnings, nil))
	c, out := coordinate(t, fewer, runConfig(log), o2)
	w := start(t, fewer, workerArgs(c, 4)...)
	finish(t, out, w)
	if n := strings.Count(warnings.String(), "removing queued work for a sample the dataset lacks"); n != 8 {
		t.Errorf("%d removals of the 8 samples' work:\n%s", n, warnings.String())
	}
	if strings.Contains(w.stderr.String(), "terminating work") {
		t.Errorf("the worker was given work for a removed sample:\n%s", w.stderr)
	}
	checkLog(t, log, fewer)
}

// coordinateSlowAck starts a coordinator whose ack wait (2 minutes)
// would fail a test that waited for it, logging to the returned buffer
// (shown when the test fails).
func coordinateSlowAck(t *testing.T, s shape, log string) (*Coordinator, <-chan outcome, *syncBuf) {
	t.Helper()
	var warnings syncBuf
	o := coordinatorOptions()
	o.AckWait = 2 * time.Minute
	o.Logger = slog.New(slog.NewTextHandler(&warnings, nil))
	c, out := coordinate(t, s, runConfig(log), o)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the coordinator's log:\n%s", warnings.String())
		}
	})
	return c, out, &warnings
}

// finishRequeued checks that the run completed as one process's would,
// the coordinator having said why it requeued.
func finishRequeued(t *testing.T, s shape, log string, out <-chan outcome, w *proc, warnings *syncBuf, why string) {
	t.Helper()
	res := finish(t, out, w)
	if !strings.Contains(warnings.String(), why) {
		t.Errorf("the coordinator did not say why it requeued (%q)", why)
	}
	checkLog(t, log, s)
	sameReport(t, baseline(t, s), res.rep)
}

// A killed worker's work is queued again when its liveness entry expires
// (10 s), not after the ack wait (here 2 minutes), and the coordinator
// says so.
func TestKilledWorkersWorkIsRequeuedAtOnce(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 6, Sleep: 2 * time.Second} // a sample's 3 epochs at once: 2 s a message
	log := t.TempDir() + "/run.jsonl"
	c, out, warnings := coordinateSlowAck(t, s, log)
	victim := start(t, s, workerArgs(c, 3)...)
	until(t, 20*time.Second, "the victim's first sample", func() bool { return logLines(log) >= 3 })
	time.Sleep(500 * time.Millisecond) // it holds its second sample, and has said so
	victim.signal(t, syscall.SIGKILL)
	survivor := start(t, s, workerArgs(c, 3)...)
	finishRequeued(t, s, log, out, survivor, warnings, "a worker stopped reporting")
}

// Work a worker took and died before saying so (killed between its fetch
// and its report, or on its way to it) is queued again once no live
// worker says it holds it, not after the ack wait.
func TestWorkTakenByAWorkerThatDiedUnsaidIsRequeued(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 6, Sleep: 20 * time.Millisecond}
	log := t.TempDir() + "/run.jsonl"
	c, out, warnings := coordinateSlowAck(t, s, log)
	nc, js, _ := joinAsWorker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, c.n.work, workConsumer)
	require.NoError(t, err)
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	taken := 0
	for range batch.Messages() {
		taken++
	}
	require.Equal(t, 2, taken, "work fetched")
	nc.Close() // it dies holding them, having said nothing
	w := start(t, s, workerArgs(c, 4)...)
	finishRequeued(t, s, log, out, w, warnings, "no live worker holds")
}

// A worker of a run whose coordinator is started again on its log with
// samples removed says so and leaves, handing back what it holds (it
// would be refused were it joining now), instead of running work the
// coordinator removed; the run completes with a worker of its dataset.
func TestWorkerLeavesARunRestartedWithFewerSamples(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 24, Sleep: 300 * time.Millisecond}
	fewer := s
	fewer.Samples = 16
	log := t.TempDir() + "/run.jsonl"
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	coordinate := []string{"coordinate", "-log", log, "-listen", addr, "-token", "t", "-epochs", strconv.Itoa(testEpochs), "-seed", strconv.Itoa(testSeed)}
	first := start(t, s, coordinate...)
	old := start(t, s, "work", "-join", "nats://"+addr, "-token", "t", "-concurrency", "4", "-wait", "1m")
	until(t, 20*time.Second, "some records", func() bool { return logLines(log) >= 6 })
	first.signal(t, syscall.SIGKILL)
	first.wait(t, 10*time.Second)
	second := start(t, fewer, coordinate...)
	if code := old.wait(t, 20*time.Second); code != 1 || !strings.Contains(old.stderr.String(), "started again with another eval") || !strings.Contains(old.stderr.String(), "dataset samples: 16 for the run, 24 here") {
		t.Errorf("the old dataset's worker exited %d:\n%s", code, old.stderr)
	}
	w := start(t, fewer, "work", "-join", "nats://"+addr, "-token", "t", "-concurrency", "4", "-wait", "1m")
	if code := second.wait(t, 60*time.Second); code != 0 {
		t.Errorf("the coordinator started again exited %d:\n%s", code, second.stderr)
	}
	if code := w.wait(t, 20*time.Second); code != 0 {
		t.Errorf("the worker exited %d:\n%s", code, w.stderr)
	}
}

// A results consumer that stops reading with results waiting (as one the
// server made again on a dead node, which never answers: seen when the
// results stream's leader was SIGKILLed) is replaced, reading on from the
// last result handled: the run ends, each key once. (Stopped before any
// result, the run cannot end without it.)
func TestAStuckResultsConsumerIsReplaced(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 24, Sleep: 20 * time.Millisecond}
	log := t.TempDir() + "/run.jsonl"
	var warnings syncBuf
	o := coordinatorOptions()
	o.Logger = slog.New(slog.NewTextHandler(&warnings, nil))
	c, out := coordinate(t, s, runConfig(log), o)
	c.handleMu.Lock()
	c.cons.Stop() // reads nothing from now on, and says nothing
	c.handleMu.Unlock()
	w := start(t, s, workerArgs(c, 6)...)
	res := finish(t, out, w)
	if !strings.Contains(warnings.String(), "read nothing for 10s with results waiting") {
		t.Errorf("the coordinator did not say it replaced its results consumer:\n%s", warnings.String())
	}
	checkLog(t, log, s)
	sameReport(t, baseline(t, s), res.rep)
}
