package cluster

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	until(t, 30*time.Second, "the coordinator to report the full store", func() bool {
		return strings.Contains(warnings.String(), "the run is paused") && strings.Contains(warnings.String(), "insufficient resources")
	})
	time.Sleep(2 * time.Second) // long enough for many re-runs, were results re-run
	// A worker takes a sample's epochs at once: it may hold slots-1+epochs.
	if n := logLines(s.Calls); n > slots-1+testEpochs {
		t.Errorf("%d agent calls while the store was full, with %d slots", n, slots)
	}
	if err := c.js.DeleteStream(ctx, fill.CachedInfo().Config.Name); err != nil {
		t.Fatal(err)
	}
	res := await(t, out, 60*time.Second)
	if res.err != nil {
		t.Fatal(res.err)
	}
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Errorf("the worker exited %d:\n%s", code, w.stderr)
	}
	if n, want := logLines(s.Calls), s.Samples*testEpochs; n != want {
		t.Errorf("%d agent calls for %d episodes", n, want)
	}
	checkLog(t, log, s)
	sameReport(t, baseline(t, s), res.rep)
	if !strings.Contains(w.stderr.String(), "keeping them and retrying") {
		t.Errorf("the worker did not say it keeps its results:\n%s", w.stderr)
	}
}
