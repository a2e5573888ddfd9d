package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/internal/distrib"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// joinAsWorker connects to c's embedded server with the workers' token,
// as anyone who holds it could, and collects the server's refusals.
func joinAsWorker(t *testing.T, c *Coordinator) (*nats.Conn, jetstream.JetStream, func() string) {
	t.Helper()
	var mu sync.Mutex
	var errs []string
	nc, err := nats.Connect(c.url, append(workerInbox("a test's worker"), nats.Token(c.srv.token), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		errs = append(errs, err.Error())
		mu.Unlock()
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, func() string {
		nc.Flush()
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(errs, "\n")
	}
}

// A worker's credentials grant a worker's part and nothing else: no
// control message, no write to the run's keys, no read of the queue, of
// others' results or work, or of the key that signs work.
func TestWorkerCredentialsCannotControlOrRead(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 8, Sleep: 20 * time.Millisecond}
	c, out := coordinate(t, s, runConfig(t.TempDir()+"/run.jsonl"), coordinatorOptions())
	nc, js, refusals := joinAsWorker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 500*time.Millisecond) }

	if err := nc.Publish(c.n.control, []byte(`{"op":"done"}`)); err != nil {
		t.Fatal(err)
	}
	until(t, 5*time.Second, "the control publish refused", func() bool {
		return strings.Contains(refusals(), "Permissions Violation for Publish to \""+c.n.control)
	})
	kv, err := js.KeyValue(ctx, c.n.kv)
	if err != nil {
		t.Fatalf("a worker cannot open the run's bucket: %v", err)
	}
	if _, err := kv.Get(ctx, keyManifest); err != nil {
		t.Errorf("a worker cannot read the manifest: %v", err)
	}
	for _, k := range []string{keyDone, keyStop} {
		cctx, ccancel := short()
		if _, err := kv.Put(cctx, k, []byte(`{"reason":"forged"}`)); err == nil {
			t.Errorf("a worker put the run's %s key", k)
		}
		ccancel()
	}
	cctx, ccancel := short()
	if _, err := kv.Get(cctx, keyTagKey); err == nil {
		t.Error("a worker read the key that signs work")
	}
	ccancel()
	work, err := js.Stream(ctx, c.n.work)
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel = short()
	if _, err := work.GetMsg(cctx, 1); err == nil {
		t.Error("a worker read the work queue directly")
	}
	ccancel()
	cctx, ccancel = short()
	if _, err := work.CreateOrUpdateConsumer(cctx, jetstream.ConsumerConfig{Durable: "spy", FilterSubject: c.n.workSubj + ".>"}); err == nil {
		t.Error("a worker made its own consumer of the work queue")
	}
	ccancel()
	cctx, ccancel = short()
	if _, err := js.Publish(cctx, c.n.workSubject("q000"), []byte(`{"sample_id":"q000","epochs":[0],"tags":["x"]}`)); err == nil {
		t.Error("a worker queued work")
	}
	ccancel()
	sub, err := nc.SubscribeSync(c.n.resSubj + ".>")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	until(t, 5*time.Second, "the results subscription refused", func() bool {
		return strings.Contains(refusals(), "Permissions Violation for Subscription to \""+c.n.resSubj)
	})
	// Nor the work delivered to other workers: each has an inbox of its own.
	others, err := nc.SubscribeSync("_INBOX.>")
	if err != nil {
		t.Fatal(err)
	}
	defer others.Unsubscribe()
	until(t, 5*time.Second, "the subscription to every inbox refused", func() bool {
		return strings.Contains(refusals(), `Permissions Violation for Subscription to "_INBOX.>"`)
	})
	cctx, ccancel = short()
	if _, err := js.Stream(cctx, c.n.results); err == nil {
		t.Error("a worker read the results stream's state")
	}
	ccancel()
	cctx, ccancel = short()
	if err := js.DeleteStream(cctx, c.n.results); err == nil {
		t.Error("a worker deleted the results stream")
	}
	ccancel()

	// And the run, none of it having worked, completes with a real worker.
	w := start(t, s, workerArgs(c, 4)...)
	finish(t, out, w)
}

// batchOf is a results message holding r's result with tag.
func batchOf(t *testing.T, tag string, rs ...sink.Record) []byte {
	t.Helper()
	var b []byte
	for _, r := range rs {
		body, err := encodeResult(nil, &distrib.Finished{Record: r})
		if err != nil {
			t.Fatal(err)
		}
		b = appendEntry(b, &entry{SampleID: r.SampleID, Epoch: r.Epoch, Tag: tag, Body: body})
	}
	return b
}

// A result is refused unless it answers work the coordinator queued (its
// tag) and its record could be this eval's: each forgery below, published
// before any worker ran its episode, is dropped, and the episode's real
// result is logged instead.
func TestForgedResultsAreRefused(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 12, Sleep: 20 * time.Millisecond}
	log := t.TempDir() + "/run.jsonl"
	var warnings syncBuf
	o := coordinatorOptions()
	o.Logger = slog.New(slog.NewTextHandler(&warnings, nil))
	c, out := coordinate(t, s, runConfig(log), o)
	_, js, _ := joinAsWorker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tag := func(sample string, epoch int) string { return episodeTag(c.tagKey, c.RunID(), sample, epoch) }
	good := func(sample string, epoch int) sink.Record {
		return sink.Record{Schema: 1, Eval: "cluster-test", SampleID: sample, Epoch: epoch, Status: sink.Pass, Score: 1,
			Input: json.RawMessage(`{"n":` + strings.TrimPrefix(sample, "q00") + `}`), Output: json.RawMessage(`"forged"`), StartedAt: time.Now().UTC()}
	}
	type forgery struct {
		name, sample, tag, why string
		edit                   func(*sink.Record)
	}
	forgeries := []forgery{
		{"no tag", "q000", "", "without the tag", nil},
		{"another episode's tag", "q001", tag("q002", 0), "without the tag", nil},
		{"another eval", "q003", tag("q003", 0), "is of eval", func(r *sink.Record) { r.Eval = "other" }},
		{"negative cost", "q004", tag("q004", 0), "cost_usd -5", func(r *sink.Record) { r.CostUSD = -5 }},
		{"negative tokens", "q005", tag("q005", 0), "input_tokens -1", func(r *sink.Record) { r.InputTokens = -1 }},
		{"score 7", "q006", tag("q006", 0), "score 7", func(r *sink.Record) { r.Score = 7 }},
		{"a foreign input", "q007", tag("q007", 0), "another input", func(r *sink.Record) { r.Input = json.RawMessage(`{"n":99}`) }},
	}
	for _, f := range forgeries {
		r := good(f.sample, 0)
		if f.edit != nil {
			f.edit(&r)
		}
		if _, err := js.Publish(ctx, c.n.resultsSubject("forger"), batchOf(t, f.tag, r)); err != nil {
			t.Fatalf("%s: publishing: %v", f.name, err)
		}
	}
	until(t, 20*time.Second, "the forgeries dropped", func() bool { return strings.Count(warnings.String(), "dropping a result") >= len(forgeries) })
	w := start(t, s, workerArgs(c, 4)...)
	res := finish(t, out, w)
	for _, f := range forgeries {
		if !strings.Contains(warnings.String(), f.why) {
			t.Errorf("%s: no warning says %q:\n%s", f.name, f.why, warnings.String())
		}
	}
	for r, err := range jsonl.Records(log) {
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Output) == `"forged"` {
			t.Errorf("%v: a forged result was logged", r.Key())
		}
	}
	checkLog(t, log, s)
	sameReport(t, baseline(t, s), res.rep)
}

// The first result of an episode in the stream's order is the one logged:
// a later one, in a later batch or later in the same batch (an episode
// run twice: redelivered, or queued again), is dropped.
func TestFirstResultOfAnEpisodeWins(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 6, Sleep: 20 * time.Millisecond}
	log := t.TempDir() + "/run.jsonl"
	c, out := coordinate(t, s, runConfig(log), coordinatorOptions())
	_, js, _ := joinAsWorker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	result := func(sample, output string) sink.Record {
		return sink.Record{Schema: 1, Eval: "cluster-test", SampleID: sample, Epoch: 0, Status: sink.Pass, Score: 1,
			Input: json.RawMessage(`{"n":` + strings.TrimPrefix(sample, "q00") + `}`), Output: json.RawMessage(`"` + output + `"`), StartedAt: time.Now().UTC()}
	}
	tag := func(sample string) string { return episodeTag(c.tagKey, c.RunID(), sample, 0) }
	var first []byte
	first = append(first, batchOf(t, tag("q000"), result("q000", "first"))...)
	first = append(first, batchOf(t, tag("q001"), result("q001", "first"), result("q001", "second"))...)
	for _, b := range [][]byte{first, batchOf(t, tag("q000"), result("q000", "second"))} {
		if _, err := js.Publish(ctx, c.n.resultsSubject("another"), b); err != nil {
			t.Fatal(err)
		}
	}
	w := start(t, s, workerArgs(c, 4)...)
	finish(t, out, w)
	for _, r := range checkLog(t, log, s) {
		if (r.SampleID == "q000" || r.SampleID == "q001") && r.Epoch == 0 && string(r.Output) != `"first"` {
			t.Errorf("%v: logged %s, not the first result sent", r.Key(), r.Output)
		}
	}
}

// A "done" published on the control subject by anyone but the
// coordinator ends no worker: workers act on the done key.
func TestForgedDoneEndsNoWorker(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 24, Sleep: 50 * time.Millisecond}
	srv := startNATS(t) // an external server granting everyone everything
	log := t.TempDir() + "/run.jsonl"
	o := coordinatorOptions()
	o.NATS, o.Listen = srv.url, ""
	c, out := coordinate(t, s, runConfig(log), o)
	w := start(t, s, workerArgs(c, 4)...)
	until(t, 20*time.Second, "some records", func() bool { return logLines(log) >= 8 })
	nc, err := nats.Connect(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Publish(c.n.control, []byte(`{"op":"done"}`)); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	midRun(t, log, s)
	select {
	case <-w.exited:
		t.Fatalf("the worker exited %d on a forged done with %d of %d logged:\n%s", w.code, logLines(log), s.Samples*testEpochs, w.stderr)
	case <-time.After(time.Second):
	}
	finish(t, out, w)
	checkLog(t, log, s)
}

// documentedPermissions reads the permissions docs/distributed.md gives
// each role on an external server ("Worker, publish:" and a fenced block
// of subjects, …), with id in place of <ID>.
func documentedPermissions(t *testing.T, id string) (worker, coordinator *server.Permissions) {
	t.Helper()
	b, err := os.ReadFile("../docs/distributed.md")
	require.NoError(t, err)
	worker = &server.Permissions{Publish: &server.SubjectPermission{}, Subscribe: &server.SubjectPermission{}}
	coordinator = &server.Permissions{Publish: &server.SubjectPermission{}, Subscribe: &server.SubjectPermission{}}
	lists := map[string]*[]string{
		"Worker, publish:": &worker.Publish.Allow, "Worker, deny publish:": &worker.Publish.Deny, "Worker, subscribe:": &worker.Subscribe.Allow,
		"Coordinator, publish:": &coordinator.Publish.Allow, "Coordinator, subscribe:": &coordinator.Subscribe.Allow,
	}
	var into *[]string
	fenced := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "```":
			if fenced {
				into = nil
			}
			fenced = !fenced && into != nil
		case fenced:
			*into = append(*into, strings.ReplaceAll(line, "<ID>", id))
		case lists[line] != nil:
			into = lists[line]
			require.Empty(t, *into, "docs/distributed.md gives %q twice", line)
		}
	}
	for heading, l := range lists {
		require.NotEmpty(t, *l, "docs/distributed.md gives no subjects after %q", heading)
	}
	return worker, coordinator
}

// The permissions docs/distributed.md gives each role on an external
// server are the embedded server's, and enough for a run; a process
// holding the workers' reads neither the key that signs work nor any
// result (both travel to the coordinator's inbox, which it may not
// subscribe to), so a result it forges with all it received is dropped;
// and `*` in place of the run ID (whole tokens only) fails a worker with
// the subject it was refused, not with "not on this server".
func TestDocumentedPermissionsHold(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 8, Sleep: 10 * time.Millisecond, Big: 600_000} // large results use the object store
	n := namesFor("r1")
	workerPerms, coordPerms := documentedPermissions(t, n.id)
	if d := cmp.Diff(workerPermissions(n), workerPerms); d != "" {
		t.Errorf("docs/distributed.md's worker permissions are not the embedded server's (-embedded +docs):\n%s", d)
	}
	starPerms, _ := documentedPermissions(t, "*")
	srv := startNATSWith(t, func(o *serverOptions) {
		o.Users = []*server.User{
			{Username: "coord", Password: "c-pw", Permissions: coordPerms},
			{Username: "work", Password: "w-pw", Permissions: workerPerms},
			{Username: "star", Password: "s-pw", Permissions: starPerms},
		}
	})
	as := func(user, pw string) string { return strings.Replace(srv.url, "nats://", "nats://"+user+":"+pw+"@", 1) }

	// A process with the workers' credentials listens on every subject
	// they allow before the coordinator starts, and tries the coordinator's
	// inbox and everything.
	spy, err := nats.Connect(as("work", "w-pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	require.NoError(t, err)
	t.Cleanup(spy.Close)
	var mu sync.Mutex
	var heard []*nats.Msg
	for _, subj := range append(workerPerms.Subscribe.Allow, coordinatorInbox+".>", ">") {
		_, err := spy.Subscribe(subj, func(m *nats.Msg) {
			mu.Lock()
			heard = append(heard, m)
			mu.Unlock()
		})
		require.NoError(t, err)
	}
	require.NoError(t, spy.Flush())

	log := t.TempDir() + "/run.jsonl"
	cfg := runConfig(log)
	cfg.RunID = "r1"
	o := coordinatorOptions()
	o.NATS, o.Listen = as("coord", "c-pw"), ""
	c, out := coordinate(t, s, cfg, o)

	star := start(t, s, "work", "-join", as("star", "s-pw"), "-run-id", "r1", "-concurrency", "4")
	if code := star.wait(t, 20*time.Second); code == 0 || !strings.Contains(star.stderr.String(), "Permissions Violation") || strings.Contains(star.stderr.String(), "not on this server") {
		t.Errorf("a worker granted `*` for the run ID exited %d, without naming the subject refused:\n%s", code, star.stderr)
	}

	// What the spy heard signs no forged result.
	mu.Lock()
	var keys [][]byte
	for _, m := range heard {
		if bytes.Contains(m.Data, c.tagKey) {
			t.Errorf("a worker's credentials received the key that signs work on %s", m.Subject)
		}
		if strings.HasPrefix(m.Reply, "$JS.ACK."+n.results+".") {
			t.Errorf("a worker's credentials received a result on %s", m.Subject)
		}
		if len(m.Data) == len(c.tagKey) {
			keys = append(keys, m.Data)
		}
	}
	mu.Unlock()
	js, err := jetstream.New(spy)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, key := range append(keys, nil) {
		for i := range s.Samples {
			id := fmt.Sprintf("q%03d", i)
			r := sink.Record{Schema: 1, Eval: "cluster-test", SampleID: id, Status: sink.Pass, Score: 1,
				Input: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`), Output: json.RawMessage(`"forged"`), StartedAt: time.Now().UTC()}
			_, err := js.Publish(ctx, n.resultsSubject("spy"), batchOf(t, episodeTag(key, "r1", id, 0), r))
			require.NoError(t, err)
		}
	}

	w := start(t, s, "work", "-join", as("work", "w-pw"), "-run-id", "r1", "-concurrency", "4")
	res := finish(t, out, w)
	if msg := w.stderr.String(); strings.Contains(msg, "ermission") {
		t.Errorf("the worker was refused something:\n%s", msg)
	}
	for _, r := range checkLog(t, log, s) {
		if string(r.Output) == `"forged"` {
			t.Errorf("%v: a forged result was committed", r.Key())
		}
	}
	sameReport(t, baseline(t, s), res.rep)
}
