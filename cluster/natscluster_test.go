package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServerBinary builds the pinned nats-server (this module's version)
// once per test binary. Where it cannot be built the test is skipped,
// and fails with PROCTOR_REQUIRE_TOOLS=1 (CI).
var natsServerBuild struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

func natsServerBinary(t *testing.T) string {
	t.Helper()
	b := &natsServerBuild
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "proctor-nats-server-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "nats-server")
		cmd := exec.Command("go", "build", "-o", b.path, "github.com/nats-io/nats-server/v2")
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		msg := fmt.Sprintf("cannot build the pinned nats-server for a 3-node cluster: %v\n%s", b.err, b.out)
		if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return b.path
}

// natsNode is one server of a test cluster, a process of its own.
type natsNode struct {
	name, conf, store string
	port              int
	cmd               *exec.Cmd
	out               *bytes.Buffer // what it said; read once it exited
	exited            chan struct{}
}

// natsCluster is three nats-server processes in one JetStream cluster,
// syncing every write (sync_interval: always).
type natsCluster struct {
	t     *testing.T
	bin   string
	nodes []*natsNode
}

func startNATSCluster(t *testing.T) *natsCluster {
	t.Helper()
	bin := natsServerBinary(t)
	// A port freePort gave may be taken before a node binds it (another
	// test's connection, under load): a cluster a node of which exits
	// while it forms is started again, on other ports.
	for attempt := 1; ; attempt++ {
		c, err := tryNATSCluster(t, bin)
		if err == nil {
			return c
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("the 3-node cluster did not form, again on other ports: %v", err)
	}
}

func tryNATSCluster(t *testing.T, bin string) (*natsCluster, error) {
	c := &natsCluster{t: t, bin: bin}
	dir := t.TempDir()
	var routes []string
	cports := make([]int, 3)
	for i := range cports {
		cports[i] = freePort(t)
		routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(cports[i]))
	}
	for i := range 3 {
		n := &natsNode{name: "n" + strconv.Itoa(i+1), port: freePort(t), store: filepath.Join(dir, "n"+strconv.Itoa(i+1))}
		n.conf = filepath.Join(dir, n.name+".conf")
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n  sync_interval: always\n}\ncluster {\n  name: proctor-test\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n",
			n.name, n.port, n.store, cports[i], strings.Join(routes, ", "))
		if err := os.WriteFile(n.conf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
		c.start(n)
	}
	killAll := func() {
		for _, n := range c.nodes {
			c.kill(n)
		}
	}
	t.Cleanup(killAll)
	if err := c.waitReady(); err != nil {
		killAll()
		return nil, err
	}
	return c, nil
}

func (c *natsCluster) start(n *natsNode) {
	n.cmd = exec.Command(c.bin, "-c", n.conf)
	n.out = new(bytes.Buffer)
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	n.exited = make(chan struct{})
	if err := n.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { n.cmd.Wait(); close(n.exited) }()
}

func (c *natsCluster) kill(n *natsNode) {
	if n.cmd != nil {
		n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.exited
		n.cmd = nil
	}
}

func (c *natsCluster) url() string {
	var urls []string
	for _, n := range c.nodes {
		urls = append(urls, "nats://127.0.0.1:"+strconv.Itoa(n.port))
	}
	return strings.Join(urls, ",")
}

// waitReady waits until JetStream keeps a stream on all three nodes; an
// error, with what it said, when a node exits first or a minute passes.
func (c *natsCluster) waitReady() error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, n := range c.nodes {
			select {
			case <-n.exited:
				return fmt.Errorf("nats-server %s exited: %s", n.name, n.out)
			default:
			}
		}
		if c.keepsThreeReplicas() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out after 1m0s waiting for the cluster's JetStream")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *natsCluster) keepsThreeReplicas() bool {
	nc, err := nats.Connect(c.url(), nats.Timeout(time.Second))
	if err != nil {
		return false
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// A meta leader answers once two nodes agree; a stream of 3 replicas
	// needs the third to have joined too.
	const probe = "READY_PROBE"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: probe, Subjects: []string{"ready.probe"}, Storage: jetstream.MemoryStorage, Replicas: 3}); err != nil {
		return false
	}
	return js.DeleteStream(ctx, probe) == nil
}

func (c *natsCluster) node(name string) *natsNode {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	c.t.Fatalf("no node %q", name)
	return nil
}

// The node that leads the results stream dies mid-run (SIGKILL) and stays
// down, or comes back having lost its store: with three replicas the run
// goes on and ends with each key once and one process's report.
func TestClusterSurvivesTheResultsLeadersDeath(t *testing.T) {
	t.Parallel()
	for _, loseStore := range []bool{false, true} {
		t.Run("lose store="+strconv.FormatBool(loseStore), func(t *testing.T) {
			s := shape{Samples: 36, Sleep: 200 * time.Millisecond}
			cl := startNATSCluster(t)
			log := t.TempDir() + "/run.jsonl"
			o := coordinatorOptions()
			o.NATS, o.Listen = cl.url(), ""
			c, out := coordinate(t, s, runConfig(log), o)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, name := range []string{c.n.work, c.n.results, "KV_" + c.n.kv, "OBJ_" + c.n.blobs} {
				st, err := c.js.Stream(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if r := st.CachedInfo().Config.Replicas; r != 3 {
					t.Errorf("stream %s has %d replicas on a 3-node cluster, want 3", name, r)
				}
			}
			w1 := start(t, s, workerArgs(c, 6)...)
			w2 := start(t, s, workerArgs(c, 6)...)
			until(t, 30*time.Second, "a third of the run", func() bool { return logLines(log) >= 36 })
			info, err := c.res.Info(ctx)
			if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
				t.Fatalf("the results stream's leader: %v %+v", err, info)
			}
			leader := cl.node(info.Cluster.Leader)
			cl.kill(leader)
			midRun(t, log, s)
			// Its store kept, the node stays down: two of three go on.
			// Its store lost, it comes back empty and catches up.
			if loseStore {
				if err := os.RemoveAll(leader.store); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Second)
				cl.start(leader)
			}
			res := finish(t, out, w1, w2)
			checkLog(t, log, s)
			sameReport(t, baseline(t, s), res.rep)
		})
	}
}

// A stream an operator made with more replicas keeps them: the
// coordinator's update never lowers its count.
func TestReplicasAreNeverLowered(t *testing.T) {
	t.Parallel()
	cl := startNATSCluster(t)
	s := shape{Samples: 4}
	log := t.TempDir() + "/run.jsonl"
	cfg := runConfig(log)
	cfg.RunID = "pre-made"
	nc, err := nats.Connect(cl.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := namesFor("pre-made")
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: n.results, Subjects: []string{n.resSubj + ".>"}, Storage: jetstream.FileStorage,
		Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	o := coordinatorOptions()
	o.NATS, o.Listen, o.Replicas = cl.url(), "", 1
	c, out := coordinate(t, s, cfg, o)
	st, err := js.Stream(ctx, n.results)
	if err != nil {
		t.Fatal(err)
	}
	if r := st.CachedInfo().Config.Replicas; r != 3 {
		t.Errorf("the pre-made R3 results stream has %d replicas after the coordinator's update", r)
	}
	w := start(t, s, workerArgs(c, 4)...)
	if res := await(t, out, 60*time.Second); res.err != nil {
		t.Fatal(res.err)
	}
	w.wait(t, 20*time.Second)
}
