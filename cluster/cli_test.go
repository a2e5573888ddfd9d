package cluster

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// printedJoin returns the work command a coordinator process printed.
func printedJoin(t *testing.T, p *proc) string {
	t.Helper()
	var line string
	until(t, 20*time.Second, "the printed work command", func() bool {
		_, rest, printed := strings.Cut(p.stderr.String(), "workers join with:\n  ")
		var ended bool
		line, _, ended = strings.Cut(rest, "\n")
		return printed && ended
	})
	return line
}

// The embedded coordinator makes the workers' token once, in a file
// beside the log only its user reads, and prints a command that names the
// file, never the token; that command, run as printed, joins the run.
func TestPrintedWorkCommandHoldsNoSecret(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 8, Sleep: 10 * time.Millisecond}
	dir := t.TempDir()
	log := dir + "/run.jsonl"
	coord := start(t, s, "coordinate", "-log", log, "-listen", "127.0.0.1:0", "-epochs", strconv.Itoa(testEpochs),
		"-seed", strconv.Itoa(testSeed), "-json", "-quiet")
	line := printedJoin(t, coord)
	tokenFile := dir + "/run.token"
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if st, err := os.Stat(tokenFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the token file's mode is %v, want 0600 (%v)", st.Mode().Perm(), err)
	}
	if strings.Contains(coord.stderr.String(), token) {
		t.Fatalf("the coordinator printed the token:\n%s", coord.stderr)
	}
	prefix := "PROCTOR_TOKEN=$(cat " + tokenFile + ") proctor-cluster-test "
	args, ok := strings.CutPrefix(line, prefix)
	if !ok {
		t.Fatalf("the printed command %q does not start with %q", line, prefix)
	}
	w := startEnv(t, s, []string{"PROCTOR_TOKEN=" + token}, strings.Fields(args)...)
	if code := coord.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("the coordinator exited %d:\n%s", code, coord.stderr)
	}
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Errorf("the worker exited %d:\n%s", code, w.stderr)
	}
	checkLog(t, log, s)
}

// With -nats, the token comes from $PROCTOR_TOKEN (it was ignored), and
// the printed command carries neither it nor the URL's credentials, but
// the paths of the workers' credentials and CA.
func TestExternalServerTakesTheTokenFromTheEnvironment(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 8, Sleep: 10 * time.Millisecond}
	srv := startNATSWith(t, func(o *serverOptions) { o.Authorization = "sesame" })
	log := t.TempDir() + "/run.jsonl"
	coord := startEnv(t, s, []string{"PROCTOR_TOKEN=sesame"}, "coordinate", "-log", log, "-nats", srv.url, "-epochs", strconv.Itoa(testEpochs),
		"-seed", strconv.Itoa(testSeed), "-worker-creds", "/etc/proctor/worker.creds", "-json", "-quiet")
	line := printedJoin(t, coord)
	if strings.Contains(coord.stderr.String(), "sesame") || !strings.Contains(line, " -creds /etc/proctor/worker.creds") {
		t.Errorf("printed: %q", line)
	}
	if !strings.Contains(coord.stderr.String(), "with $PROCTOR_TOKEN set") {
		t.Errorf("the coordinator does not say where the token goes:\n%s", coord.stderr)
	}
	w := startEnv(t, s, []string{"PROCTOR_TOKEN=sesame"}, "work", "-join", srv.url, "-run-id", runIDOf(t, line), "-concurrency", "4")
	if code := coord.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("the coordinator exited %d:\n%s", code, coord.stderr)
	}
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Errorf("the worker exited %d:\n%s", code, w.stderr)
	}
	checkLog(t, log, s)

	// A token in the URL is not printed either.
	log2 := t.TempDir() + "/run.jsonl"
	withURL := start(t, s, "coordinate", "-log", log2, "-nats", strings.Replace(srv.url, "nats://", "nats://sesame@", 1), "-json", "-quiet")
	if line := printedJoin(t, withURL); strings.Contains(line, "sesame") || !strings.Contains(line, " -join "+srv.url+" ") {
		t.Errorf("printed: %q", line)
	}
}

func runIDOf(t *testing.T, line string) string {
	t.Helper()
	_, rest, ok := strings.Cut(line, " -run-id ")
	if !ok {
		t.Fatalf("no -run-id in %q", line)
	}
	id, _, _ := strings.Cut(rest, " ")
	return id
}

// Flags of the embedded server are refused with -nats, not ignored; work
// -h lists a worker's flags only.
func TestFlagsThatDoNotApplyAreRefused(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 2}
	for _, flag := range [][]string{{"-sync-every", "50ms"}, {"-store", "/tmp/x"}, {"-listen", "0.0.0.0:4222"}, {"-max-store", "1000"}} {
		p := start(t, s, append([]string{"coordinate", "-log", t.TempDir() + "/run.jsonl", "-nats", "nats://127.0.0.1:1"}, flag...)...)
		if code := p.wait(t, 20*time.Second); code != 2 || !strings.Contains(p.stderr.String(), flag[0]+" ") {
			t.Errorf("coordinate -nats %v: exit %d:\n%s", flag, code, p.stderr)
		}
	}
	h := start(t, s, "work", "-h")
	h.wait(t, 20*time.Second)
	for _, want := range []string{"-join", "-run-id", "-concurrency", "-token", "-creds"} {
		if !strings.Contains(h.stderr.String(), want) {
			t.Errorf("work -h does not list %s:\n%s", want, h.stderr)
		}
	}
	for _, not := range []string{"-log", "-max-cost", "-shard", "-max-error-rate", "-reuse-from"} {
		if strings.Contains(h.stderr.String(), not+" ") {
			t.Errorf("work -h lists %s, which a worker ignores:\n%s", not, h.stderr)
		}
	}
}

// A worker says what it joined and why it leaves; one pointed at a run the
// server does not have fails at once saying so; one told to wait for a
// dead server says at once what it waits for and why.
func TestWorkersSayWhatTheyDo(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 8, Sleep: 10 * time.Millisecond}
	log := t.TempDir() + "/run.jsonl"
	c, out := coordinate(t, s, runConfig(log), coordinatorOptions())
	unknown := start(t, s, "work", "-join", c.url, "-run-id", "no-such-run", "-token", c.srv.token)
	if code := unknown.wait(t, 10*time.Second); code != 1 || !strings.Contains(unknown.stderr.String(), "run no-such-run is not on this server, or not this worker's to join (its latest is run "+c.RunID()) {
		t.Errorf("a worker of an unknown run exited %d:\n%s", code, unknown.stderr)
	}
	dead := start(t, s, "work", "-join", "nats://127.0.0.1:"+strconv.Itoa(freePort(t)), "-wait", "1m")
	until(t, 10*time.Second, "the worker to say it waits for a dead server", func() bool {
		msg := dead.stderr.String()
		return strings.Contains(msg, "waiting for the server at nats://127.0.0.1:") && strings.Contains(msg, "connection refused")
	})
	w := start(t, s, workerArgs(c, 4)...)
	if res := await(t, out, 60*time.Second); res.err != nil {
		t.Fatal(res.err)
	}
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("the worker exited %d:\n%s", code, w.stderr)
	}
	msg := w.stderr.String()
	for _, want := range []string{"joined run " + c.RunID(), "eval=cluster-test", "is done; leaving", "published=24"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the worker's log lacks %q:\n%s", want, msg)
		}
	}
}

// A worker pointed at a dead server, at a server with no run or not the
// run it names, or refused its credentials fails at once with the cause
// (it used to wait two minutes for each).
func TestWorkersFailFast(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 2}
	empty := startNATS(t)
	c, _ := coordinate(t, s, runConfig(t.TempDir()+"/run.jsonl"), coordinatorOptions())
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a dead server", []string{"-join", "nats://127.0.0.1:" + strconv.Itoa(freePort(t))}, "connection refused"},
		{"no run", []string{"-join", empty.url}, "no coordinator serves a run on this server yet"},
		{"an unknown run", []string{"-join", empty.url, "-run-id", "nope"}, "run nope is not on this server"},
		{"a wrong token", []string{"-join", c.url, "-token", "wrong"}, "refused our credentials"},
	} {
		p := start(t, s, append([]string{"work"}, tc.args...)...)
		if code := p.wait(t, 15*time.Second); code != 1 || !strings.Contains(p.stderr.String(), tc.want) {
			t.Errorf("a worker given %s exited %d, want 1 saying %q:\n%s", tc.name, code, tc.want, p.stderr)
		}
	}
}

// An embedded coordinator started again with another token locks its
// workers out: they say their credentials were refused, not that they
// lost the server.
func TestWorkerLockedOutOnReconnectSaysSo(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 24, Sleep: 100 * time.Millisecond}
	log := t.TempDir() + "/run.jsonl"
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	coord := func(token string) []string {
		return []string{"coordinate", "-log", log, "-listen", listen, "-token", token, "-epochs", strconv.Itoa(testEpochs),
			"-seed", strconv.Itoa(testSeed), "-json", "-quiet"}
	}
	first := start(t, s, coord("sesame")...)
	w := start(t, s, "work", "-join", "nats://"+listen, "-token", "sesame", "-concurrency", "4", "-wait", "30s")
	until(t, 20*time.Second, "some records", func() bool { return logLines(log) >= 4 })
	first.signal(t, syscall.SIGKILL)
	first.wait(t, 5*time.Second)
	start(t, s, coord("another")...)
	if code := w.wait(t, 30*time.Second); code != 1 || !strings.Contains(w.stderr.String(), "refused our credentials") {
		t.Errorf("the locked-out worker exited %d:\n%s", code, w.stderr)
	}
}

// Replicas need a cluster: -replicas 3 on the embedded server is bad
// usage, and on a single external server one plain error, not the API's
// refusal of every stream.
func TestReplicasNeedACluster(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 2}
	embedded := start(t, s, "coordinate", "-log", t.TempDir()+"/run.jsonl", "-listen", "127.0.0.1:0", "-replicas", "3")
	if code := embedded.wait(t, 20*time.Second); code != 2 || !strings.Contains(embedded.stderr.String(), "needs a JetStream cluster of at least 3 servers") {
		t.Errorf("coordinate -replicas 3 on the embedded server exited %d:\n%s", code, embedded.stderr)
	}
	srv := startNATS(t)
	single := start(t, s, "coordinate", "-log", t.TempDir()+"/run.jsonl", "-nats", srv.url, "-replicas", "3")
	msg := ""
	if code := single.wait(t, 20*time.Second); code != 1 {
		t.Errorf("coordinate -replicas 3 on one server exited %d", code)
	}
	msg = single.stderr.String()
	if !strings.Contains(msg, "replicas need a JetStream cluster") || strings.Contains(msg, "API error") {
		t.Errorf("coordinate -replicas 3 on one server does not say plainly that replicas need a cluster:\n%s", msg)
	}
}
