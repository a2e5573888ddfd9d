package local_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/local"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

// helperEnv switches the test binary into a helper program, run as a
// sandboxed command or as a child run: the tests need no host tool.
const helperEnv = "PROCTOR_LOCAL_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := helper(mode, os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper(mode string, args []string) error {
	switch mode {
	case "dial": // dial NETWORK ADDR: print what the server says
		c, err := net.DialTimeout(args[0], args[1], 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = io.Copy(os.Stdout, c)
		return err
	case "sleep":
		time.Sleep(time.Hour)
	case "spawn": // a child that outlives us unless killed, then sleep
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), helperEnv+"=sleep")
		if err := c.Start(); err != nil {
			return err
		}
		time.Sleep(time.Hour)
	case "hold": // hold DIR: open sandboxes with running commands, say so, wait to be killed
		return hold(args[0])

	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return nil
}

func self(t *testing.T) string {
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}

// requireTools skips (fails, with PROCTOR_REQUIRE_TOOLS=1) when the host
// lacks the POSIX tools the suite's shell cases run.
func requireTools(t *testing.T) {
	for _, tool := range []string{"sh", "cat", "echo", "env", "sleep", "true", "false", "mkdir", "rm", "head", "tr"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" {
				t.Fatalf("PROCTOR_REQUIRE_TOOLS=1 but %s is not on PATH", tool)
			}
			t.Skipf("the conformance suite runs host commands and %s is not on PATH", tool)
		}
	}
}

func TestConformance(t *testing.T) {
	requireTools(t)
	for _, m := range []local.Method{local.Overlay, local.Reflink, local.Copy} {
		t.Run(string(m), func(t *testing.T) {
			p := local.New(&local.Options{Dir: t.TempDir(), Method: m})
			d := p.Driver().(*local.Driver)
			if d.Method() == "" {
				t.Skipf("fork method %s does not work on this host", m)
			}
			t.Logf("method %s, guarantees %+v", d.Method(), p.Guarantees())
			sandboxtest.Run(t, p, nil)
		})
	}
}

// The network namespace hides the host's IP addresses, not its
// filesystem: a host Unix socket (the Docker daemon's, say) stays
// reachable, so the driver must not claim network isolation.
func TestGuaranteesDoNotClaimNetworkWhileHostUnixSocketsAreReachable(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "px") // a socket path must be short
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host-socket\n"))
			c.Close()
		}
	}()
	p := local.New(&local.Options{Dir: t.TempDir()})
	ctx := context.Background()
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{Network: false})
	require.NoError(t, err)
	defer sb.Close()
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{self(t), "unix", sock},
		Env: map[string]string{helperEnv: "dial"}, Timeout: 30 * time.Second})
	require.NoError(t, err)
	require.Equal(t, "host-socket\n", string(res.Stdout), "the helper reached the host socket (stderr %q)", res.Stderr)
	g := p.Guarantees()
	t.Logf("guarantees: %+v", g)
	require.False(t, g.Network, "Network claimed while a sandbox reaches a host Unix socket")
}

// hold runs in a child process: it opens sandboxes (overlay forks with a
// disk limit where the host allows) with commands running, each of which
// leaves a child of its own, prints "ready" and waits to be killed.
func hold(dir string) error {
	p := local.New(&local.Options{Dir: dir})
	ctx := context.Background()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	token := os.Getenv("PROCTOR_KILLTEST")
	for range 2 {
		sb, err := sandbox.Open(ctx, p, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: 64 << 20}})
		if err != nil {
			return err
		}
		go sb.Exec(ctx, sandbox.Cmd{Args: []string{exe}, Env: map[string]string{helperEnv: "spawn", "PROCTOR_KILLTEST": token}})
	}
	// Ready once every command and its child run.
	self := fmt.Sprint(os.Getpid())
	for deadline := time.Now().Add(30 * time.Second); len(slices.DeleteFunc(withToken(token), func(p string) bool { return p == self })) < 4; {
		if time.Now().After(deadline) {
			return fmt.Errorf("commands did not start: %v", withToken(token))
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("ready")
	select {}
}

// withToken lists the pids whose environment holds PROCTOR_KILLTEST=token.
func withToken(token string) []string {
	var pids []string
	want := []byte("PROCTOR_KILLTEST=" + token + "\x00")
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue // self, thread-self…
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(append(b, 0), want) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func mountsUnder(t *testing.T, dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir) {
			out = append(out, f[4])
		}
	}
	return out
}

func TestNothingLeftBehindAfterKill9(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only: elsewhere commands do not die with the caller")
	}
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	token := fmt.Sprint(time.Now().UnixNano())
	child := exec.Command(self(t), dir)
	child.Env = append(os.Environ(), helperEnv+"=hold", "PROCTOR_KILLTEST="+token)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() {
		// Whatever happened above, leave nothing mounted in dir.
		child.Process.Kill()
		child.Wait()
		local.Cleanup(dir)
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		child.Process.Kill()
		child.Wait()
		t.Fatalf("child: %q, %v", line, err)
	}
	// The child itself, two commands and a child of each.
	require.Len(t, withToken(token), 5, "the child's sandboxed commands run")
	t.Logf("before kill: mounts %v", mountsUnder(t, dir))

	require.NoError(t, child.Process.Kill()) // SIGKILL: no deferred cleanup runs
	child.Wait()

	// The kernel delivers the parent-death signals asynchronously.
	deadline := time.Now().Add(20 * time.Second)
	for len(withToken(token)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.Empty(t, withToken(token), "sandboxed processes outlived their run")

	// The next start sweeps the dead run's mounts and directories.
	p := local.New(&local.Options{Dir: dir})
	sb, err := sandbox.Open(context.Background(), p, sandbox.Spec{})
	require.NoError(t, err)
	require.NoError(t, sb.Close())
	require.Empty(t, mountsUnder(t, dir), "mounts of the dead run")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var left []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), fmt.Sprintf("run-%d-", os.Getpid())) {
			left = append(left, e.Name())
		}
	}
	require.Empty(t, left, "directories of the dead run")
}

// Cleanup removes only what dead processes left: a live run's sandboxes
// keep working.
func TestCleanupSparesLiveRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := local.New(&local.Options{Dir: dir})
	ctx := context.Background()
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{Files: map[string][]byte{"f": []byte("kept")}})
	require.NoError(t, err)
	defer sb.Close()
	require.NoError(t, local.Cleanup(dir))
	got, err := sb.ReadFile(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "kept", string(got))
}

// TestTheEngineLeavesTheCommandsCgroup: on a cgroup v1 host the thread
// that starts a command joins the command's cgroup so that the command
// starts inside it; it must leave it then, or the OOM killer of the
// command's memory limit weighs the whole engine with the command and
// picks the engine, which holds more memory, when the thread is the
// process's main one (eval's tests were "signal: killed" so under load,
// the kernel's log naming the test binary in a sandbox's cgroup).
func TestTheEngineLeavesTheCommandsCgroup(t *testing.T) {
	requireTools(t)
	p := local.New(&local.Options{Dir: t.TempDir()})
	if !p.Guarantees().OOM {
		t.Skip("this host gives the local driver no memory limit (cgroups need root)")
	}
	ctx := context.Background()
	env, err := p.Provision(ctx, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 64 << 20}})
	require.NoError(t, err)
	defer env.Close()
	sb, err := env.Fork(ctx)
	require.NoError(t, err)
	defer sb.Close()
	running, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(running, sandbox.Cmd{Args: []string{"sleep", "60"}})
		done <- err
	}()
	// The tasks of the command's memory cgroup (this process's, as
	// newCgroup names them) and which of them are the engine's threads:
	// the starting thread is in it from before the fork until the command
	// has started, and must be out soon after.
	engineIn := func() (tasks, engine []string) {
		dirs, _ := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/memory/proctor/%d-*", os.Getpid()))
		if len(dirs) == 0 {
			t.Skip("no cgroup v1 memory controller here: the command starts in its cgroup by its file descriptor (v2)")
		}
		for _, d := range dirs {
			b, _ := os.ReadFile(filepath.Join(d, "tasks"))
			tasks = append(tasks, strings.Fields(string(b))...)
		}
		for _, tid := range tasks {
			if _, err := os.Stat("/proc/self/task/" + tid); err == nil {
				engine = append(engine, tid)
			}
		}
		return tasks, engine
	}
	var since time.Time // when the command was first seen in its cgroup
	for {
		tasks, engine := engineIn()
		if len(tasks) > len(engine) && since.IsZero() {
			since = time.Now()
		}
		if !since.IsZero() && len(engine) == 0 {
			break
		}
		require.False(t, !since.IsZero() && time.Since(since) > 3*time.Second,
			"threads %v of the engine stay in the command's cgroup while it runs", engine)
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
}
