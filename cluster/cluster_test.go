package cluster

// The tests run workers (and, where it is killed, the coordinator) as
// real OS processes: the test binary itself, re-executed with
// PROCTOR_CLUSTER_CHILD=1, runs cluster.Main on the test eval with the
// arguments in PROCTOR_CLUSTER_ARGS. The NATS server is real: embedded in
// the coordinator, or run by the test in-process when a test restarts it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/local"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

func TestMain(m *testing.M) {
	if os.Getenv("PROCTOR_CLUSTER_CHILD") == "1" {
		os.Args = append([]string{"proctor-cluster-test"}, strings.Split(os.Getenv("PROCTOR_CLUSTER_ARGS"), "\x1f")...)
		s := shapeFromEnv()
		Main(testEval(s), s.config(eval.Config{Retries: -1, Timeout: time.Minute}))
	}
	os.Exit(m.Run())
}

// shape is the test eval's workload; children read it from the
// environment, so that every process runs the same eval.
type shape struct {
	Samples int
	Sleep   time.Duration // per episode
	CostUSD float64       // per episode
	Variant string        // another dataset: a worker of another eval
	Big     int           // bytes of output and transcript of every eighth sample
	Calls   string        // a file each harness call appends a line to
	Sandbox string        // a dir for the local sandbox driver: each sample's environment, provisioned once (appending a line to Sandbox/provisions)
	Matrix  int           // the eval's variants (m0, m1…); 0 for none
}

func (s shape) env() []string {
	return []string{
		"PROCTOR_TEST_SAMPLES=" + strconv.Itoa(s.Samples),
		"PROCTOR_TEST_SLEEP=" + s.Sleep.String(),
		"PROCTOR_TEST_COST=" + strconv.FormatFloat(s.CostUSD, 'g', -1, 64),
		"PROCTOR_TEST_VARIANT=" + s.Variant,
		"PROCTOR_TEST_BIG=" + strconv.Itoa(s.Big),
		"PROCTOR_TEST_CALLS=" + s.Calls,
		"PROCTOR_TEST_SANDBOX=" + s.Sandbox,
		"PROCTOR_TEST_MATRIX=" + strconv.Itoa(s.Matrix),
	}
}

func shapeFromEnv() shape {
	var s shape
	s.Samples, _ = strconv.Atoi(os.Getenv("PROCTOR_TEST_SAMPLES"))
	s.Sleep, _ = time.ParseDuration(os.Getenv("PROCTOR_TEST_SLEEP"))
	s.CostUSD, _ = strconv.ParseFloat(os.Getenv("PROCTOR_TEST_COST"), 64)
	s.Variant = os.Getenv("PROCTOR_TEST_VARIANT")
	s.Big, _ = strconv.Atoi(os.Getenv("PROCTOR_TEST_BIG"))
	s.Calls = os.Getenv("PROCTOR_TEST_CALLS")
	s.Sandbox = os.Getenv("PROCTOR_TEST_SANDBOX")
	s.Matrix, _ = strconv.Atoi(os.Getenv("PROCTOR_TEST_MATRIX"))
	return s
}

type input struct {
	N       int    `json:"n"`
	Variant string `json:"variant,omitempty"`
}

// testEval passes an episode when its seed says so: the outcome depends
// only on (run seed, sample, epoch), as reproducibility demands, so a
// distributed run must report exactly what one process reports.
func testEval(s shape) *eval.Eval[input, string] {
	samples := make(dataset.Slice[input], s.Samples)
	for i := range samples {
		samples[i] = dataset.Sample[input]{ID: fmt.Sprintf("q%03d", i), Input: input{N: i, Variant: s.Variant},
			Tags: map[string]string{"level": strconv.Itoa(i % 3)}}
	}
	var spec func(dataset.Sample[input]) sandbox.Spec
	if s.Sandbox != "" {
		spec = func(smp dataset.Sample[input]) sandbox.Spec {
			return sandbox.Spec{Setup: []sandbox.Cmd{{Args: []string{"sh", "-c", `printf %s "$1" > setup.txt && echo "$2" >> "$3"`,
				"sh", "provisioned " + smp.ID, smp.ID, filepath.Join(s.Sandbox, "provisions")}}}}
		}
	}
	e := &eval.Eval[input, string]{
		Name:    "cluster-test",
		Sandbox: spec,
		Dataset: samples,
		Harness: harness.Func[input, string](func(ctx context.Context, ep *harness.Episode[input]) (string, error) {
			if s.Calls != "" {
				countCall(s.Calls)
			}
			if s.Sandbox != "" {
				got, err := ep.Sandbox.ReadFile(ctx, "setup.txt")
				if err != nil || string(got) != "provisioned "+ep.Sample.ID {
					return "", fmt.Errorf("the sample's environment holds %q (%v)", got, err)
				}
			}
			if s.Sleep > 0 {
				t := time.NewTimer(s.Sleep)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			ep.AddUsage(harness.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: s.CostUSD})
			if ep.Sample.Input.N%4 == 0 {
				ep.AddEvent(harness.Event{Kind: "note", Name: "thought", Output: json.RawMessage(`"` + ep.Sample.ID + `"`)})
			}
			if s.Big > 0 && ep.Sample.Input.N%8 == 1 {
				big := strings.Repeat("x", s.Big)
				ep.AddEvent(harness.Event{Kind: "note", Name: "big", Output: json.RawMessage(`"` + big + `"`)})
				return big, nil
			}
			// A variant's outcome is its own function of the seed.
			variant, _ := strconv.Atoi(strings.TrimPrefix(ep.Variant, "m"))
			return strconv.FormatUint((ep.Seed+uint64(variant))%5, 10), nil
		}),
		Judge: judge.Func[input, string](func(ctx context.Context, ep *harness.Episode[input], out string) (judge.Verdict, error) {
			pass := out != "0" && out != "1"
			if n, err := strconv.Atoi(out); err == nil && ep.Variant != "" {
				// Variant mV passes over V (m0 80%, m1 60%, m2 40%), so
				// that their gates decide apart.
				v, _ := strconv.Atoi(strings.TrimPrefix(ep.Variant, "m"))
				pass = n > v
			}
			score := 0.0
			if pass {
				score = 1
			}
			return judge.Verdict{Pass: pass, Score: score}, nil
		}),
	}
	for i := range s.Matrix {
		e.Variants = append(e.Variants, eval.Variant[input, string]{Name: "m" + strconv.Itoa(i), Harness: e.Harness, Version: "1"})
	}
	if s.Matrix > 0 {
		e.Harness = nil
	}
	return e
}

// config is cfg with the shape's sandbox provider.
func (s shape) config(cfg eval.Config) eval.Config {
	if s.Sandbox != "" {
		cfg.Sandbox = local.New(&local.Options{Dir: filepath.Join(s.Sandbox, "envs")})
	}
	return cfg
}

// countCall appends a line to the file at path (O_APPEND: one write, so
// lines of concurrent calls and processes do not mix).
func countCall(path string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		panic(err)
	}
	f.Write([]byte("call\n"))
	f.Close()
}

const (
	testSeed   = 7
	testEpochs = 3
)

// baseline is the report one process makes of the same run.
func baseline(t *testing.T, s shape) *report.Report {
	t.Helper()
	s.Sleep = 0
	rep, err := testEval(s).Run(context.Background(), eval.Config{Epochs: testEpochs, Seed: testSeed, Retries: -1, Log: t.TempDir() + "/base.jsonl"})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// sameReport compares what a run's report says about the agent: counts,
// rates, intervals, pass@k, tags and usage (not wall time, latency, run
// IDs, warnings or transcript links).
func sameReport(t *testing.T, want, got *report.Report) {
	t.Helper()
	opts := []cmp.Option{
		cmpopts.IgnoreFields(report.Report{}, "RunID", "StartedAt", "Wall", "Latency", "Failures", "FailuresOmitted", "Warnings", "Resumed", "Cancelled"),
		cmpopts.IgnoreUnexported(report.Report{}, report.Leaderboard{}), cmpopts.IgnoreFields(report.Standing{}, "Latency"),
		cmpopts.EquateApprox(0, 1e-9), cmpopts.EquateNaNs(),
	}
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Errorf("the distributed report differs from one process's (-want +got):\n%s", d)
	}
}

// checkLog asserts the log holds each key of the run exactly once, and
// returns its records.
func checkLog(t *testing.T, log string, s shape) []sink.Record {
	t.Helper()
	seen := map[sink.Key]int{}
	var recs []sink.Record
	for r, err := range jsonl.Records(log) {
		if err != nil {
			t.Fatalf("reading %s: %v", log, err)
		}
		seen[r.Key()]++
		recs = append(recs, r)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%v recorded %d times", k, n)
		}
	}
	if want := s.Samples * testEpochs; len(seen) != want {
		t.Errorf("%d keys logged, want %d", len(seen), want)
	}
	return recs
}

// proc is a child process of the test binary.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuf
	exited         chan struct{}
	code           int
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// start runs the test binary as cluster.Main with args; the process is
// killed, if still running, when the test ends.
func start(t testing.TB, s shape, args ...string) *proc {
	t.Helper()
	return startEnv(t, s, nil, args...)
}

// startEnv is start with env added to the process's environment.
func startEnv(t testing.TB, s shape, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append(s.env(), "PROCTOR_CLUSTER_CHILD=1", "PROCTOR_CLUSTER_ARGS="+strings.Join(args, "\x1f"))...)
	cmd.Env = append(cmd.Env, env...)
	p := &proc{cmd: cmd, stdout: &syncBuf{}, stderr: &syncBuf{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("%s (pid %d) stderr:\n%s", args[0], cmd.Process.Pid, p.stderr)
		}
	})
	return p
}

// wait returns the exit status, failing the test after d.
func (p *proc) wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(d):
		t.Fatalf("%v still running after %v; stderr:\n%s", p.cmd.Args, d, p.stderr)
		return -1
	}
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// natsServer is a JetStream server the test runs, and restarts, itself.
type natsServer struct {
	t    *testing.T
	opts server.Options
	srv  *server.Server
	url  string
}

func startNATS(t *testing.T) *natsServer {
	t.Helper()
	return startNATSWith(t, func(*serverOptions) {})
}

type serverOptions = server.Options

// startNATSWith starts a server with the options edit makes.
func startNATSWith(t *testing.T, edit func(*serverOptions)) *natsServer {
	t.Helper()
	port := freePort(t)
	s := &natsServer{t: t, opts: server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), SyncAlways: true, NoSigs: true, NoLog: true},
		url: "nats://127.0.0.1:" + strconv.Itoa(port)}
	edit(&s.opts)
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *natsServer) start() {
	o := s.opts
	srv, err := server.NewServer(&o)
	if err != nil {
		s.t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.t.Fatal("the NATS server did not start")
	}
	s.srv = srv
}

func (s *natsServer) stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// coordinatorOptions are quick: heartbeats, redelivery and reconciliation
// within seconds.
func coordinatorOptions() *CoordinatorOptions {
	return &CoordinatorOptions{Listen: "127.0.0.1:0", AckWait: time.Second, ReconcileEvery: 500 * time.Millisecond, Linger: 2 * time.Second}
}

func runConfig(log string) eval.Config {
	return eval.Config{Epochs: testEpochs, Seed: testSeed, Retries: -1, Log: log}
}

// until polls cond every 20 ms for at most d.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// midRun fails the test when the run was over before the fault it
// injects: the fault would have tested nothing.
func midRun(t *testing.T, log string, s shape) {
	t.Helper()
	if n := logLines(log); n >= s.Samples*testEpochs {
		t.Fatalf("the run had finished (%d records) before the fault: make its episodes longer", n)
	}
}

func logLines(log string) int {
	b, _ := os.ReadFile(log)
	return bytes.Count(b, []byte{'\n'})
}

// coordinate starts an in-process coordinator and returns it with a
// channel that yields its outcome.
type outcome struct {
	rep *report.Report
	err error
}

func coordinate(t *testing.T, s shape, cfg eval.Config, o *CoordinatorOptions) (*Coordinator, <-chan outcome) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := StartCoordinator(ctx, testEval(s), cfg, o)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out := make(chan outcome, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		rep, err := c.Wait(ctx)
		out <- outcome{rep, err}
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return c, out
}

func await(t *testing.T, out <-chan outcome, d time.Duration) outcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(d):
		t.Fatalf("the coordinator did not finish within %v", d)
		return outcome{}
	}
}

// finish awaits the coordinator's outcome, failing the test on an error,
// and each worker's exit 0.
func finish(t *testing.T, out <-chan outcome, workers ...*proc) outcome {
	t.Helper()
	// Two minutes: a run through a failover under -race and a loaded
	// machine (a missed heartbeat, an election) takes a while.
	res := await(t, out, 2*time.Minute)
	if res.err != nil {
		t.Fatal(res.err)
	}
	for _, w := range workers {
		if code := w.wait(t, 20*time.Second); code != 0 {
			t.Errorf("a worker exited %d:\n%s", code, w.stderr)
		}
	}
	return res
}

func workerArgs(c *Coordinator, concurrency int) []string {
	args := append(c.JoinArgs(), "-concurrency", strconv.Itoa(concurrency))
	if c.srv != nil {
		args = append(args, "-token", c.srv.token)
	}
	return args
}

func TestKilledWorkersEpisodesRunElsewhere(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 24, Sleep: 100 * time.Millisecond}
	log := t.TempDir() + "/run.jsonl"
	c, out := coordinate(t, s, runConfig(log), coordinatorOptions())
	victim := start(t, s, workerArgs(c, 6)...)
	survivor := start(t, s, workerArgs(c, 6)...)
	until(t, 20*time.Second, "a third of the run", func() bool { return logLines(log) >= 24 })
	victim.signal(t, syscall.SIGKILL)
	midRun(t, log, s)
	o := await(t, out, 60*time.Second)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if code := survivor.wait(t, 10*time.Second); code != 0 {
		t.Errorf("the surviving worker exited %d:\n%s", code, survivor.stderr)
	}
	checkLog(t, log, s)
	sameReport(t, baseline(t, s), o.rep)
}

func TestPausedWorkerPastAckWait(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 24, Sleep: 100 * time.Millisecond}
	log := t.TempDir() + "/run.jsonl"
	c, out := coordinate(t, s, runConfig(log), coordinatorOptions())
	paused := start(t, s, workerArgs(c, 6)...)
	other := start(t, s, workerArgs(c, 6)...)
	until(t, 20*time.Second, "a third of the run", func() bool { return logLines(log) >= 24 })
	paused.signal(t, syscall.SIGSTOP)
	midRun(t, log, s)
	time.Sleep(2500 * time.Millisecond) // AckWait is 1 s: its work is redelivered
	paused.signal(t, syscall.SIGCONT)
	o := await(t, out, 60*time.Second)
	if o.err != nil {
		t.Fatal(o.err)
	}
	for _, p := range []*proc{paused, other} {
		if code := p.wait(t, 10*time.Second); code != 0 {
			t.Errorf("a worker exited %d:\n%s", code, p.stderr)
		}
	}
	checkLog(t, log, s)
	sameReport(t, baseline(t, s), o.rep)
}

func TestServerRestartMidRun(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 24, Sleep: 100 * time.Millisecond}
	srv := startNATS(t)
	log := t.TempDir() + "/run.jsonl"
	o := coordinatorOptions()
	o.NATS, o.Listen = srv.url, ""
	var warnings syncBuf
	o.Logger = slog.New(slog.NewTextHandler(&warnings, nil))
	c, out := coordinate(t, s, runConfig(log), o)
	w1 := start(t, s, workerArgs(c, 6)...)
	w2 := start(t, s, workerArgs(c, 6)...)
	until(t, 20*time.Second, "a third of the run", func() bool { return logLines(log) >= 24 })
	srv.stop()
	midRun(t, log, s)
	time.Sleep(500 * time.Millisecond)
	srv.start() // the same store
	res := await(t, out, 60*time.Second)
	if res.err != nil {
		t.Fatal(res.err)
	}
	if msg := warnings.String(); !strings.Contains(msg, "lost the NATS server") || !strings.Contains(msg, "the NATS server is back") {
		t.Errorf("the coordinator did not say it lost the server and found it again:\n%s", msg)
	}
	for _, p := range []*proc{w1, w2} {
		if code := p.wait(t, 10*time.Second); code != 0 {
			t.Errorf("a worker exited %d:\n%s", code, p.stderr)
		}
	}
	checkLog(t, log, s)
	sameReport(t, baseline(t, s), res.rep)
}

// restartable returns the command lines of a coordinator on log that a
// test may SIGKILL and start again (on the same address and token), with
// extra flags, and of its workers, which wait for it.
func restartable(t *testing.T, log string, extra ...string) (coord, join []string) {
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	coord = append([]string{"coordinate", "-log", log, "-listen", listen, "-token", "sesame", "-epochs", strconv.Itoa(testEpochs),
		"-seed", strconv.Itoa(testSeed), "-ack-wait", "1s", "-reconcile", "500ms", "-json", "-quiet"}, extra...)
	join = []string{"work", "-join", "nats://" + listen, "-token", "sesame", "-concurrency", "6", "-wait", "30s"}
	return coord, join
}

// awaitRestarted waits for a coordinator started again to exit 0 (or 1,
// a gate that did not pass, when gated) and then for its workers to exit 0.
func awaitRestarted(t *testing.T, coord *proc, gated bool, workers ...*proc) {
	t.Helper()
	if code := coord.wait(t, 90*time.Second); code != 0 && !(gated && code == 1) {
		t.Fatalf("the restarted coordinator exited %d:\n%s", code, coord.stderr)
	}
	for _, p := range workers {
		if code := p.wait(t, 20*time.Second); code != 0 {
			t.Errorf("a worker exited %d:\n%s", code, p.stderr)
		}
	}
}

func TestKilledCoordinatorResumes(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 24, Sleep: 100 * time.Millisecond}
	dir := t.TempDir()
	log := dir + "/run.jsonl"
	coord, join := restartable(t, log)
	first := start(t, s, coord...)
	w1 := start(t, s, join...)
	w2 := start(t, s, join...)
	until(t, 20*time.Second, "a third of the run", func() bool { return logLines(log) >= 24 })
	first.signal(t, syscall.SIGKILL)
	first.wait(t, 5*time.Second)
	midRun(t, log, s)
	second := start(t, s, coord...)
	awaitRestarted(t, second, false, w1, w2)
	var rep report.Report
	if err := json.Unmarshal([]byte(second.stdout.String()), &rep); err != nil {
		t.Fatalf("the coordinator's report: %v\n%s", err, second.stdout)
	}
	checkLog(t, log, s)
	sameReport(t, baseline(t, s), &rep)
}

func TestWorkerOfAnotherEvalIsRefused(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 12, Sleep: 20 * time.Millisecond}
	log := t.TempDir() + "/run.jsonl"
	c, out := coordinate(t, s, runConfig(log), coordinatorOptions())
	other := s
	other.Variant = "changed"
	bad := start(t, other, workerArgs(c, 4)...)
	if code := bad.wait(t, 20*time.Second); code != 1 {
		t.Fatalf("a worker of another eval exited %d, want 1:\n%s", code, bad.stderr)
	}
	if msg := bad.stderr.String(); !strings.Contains(msg, "differs from the run's") || !strings.Contains(msg, "dataset hash") {
		t.Errorf("the refusal does not say what differs:\n%s", msg)
	}
	wrongToken := start(t, s, "work", "-join", c.url, "-token", "wrong")
	if code := wrongToken.wait(t, 20*time.Second); code != 1 || !strings.Contains(wrongToken.stderr.String(), "refused our credentials") {
		t.Errorf("a worker with a wrong token exited %d:\n%s", code, wrongToken.stderr)
	}
	good := start(t, s, workerArgs(c, 8)...)
	o := await(t, out, 60*time.Second)
	if o.err != nil {
		t.Fatal(o.err)
	}
	good.wait(t, 10*time.Second)
	badID := ":" + strconv.Itoa(bad.cmd.Process.Pid)
	for _, r := range checkLog(t, log, s) {
		if strings.HasSuffix(r.Worker, badID) {
			t.Errorf("the refused worker contributed %v", r.Key())
		}
		if !strings.HasSuffix(r.Worker, ":"+strconv.Itoa(good.cmd.Process.Pid)) {
			t.Errorf("record %v ran on %q, not on the good worker", r.Key(), r.Worker)
		}
	}
	sameReport(t, baseline(t, s), o.rep)
}

func TestDeletedResultRunsAgain(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 12, Sleep: 30 * time.Millisecond}
	srv := startNATS(t)
	dir := t.TempDir()
	log := dir + "/run.jsonl"
	coord := []string{"coordinate", "-log", log, "-nats", srv.url, "-keep", "-epochs", strconv.Itoa(testEpochs), "-seed", strconv.Itoa(testSeed),
		"-ack-wait", "1s", "-reconcile", "500ms", "-json", "-quiet"}
	first := start(t, s, coord...)
	until(t, 10*time.Second, "the run's manifest", func() bool { _, err := os.Stat(dir + "/run.manifest.json"); return err == nil })
	join := []string{"work", "-join", srv.url, "-concurrency", "4", "-wait", "30s"}
	w := start(t, s, join...)
	until(t, 20*time.Second, "some records", func() bool { return logLines(log) >= 5 })
	first.signal(t, syscall.SIGKILL)
	first.wait(t, 5*time.Second)

	// With the coordinator gone, the worker finishes the queue.
	nc, err := nats.Connect(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	m, err := manifest.Read(log)
	if err != nil {
		t.Fatal(err)
	}
	n := namesFor(m.RunID)
	work, err := js.Stream(ctx, n.work)
	if err != nil {
		t.Fatal(err)
	}
	results, err := js.Stream(ctx, n.results)
	if err != nil {
		t.Fatal(err)
	}
	until(t, 20*time.Second, "every result", func() bool {
		wi, err := work.Info(ctx)
		return err == nil && wi.State.Msgs == 0 && len(storedResults(t, results)) == s.Samples*testEpochs
	})
	logged := map[sink.Key]bool{}
	for r, err := range jsonl.Records(log) {
		if err == nil {
			logged[r.Key()] = true
		}
	}
	var victim sink.Key
	for i := range s.Samples {
		k := sink.Key{SampleID: fmt.Sprintf("q%03d", i), Epoch: 1}
		if !logged[k] {
			victim = k
			break
		}
	}
	if victim.SampleID == "" {
		t.Fatal("the coordinator logged everything before it was killed")
	}
	// The batch holding its result goes, with the others it holds.
	old := storedResults(t, results)[victim][0]
	if err := results.DeleteMsg(ctx, old); err != nil {
		t.Fatal(err)
	}

	second := start(t, s, coord...)
	if code := second.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("the restarted coordinator exited %d:\n%s", code, second.stderr)
	}
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Errorf("the worker exited %d:\n%s", code, w.stderr)
	}
	if again := storedResults(t, results)[victim]; len(again) != 1 || again[0] <= old {
		t.Errorf("%v did not run again after its result was deleted: its results are in batches %v", victim, again)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(second.stdout.String()), &rep); err != nil {
		t.Fatalf("the coordinator's report: %v\n%s", err, second.stdout)
	}
	checkLog(t, log, s)
	sameReport(t, baseline(t, s), &rep)
}

// storedResults returns, for each episode with results in the stream, the
// sequences of the batches holding them, in stream order.
func storedResults(t *testing.T, results jetstream.Stream) map[sink.Key][]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := results.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[sink.Key][]uint64{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		msg, err := results.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		entries, err := decodeBatch(msg.Data)
		if err != nil {
			t.Fatalf("batch %d: %v", seq, err)
		}
		for _, e := range entries {
			k := sink.Key{SampleID: e.SampleID, Epoch: e.Epoch}
			out[k] = append(out[k], seq)
		}
	}
	return out
}

func TestBudgetStopsEveryWorker(t *testing.T) {
	t.Parallel()
	// $0.01 and 15 tokens an episode: each budget is spent at 20.
	for name, budget := range map[string]func(*eval.Config, bool){
		"dollars": func(cfg *eval.Config, on bool) { cfg.MaxCostUSD = map[bool]float64{true: 0.2}[on] },
		"tokens":  func(cfg *eval.Config, on bool) { cfg.MaxTokens = map[bool]int64{true: 300}[on] },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testBudgetStopsEveryWorker(t, budget)
		})
	}
}

func testBudgetStopsEveryWorker(t *testing.T, budget func(*eval.Config, bool)) {
	s := shape{Samples: 24, Sleep: 50 * time.Millisecond, CostUSD: 0.01}
	log := t.TempDir() + "/run.jsonl"
	cfg := runConfig(log)
	budget(&cfg, true)
	c, out := coordinate(t, s, cfg, coordinatorOptions())
	w1 := start(t, s, workerArgs(c, 2)...)
	w2 := start(t, s, workerArgs(c, 2)...)
	o := await(t, out, 30*time.Second)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if !o.rep.BudgetExhausted {
		t.Error("the report does not say the budget was spent")
	}
	for _, p := range []*proc{w1, w2} {
		if code := p.wait(t, 10*time.Second); code != 1 || !strings.Contains(p.stderr.String(), "budget") {
			t.Errorf("a worker exited %d after the budget stop:\n%s", code, p.stderr)
		}
	}
	// What was recorded is each key once, and within what was in flight
	// when the budget ran out.
	seen := map[sink.Key]bool{}
	for r, err := range jsonl.Records(log) {
		if err != nil {
			t.Fatal(err)
		}
		if seen[r.Key()] {
			t.Errorf("%v recorded twice", r.Key())
		}
		seen[r.Key()] = true
	}
	if n := len(seen); n < 20 || n > 20+4+4 {
		t.Errorf("%d episodes recorded under a budget of 20 with 4 slots", n)
	}
	if o.rep.Episodes != len(seen) {
		t.Errorf("the report counts %d episodes, the log %d", o.rep.Episodes, len(seen))
	}
	// The same log finishes the run with a larger budget.
	budget(&cfg, false)
	c2, out2 := coordinate(t, s, cfg, coordinatorOptions())
	start(t, s, workerArgs(c2, 8)...)
	o2 := await(t, out2, 30*time.Second)
	if o2.err != nil {
		t.Fatal(o2.err)
	}
	checkLog(t, log, s)
	sameReport(t, baseline(t, s), o2.rep)
}

// Results over JetStream's message limit travel beside their message
// (the Object Store), whole: outputs and transcripts are never truncated.
func TestLargeResultsArriveWhole(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 16, Big: 1_500_000} // 1.5 MB: over the server's 1 MiB message limit
	log := t.TempDir() + "/run.jsonl"
	c, out := coordinate(t, s, runConfig(log), coordinatorOptions())
	w := start(t, s, workerArgs(c, 4)...)
	o := await(t, out, 60*time.Second)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Errorf("the worker exited %d:\n%s", code, w.stderr)
	}
	big := 0
	for _, r := range checkLog(t, log, s) {
		var in input
		if err := json.Unmarshal(r.Input, &in); err != nil {
			t.Fatal(err)
		}
		if in.N%8 != 1 {
			continue
		}
		big++
		var got string
		if err := json.Unmarshal(r.Output, &got); err != nil || len(got) != s.Big {
			t.Fatalf("%s epoch %d: output of %d bytes arrived as %d (%v)", r.SampleID, r.Epoch, s.Big, len(got), err)
		}
		tr, err := eval.ReadTranscript(r.Transcript, filepath.Dir(log))
		if err != nil {
			t.Fatalf("%s: its transcript: %v", r.SampleID, err)
		}
		if len(tr.Events) != 1 || len(tr.Events[0].Output) != s.Big+2 {
			t.Fatalf("%s: the transcript did not arrive whole", r.SampleID)
		}
	}
	if big != 2*testEpochs {
		t.Fatalf("%d large results, want %d", big, 2*testEpochs)
	}
	sameReport(t, baseline(t, s), o.rep)
}

// The coordinator serves one live view of the whole run (-view).
func TestCoordinatorServesTheRunsViewer(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 12, Sleep: 50 * time.Millisecond}
	log := t.TempDir() + "/run.jsonl"
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	coord := start(t, s, "coordinate", "-log", log, "-listen", listen, "-token", "sesame", "-epochs", strconv.Itoa(testEpochs),
		"-seed", strconv.Itoa(testSeed), "-json", "-quiet", "-view", "127.0.0.1:0")
	var url string
	until(t, 20*time.Second, "the viewer's URL", func() bool {
		_, rest, ok := strings.Cut(coord.stderr.String(), "the run's viewer: ")
		url, _, _ = strings.Cut(rest, "\n")
		return ok && strings.HasSuffix(url, "/")
	})
	w := start(t, s, "work", "-join", "nats://"+listen, "-token", "sesame", "-concurrency", "4", "-wait", "30s")
	until(t, 20*time.Second, "some results", func() bool { return logLines(log) >= 6 })
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "cluster-test") {
		t.Fatalf("GET %s: %d\n%s", url, resp.StatusCode, body)
	}
	// A page whose DNS name rebinds to 127.0.0.1 is refused, as by proctor view.
	req, _ := http.NewRequest("GET", url, nil)
	req.Host = "evil.example:80"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("GET %s with Host %s: %d, want %d", url, req.Host, resp.StatusCode, http.StatusMisdirectedRequest)
	}
	if code := coord.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("the coordinator exited %d:\n%s", code, coord.stderr)
	}
	w.wait(t, 10*time.Second)
	checkLog(t, log, s)
}

// A worker's results travel in batches: the episodes that finish while
// its previous batch is stored share a message (one synced write), and
// every episode's result is in the stream once.
func TestResultsTravelInBatches(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 100} // no-op episodes: many finish during one store
	srv := startNATS(t)      // SyncAlways
	o := coordinatorOptions()
	o.NATS, o.Listen, o.Keep = srv.url, "", true
	c, out := coordinate(t, s, runConfig(t.TempDir()+"/run.jsonl"), o)
	finish(t, out, start(t, s, workerArgs(c, 32)...))
	nc, err := nats.Connect(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	results, err := js.Stream(ctx, c.n.results)
	if err != nil {
		t.Fatal(err)
	}
	info, err := results.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored := storedResults(t, results)
	t.Logf("%d results in %d messages", len(stored), info.State.Msgs)
	for k, seqs := range stored {
		if len(seqs) != 1 {
			t.Errorf("%v is in %d batches", k, len(seqs))
		}
	}
	if episodes := s.Samples * testEpochs; len(stored) != episodes || info.State.Msgs > uint64(episodes/4) {
		t.Errorf("%d of %d episodes' results in %d messages, want them all in at most a quarter as many", len(stored), episodes, info.State.Msgs)
	}
}
