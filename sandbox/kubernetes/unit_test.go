package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/proctor-evals/proctor/sandbox"
)

// shells are the tool sets the scripts run with here: busybox's applets
// (what the test image has) and the host's (GNU coreutils, as in most
// images), each under busybox's sh.
func shells(t *testing.T) map[string][]string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" {
			t.Fatalf("PROCTOR_REQUIRE_TOOLS=1 but busybox is not on PATH: %v", err)
		}
		t.Skipf("busybox is not on PATH (apt-get install busybox-static): %v", err)
	}
	applets := t.TempDir()
	out, err := exec.Command(bb, "--install", "-s", applets).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return map[string][]string{
		"busybox": {"PATH=" + applets},
		"host":    {"PATH=" + filepath.Dir(bb) + ":/usr/bin:/bin"},
	}
}

// runScript runs a file API script as the driver does, with the
// workspace ws, locally.
func runScript(t *testing.T, env []string, ws, body string, stdin []byte, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("busybox", append([]string{"sh", "-c", resolveScript + body, "proctor", ws}, args...)...)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return o.String(), e.String(), ee.ExitCode()
	}
	require.NoError(t, err)
	return o.String(), e.String(), 0
}

// workspace makes a workspace with files, a FIFO, symlinks in and out of
// it, and a loop.
func workspace(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{ws + "/sub/deeper", outside} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for name, data := range map[string]string{
		"ws/a.txt": "hello", "ws/sub/b.txt": "12345", "ws/..name": "dots", "ws/-dash": "dash",
		"ws/new\nline": "nl", "outside/secret": "secret",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(data), 0o644))
	}
	require.NoError(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644))
	for name, target := range map[string]string{
		"out": outside, "passwd": "/etc/passwd", "rel": "../../../../../../etc/passwd",
		"inside": "a.txt", "updown": "sub/deeper/../../a.txt", "subl": "sub", "back": "../ws/a.txt",
		"loop1": "loop2", "loop2": "loop1", "dangling": "created-through-link", "sub/deeper/up": "../..",
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(ws, name)))
	}
	return ws
}

func TestResolveAndRead(t *testing.T) {
	for tools, env := range shells(t) {
		t.Run(tools, func(t *testing.T) {
			ws := workspace(t)
			read := func(name string, max int64) (string, string, int) {
				return runScript(t, env, ws, readScript, nil, name, strconv.FormatInt(max, 10), strconv.FormatInt(max+1, 10))
			}
			for name, want := range map[string]string{
				"a.txt": "hello", "sub/b.txt": "12345", "inside": "hello", "updown": "hello", "subl/b.txt": "12345",
				"back": "hello", "..name": "dots", "-dash": "dash", "new\nline": "nl", "sub/deeper/up/a.txt": "hello",
			} {
				out, stderr, code := read(name, 100)
				require.Equal(t, 0, code, "read %q: %s", name, stderr)
				require.Equal(t, want, out, "read %q", name)
			}
			for name, want := range map[string]int{
				"out/secret": codeEscape, "out/missing": codeEscape, "passwd": codeEscape, "rel": codeEscape, "missing": codeNotExist,
				"a.txt/x": codeNotExist, "missing/x": codeNotExist, "loop1": codeLoop, "fifo": codeNotRegular, "sub": codeNotRegular,
			} {
				_, stderr, code := read(name, 100)
				require.Equal(t, want, code, "read %q: %s", name, stderr)
			}
			_, stderr, code := read("a.txt", 4)
			require.Equal(t, codeTooLarge, code)
			mode, size, err := parseStat(firstLine(stderr))
			require.NoError(t, err)
			require.Equal(t, int64(5), size)
			require.True(t, mode.IsRegular())
			_, stderr, code = read("fifo", 100)
			require.Equal(t, codeNotRegular, code)
			mode, _, err = parseStat(firstLine(stderr))
			require.NoError(t, err)
			require.Equal(t, fs.ModeNamedPipe, mode.Type())

			out, _, code := runScript(t, env, ws, resolveDirScript, nil, "subl")
			require.Equal(t, 0, code)
			require.Equal(t, filepath.Join(ws, "sub"), out)
			_, _, code = runScript(t, env, ws, resolveDirScript, nil, "out")
			require.Equal(t, codeEscape, code)
			_, _, code = runScript(t, env, ws, resolveDirScript, nil, "a.txt")
			require.Equal(t, codeNotDir, code)
		})
	}
}

func TestWriteScript(t *testing.T) {
	for tools, env := range shells(t) {
		t.Run(tools, func(t *testing.T) {
			ws := workspace(t)
			write := func(name, data string) int {
				_, stderr, code := runScript(t, env, ws, writeScript, []byte(data), name, "640")
				t.Logf("write %q: %d %s", name, code, stderr)
				return code
			}
			require.Equal(t, 0, write("new/dir/f.txt", "made"))
			b, err := os.ReadFile(filepath.Join(ws, "new/dir/f.txt"))
			require.NoError(t, err)
			require.Equal(t, "made", string(b))
			fi, err := os.Stat(filepath.Join(ws, "new/dir/f.txt"))
			require.NoError(t, err)
			require.Equal(t, fs.FileMode(0o640), fi.Mode().Perm())

			require.Equal(t, 0, write("a.txt", "x"), "overwrite truncates")
			b, _ = os.ReadFile(filepath.Join(ws, "a.txt"))
			require.Equal(t, "x", string(b))
			require.Equal(t, 0, write("dangling", "via link"), "a dangling link inside is written through")
			b, _ = os.ReadFile(filepath.Join(ws, "created-through-link"))
			require.Equal(t, "via link", string(b))
			require.Equal(t, 0, write("fifo", "replaced"), "a FIFO is replaced, not blocked on")
			for _, name := range []string{"out/written", "out/new/deeper", "passwd", "rel"} {
				require.Equal(t, codeEscape, write(name, "x"), name)
			}
			_, err = os.Stat(filepath.Join(filepath.Dir(ws), "outside", "written"))
			require.ErrorIs(t, err, fs.ErrNotExist)
			require.Equal(t, codeNotRegular, write("sub", "x"), "a directory")
		})
	}
}

func TestListScript(t *testing.T) {
	for tools, env := range shells(t) {
		t.Run(tools, func(t *testing.T) {
			ws := workspace(t)
			list := func(name string, slow bool) []sandbox.FileInfo {
				args := []string{name}
				if slow {
					args = append(args, "slow")
				}
				out, stderr, code := runScript(t, env, ws, listScript, nil, args...)
				require.Equal(t, 0, code, stderr)
				got, err := parseListing([]byte(out))
				require.NoError(t, err)
				return got
			}
			type entry struct {
				Name string
				Size int64
				Dir  bool
				Type fs.FileMode
			}
			simplify := func(l []sandbox.FileInfo) map[string]entry {
				m := map[string]entry{}
				for _, fi := range l {
					e := entry{Name: fi.Name, Dir: fi.IsDir, Type: fi.Mode.Type()}
					if fi.Mode.IsRegular() {
						e.Size = fi.Size
					}
					m[fi.Name] = e
				}
				return m
			}
			root := simplify(list(".", false))
			require.Equal(t, entry{Name: "a.txt", Size: 5}, root["a.txt"])
			require.Equal(t, entry{Name: "new\nline", Size: 2}, root["new\nline"], "the NUL-framed listing")
			require.Equal(t, entry{Name: "sub", Dir: true, Type: fs.ModeDir}, root["sub"])
			require.Equal(t, fs.ModeSymlink, root["out"].Type)
			require.Equal(t, fs.ModeNamedPipe, root["fifo"].Type)
			require.Contains(t, root, "..name")
			require.Contains(t, root, "-dash")
			require.Len(t, root, 16)
			if d := cmp.Diff(root, simplify(list(".", true))); d != "" {
				t.Errorf("the slow listing differs (-fast +slow):\n%s", d)
			}
			require.Equal(t, map[string]entry{"b.txt": {Name: "b.txt", Size: 5}, "deeper": {Name: "deeper", Dir: true, Type: fs.ModeDir}}, simplify(list("sub", false)))
			require.NoError(t, os.Mkdir(filepath.Join(ws, "empty"), 0o755))
			require.Empty(t, list("empty", false))
			require.Empty(t, list("empty", true))
		})
	}
}

func TestExecWrapper(t *testing.T) {
	for tools, env := range shells(t) {
		t.Run(tools, func(t *testing.T) {
			dir := t.TempDir()
			pidfile := filepath.Join(dir, "pid")
			run := func(cmdEnv map[string]string, args ...string) (string, int) {
				argv := execArgv(pidfile, dir, 0, cmdEnv, args)
				cmd := exec.Command("busybox", argv...)
				cmd.Env = env
				out, err := cmd.Output()
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return string(out), ee.ExitCode()
				}
				require.NoError(t, err)
				return string(out), 0
			}
			out, code := run(map[string]string{"A": "1", "B": "$(A) two"}, "sh", "-c", `echo "$A|$B|$PWD"; exit 7`)
			require.Equal(t, 7, code)
			require.Equal(t, "1|$(A) two|"+dir+"\n", out)
			_, err := os.Stat(pidfile)
			require.ErrorIs(t, err, fs.ErrNotExist, "the pid file is removed after the command")
			_, code = run(nil, "proctor-no-such-program")
			require.Equal(t, 127, code)
			out, _ = run(map[string]string{"A": "1"}, "echo", "-n", "x")
			require.Equal(t, "x", out)
		})
	}
}

// The wrapper kills the command's process tree itself once its limit has
// passed (a watchdog in the pod), with no kill from outside: children
// that would write a file after a second never do, and the wrapper ends
// as a kill ends it; a command that ends first leaves no watchdog behind.
func TestExecWrapperKillsTheTreeAtItsLimit(t *testing.T) {
	for tools, env := range shells(t) {
		t.Run(tools, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			start := func(limit time.Duration, script string) (*exec.Cmd, *bytes.Buffer) {
				argv := execArgv(filepath.Join(dir, "pid"), dir, limit, nil, []string{"sh", "-c", script})
				cmd := exec.Command("busybox", argv...)
				cmd.Env = env
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the runtime starts an exec in a new session
				var out bytes.Buffer
				cmd.Stdout = &out
				require.NoError(t, cmd.Start())
				return cmd, &out
			}
			cmd, _ := start(300*time.Millisecond, "(sleep 1; echo escaped > escaped.txt) & sh -c 'sleep 1; echo escaped > escaped2.txt' & sleep 30")
			ended := make(chan error, 1)
			go func() { ended <- cmd.Wait() }()
			select {
			case err := <-ended:
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee)
				require.Equal(t, "signal: killed", ee.Error())
			case <-time.After(20 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				t.Fatal("the wrapper did not kill its command at its limit")
			}
			time.Sleep(1500 * time.Millisecond)
			for _, f := range []string{"escaped.txt", "escaped2.txt"} {
				_, err := os.Stat(filepath.Join(dir, f))
				require.ErrorIs(t, err, fs.ErrNotExist, "a child outlived the command's limit and wrote %s", f)
			}

			cmd, out := start(30*time.Second, "echo fine")
			require.NoError(t, cmd.Wait())
			require.Equal(t, "fine\n", out.String())
			require.Eventually(t, func() bool { return syscall.Kill(-cmd.Process.Pid, 0) != nil }, 5*time.Second, 20*time.Millisecond,
				"the watchdog outlived the command it watched")
		})
	}
}

func TestPodFor(t *testing.T) {
	no, yes, uid := false, true, int64(1000)
	zero := int64(0)
	d := &Driver{ns: "evals", runID: "run1", opts: Options{
		Labels: map[string]string{"team": "agents"}, ServiceAccount: "sandboxes",
		NodeSelector: map[string]string{"pool": "agents"}, RuntimeClassName: "gvisor",
		Tolerations:     []corev1.Toleration{{Key: "agents", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		ImagePullPolicy: corev1.PullNever, ImagePullSecrets: []string{"registry"},
		Annotations:        map[string]string{"sidecar.istio.io/inject": "false"},
		PodSecurityContext: &corev1.PodSecurityContext{FSGroup: &uid},
		SecurityContext:    &corev1.SecurityContext{RunAsUser: &uid, RunAsNonRoot: &yes},
	}}
	got := d.podFor("fork", sandbox.Spec{Image: "img:1", Env: map[string]string{"SECRET": "not in the pod spec"},
		Limits: sandbox.Limits{CPUs: 1.5, MemoryBytes: 256 << 20, Pids: 100, DiskBytes: 1 << 30}})
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	gi := resource.MustParse("1Gi")
	gvisor := "gvisor"
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "proctor-fork-", Namespace: "evals", Labels: map[string]string{
			"team": "agents", LabelRun: "run1", LabelRole: "fork", LabelNetwork: "off", LabelManaged: "proctor",
		}, Annotations: map[string]string{"sidecar.istio.io/inject": "false"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "sandbox", Image: "img:1", Command: keepAlive, WorkingDir: "/", ImagePullPolicy: corev1.PullNever,
				Resources:       corev1.ResourceRequirements{Requests: rl, Limits: rl},
				SecurityContext: &corev1.SecurityContext{RunAsUser: &uid, RunAsNonRoot: &yes},
				VolumeMounts:    []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}},
			}},
			Volumes: []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &gi},
			}}},
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &zero, ServiceAccountName: "sandboxes",
			AutomountServiceAccountToken: &no, EnableServiceLinks: &no, NodeSelector: map[string]string{"pool": "agents"},
			Tolerations:      d.opts.Tolerations,
			RuntimeClassName: &gvisor, ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
			SecurityContext: &corev1.PodSecurityContext{FSGroup: &uid},
		},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("pod (-want +got):\n%s", diff)
	}
	seed := d.podFor("seed", sandbox.Spec{Image: "img:1", Limits: sandbox.Limits{DiskBytes: 1 << 30}})
	require.Empty(t, seed.Spec.Volumes, "Setup runs without the disk bound")
	on := d.podFor("seed", sandbox.Spec{Image: "img:1", Network: true})
	require.Equal(t, "on", on.Labels[LabelNetwork])
	require.Empty(t, on.Spec.Containers[0].Resources.Limits, "no limits, no resources")
}

func TestPodState(t *testing.T) {
	running := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	ok, failed, _ := podState(running)
	require.True(t, ok)
	require.Nil(t, failed)
	pull := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "pull access denied"}}}}}}
	_, failed, _ = podState(pull)
	require.Equal(t, "ErrImagePull", failed.Reason)
	require.ErrorIs(t, failed, sandbox.ErrUnavailable)
	unsched := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}}}
	ok, failed, msg := podState(unsched)
	require.False(t, ok)
	require.Nil(t, failed)
	require.Equal(t, "0/1 nodes are available", msg)
}

// TestImageID: the image a pod runs, as container runtimes name it in
// its status, without the runtime's scheme.
func TestImageID(t *testing.T) {
	for status, want := range map[string]string{
		"docker-pullable://busybox@sha256:0123": "busybox@sha256:0123",                   // dockershim, a pulled image
		"docker://sha256:4567":                  "sha256:4567",                           // an image built on the node
		"docker.io/library/busybox@sha256:89ab": "docker.io/library/busybox@sha256:89ab", // containerd
		"":                                      "",
	} {
		p := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox", ImageID: status}}}}
		require.Equal(t, want, imageID(p), status)
	}
	require.Empty(t, imageID(&corev1.Pod{}))
}

func TestParseListing(t *testing.T) {
	got, err := parseListing([]byte("L81a4 5 a b.txt\n41ed 4096 dir\na1ff 4 link\n"))
	require.NoError(t, err)
	require.Equal(t, []sandbox.FileInfo{
		{Name: "a b.txt", Size: 5, Mode: 0o644},
		{Name: "dir", Size: 4096, Mode: fs.ModeDir | 0o755, IsDir: true},
		{Name: "link", Size: 4, Mode: fs.ModeSymlink | 0o777},
	}, got)
	got, err = parseListing([]byte("Z81a4 2 new\nline\x00"))
	require.NoError(t, err)
	require.Equal(t, "new\nline", got[0].Name)
	empty, err := parseListing([]byte("L"))
	require.NoError(t, err)
	require.Empty(t, empty)
	for _, bad := range []string{"", "X", "L81a4 5\n", "Lzz 5 a\n", "L81a4 -1 a\n", "L81a4 5 a", "L81a4 5 a/b\n", "Z81a4 5 ..\x00"} {
		_, err := parseListing([]byte(bad))
		require.Error(t, err, "%q", bad)
	}
}

// FuzzParseListing: the listing comes from the sandbox; whatever it holds
// is an error or entries with plain names, never a panic.
func FuzzParseListing(f *testing.F) {
	f.Add([]byte("L81a4 5 a b.txt\n41ed 4096 dir\n"))
	f.Add([]byte("Z81a4 2 new\nline\x00"))
	f.Add([]byte("L"))
	f.Fuzz(func(t *testing.T, b []byte) {
		list, err := parseListing(b)
		if err != nil {
			return
		}
		for _, fi := range list {
			if fi.Name == "" || fi.Name == "." || fi.Name == ".." || strings.ContainsAny(fi.Name, "/\x00") || fi.Size < 0 {
				t.Fatalf("entry %+v from %q", fi, b)
			}
			if fi.IsDir != fi.Mode.IsDir() {
				t.Fatalf("IsDir %v but mode %v", fi.IsDir, fi.Mode)
			}
		}
	})
}

func FuzzParseStat(f *testing.F) {
	f.Add("81a4 5")
	f.Add("1000 0")
	f.Fuzz(func(t *testing.T, s string) {
		_, size, err := parseStat(s)
		if err == nil && size < 0 {
			t.Fatalf("negative size from %q", s)
		}
	})
}

// bounded kills when ctx is done (the caller's, or Cmd.Timeout's), kills
// again when the first kill did not end the command, and cuts the stream
// of one that outlives both.
func TestBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBox(&Driver{}, "pod", sandbox.Spec{})
		// run ends after the n-th kill, or when its stream is cut.
		start := func(n int) (func(context.Context) error, func(), *int) {
			kills := 0
			killed := make(chan struct{}, 2)
			run := func(ctx context.Context) error {
				for i := 0; i < n; i++ {
					select {
					case <-killed:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				if n == 0 {
					<-ctx.Done()
					return ctx.Err()
				}
				return utilexec.CodeExitError{Err: errors.New("killed"), Code: 137}
			}
			return run, func() { kills++; killed <- struct{}{} }, &kills
		}
		within := func(d time.Duration) context.Context {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			t.Cleanup(cancel)
			return ctx
		}

		run, kill, kills := start(1)
		t0 := time.Now()
		err := b.bounded(within(time.Second), run, kill)
		require.Equal(t, 1, *kills)
		code, _ := exitCode(err)
		require.Equal(t, 137, code)
		require.Equal(t, time.Second, time.Since(t0))

		run, kill, kills = start(2)
		t0 = time.Now()
		_ = b.bounded(within(time.Second), run, kill)
		require.Equal(t, 2, *kills, "a second kill when the first did not end it")
		require.Equal(t, 2*time.Second, time.Since(t0))

		run, kill, kills = start(0)
		t0 = time.Now()
		err = b.bounded(within(3*time.Second), run, kill)
		require.ErrorIs(t, err, context.Canceled, "the stream is cut")
		require.Equal(t, 2, *kills)
		require.Equal(t, 3*time.Second+5*time.Second, time.Since(t0), "cut 5 s after the first kill")

		_, kill, kills = start(1)
		err = b.bounded(context.Background(), func(context.Context) error { return nil }, kill)
		require.NoError(t, err)
		require.Zero(t, *kills, "a command that ends is not killed")
	})
}

func TestSnapshotScript(t *testing.T) {
	for tools, env := range shells(t) {
		t.Run(tools, func(t *testing.T) {
			// Run from a fake root: the script's "cd /" is the only line
			// that names it.
			root := t.TempDir()
			for _, f := range []string{"ws/a", "opt/tool/v", "other/x"} {
				require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte(f), 0o644))
			}
			script := strings.Replace(snapshotScript, "cd /", "cd "+root, 1)
			cmd := exec.Command("busybox", "sh", "-c", script, "proctor", "ws", "opt/tool", "missing/dir")
			cmd.Env = env
			out, err := cmd.Output()
			require.NoError(t, err)
			list := exec.Command("busybox", "tar", "tf", "-")
			list.Stdin = bytes.NewReader(out)
			names, err := list.Output()
			require.NoError(t, err)
			got := strings.Fields(string(names))
			require.ElementsMatch(t, []string{"ws/", "ws/a", "opt/tool/", "opt/tool/v"}, got)
		})
	}
}
