package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/driver"
)

// box is one pod: a fork, or the seed pod Setup runs in.
type box struct {
	d       *Driver
	pod     string
	ws      string
	spec    sandbox.Spec
	imageID string // what the pod runs (imageID)

	// life ends when the box closes: it stops every stream in flight.
	life context.Context
	stop context.CancelFunc

	mu     sync.Mutex
	closed bool
	n      int   // names pid files
	ooms   int64 // the container's OOM kills already reported
	// oomEnded is set once the container's termination as OOMKilled is
	// reported.
	oomEnded bool
}

func newBox(d *Driver, pod string, spec sandbox.Spec) *box {
	life, stop := context.WithCancel(context.Background())
	return &box{d: d, pod: pod, ws: workDir(spec), spec: spec, life: life, stop: stop}
}

// Close implements [driver.Sandbox]: it deletes the pod, which stops what
// runs in it, and ends the streams in flight.
func (b *box) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.stop()
	return deletePod(context.Background(), b.d.cs, b.d.ns, b.pod)
}

func (b *box) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// stream runs argv in the pod's container over pods/exec (WebSocket,
// falling back to SPDY for servers before 1.30) and returns its error:
// nil for exit 0, a [utilexec.ExitError] for another exit code.
func (b *box) stream(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	req := b.d.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(b.d.ns).Name(b.pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   argv,
			Stdin:     stdin != nil,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.d.config, http.MethodGet, req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.d.config, http.MethodPost, req.URL())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// exitCode splits a stream's error into the command's exit code and a
// failure of the exec itself.
func exitCode(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitStatus(), nil
	}
	return -1, err
}

// fault classifies a failed exec: a done ctx is its error; a closed box
// is ErrClosed; anything else is the sandbox failing (ErrUnavailable),
// said more precisely when the pod is gone or stopped.
func (b *box) fault(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if b.isClosed() {
		return fmt.Errorf("%w: %w", sandbox.ErrClosed, err)
	}
	if gone := b.gone(); gone != "" {
		return fmt.Errorf("kubernetes: pod %s/%s %s: %w: %w", b.d.ns, b.pod, gone, sandbox.ErrUnavailable, err)
	}
	return fmt.Errorf("kubernetes: exec in pod %s/%s: %w: %w", b.d.ns, b.pod, sandbox.ErrUnavailable, err)
}

// gone says how the pod ended, or "" if it still runs (or cannot be
// asked).
func (b *box) gone() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := b.d.cs.CoreV1().Pods(b.d.ns).Get(ctx, b.pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "was deleted"
	case err != nil:
		return ""
	case p.DeletionTimestamp != nil:
		return "is being deleted"
	}
	if running, _, _ := podState(p); !running {
		return "is not running (" + describe(p) + ")"
	}
	return ""
}

// execWrapper runs the command as a child of a sh that records its own
// pid in a file ($0) and removes it after: the sh is a process group
// leader (the container runtime starts an exec'd process in a new session,
// as runc and docker exec do), so killing that group kills the whole tree
// (a descendant that calls setsid itself escapes; it dies with the pod).
// $1 is the working directory; $2 the seconds the command may run (0:
// unbounded), after which a watchdog in the pod kills the group, so that
// the kill does not wait for the driver's kill exec, which a loaded node
// starts seconds late (its children would do their work meanwhile); the
// rest is the command, after env's assignments when there are any. The
// watchdog sleeps a second at a time and leaves once the wrapper has: a
// command that ends first leaves at most a second's sleep behind (killing
// a longer sleep from a trap races with its start, and leaked some).
const execWrapper = `{ echo $$ > "$0" && cd "$1"; } || { echo "proctor: cannot write $0 or enter $1" >&2; exit 125; }; ` +
	`t=$2; shift 2; w=; ` +
	`if [ "$t" != 0 ]; then ( i=${t%.*}; while [ "$i" -gt 0 ]; do sleep 1; kill -0 $$ 2>/dev/null || exit 0; i=$((i-1)); done; ` +
	`sleep "0.${t#*.}"; kill -0 $$ 2>/dev/null && kill -9 -$$ ) </dev/null >/dev/null 2>&1 & w=$!; fi; ` +
	`"$@"; rc=$?; [ -z "$w" ] || kill $w 2>/dev/null; rm -f "$0"; exit $rc`

// execArgv is the argv that runs cmd in dir with env, killed in the pod
// after limit (0: none).
func execArgv(pidfile, dir string, limit time.Duration, env map[string]string, args []string) []string {
	seconds := "0"
	if limit > 0 {
		seconds = strconv.FormatFloat(max(limit, time.Millisecond).Seconds(), 'f', 3, 64) // sleep takes fractions (busybox, coreutils)
	}
	argv := []string{"sh", "-c", execWrapper, pidfile, dir, seconds}
	if len(env) > 0 {
		argv = append(argv, "env", "--")
		for _, k := range slices.Sorted(maps.Keys(env)) {
			argv = append(argv, k+"="+env[k])
		}
		if strings.Contains(args[0], "=") {
			// env would take the program for one more assignment.
			argv = append(argv, "sh", "-c", `exec "$0" "$@"`)
		}
	}
	return append(argv, args...)
}

// Exec implements [driver.Sandbox]. Spec.Env and Cmd.Env are passed to
// each command through env (not the pod's environment, which a kubelet
// would expand $(VAR) references in).
func (b *box) Exec(ctx context.Context, cmd sandbox.Cmd, stdout, stderr io.Writer) (driver.Exit, error) {
	dir := b.ws
	if cmd.Dir != "." {
		var err error
		if dir, err = b.resolveDir(ctx, cmd.Dir); err != nil {
			return driver.Exit{}, err
		}
	}
	b.mu.Lock()
	b.n++
	pidfile := fmt.Sprintf("/tmp/.proctor-exec-%d.pid", b.n)
	b.mu.Unlock()
	env := maps.Clone(b.spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, cmd.Env)
	// The pod's watchdog fires no sooner than ctx's deadline (Cmd.Timeout's,
	// or the caller's): it starts counting once the exec has started.
	var limit time.Duration
	if d, ok := ctx.Deadline(); ok {
		limit = max(time.Until(d), time.Millisecond) // past already: at once, not unbounded
	}
	argv := execArgv(pidfile, dir, limit, env, cmd.Args)
	var stdin io.Reader
	if len(cmd.Stdin) > 0 {
		stdin = bytes.NewReader(cmd.Stdin)
	}
	err := b.bounded(ctx,
		func(ctx context.Context) error { return b.stream(ctx, argv, stdin, stdout, stderr) },
		func() { b.kill(pidfile) })
	if ctx.Err() != nil {
		return driver.Exit{Code: -1}, ctx.Err()
	}
	code, err := exitCode(err)
	if (err != nil || code != 0) && b.spec.Limits.MemoryBytes > 0 {
		// A process killed for memory fails its command, or (a kubelet
		// killing the whole container, as on cgroup v2) its exec.
		switch oom, how := b.oomKilled(); {
		case oom && err != nil:
			return driver.Exit{Code: -1}, fmt.Errorf("kubernetes: pod %s/%s: %s: %w", b.d.ns, b.pod, how, sandbox.ErrOOM)
		case oom:
			return driver.Exit{Code: code}, fmt.Errorf("kubernetes: pod %s/%s: %s: %w", b.d.ns, b.pod, how, sandbox.ErrOOM)
		}
	}
	if err != nil {
		return driver.Exit{Code: -1}, b.fault(ctx, err)
	}
	// A pod deleted under the command may end its stream as a kill would
	// (137): that is the sandbox failing, not the command.
	if code > 128 {
		if gone := b.gone(); gone != "" {
			return driver.Exit{Code: -1}, b.fault(ctx, fmt.Errorf("exit code %d", code))
		}
	}
	return driver.Exit{Code: code}, nil
}

// oomCount prints the container's memory cgroup's count of processes the
// OOM killer ended (cgroup v2 with its own namespace, then v1).
const oomCount = `for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do [ -r $f ] && exec cat $f; done`

// oomKilled reports whether the OOM killer ended a process of the pod's
// container since it last said so, and how. Two ways, as kubelets do:
// on cgroup v1 (or with singleProcessOOMKill) the kernel kills one
// process and the container runs on, the pod's status saying nothing:
// only the container's cgroup counts it, read here; on cgroup v2 a
// kubelet sets memory.oom.group and the kernel kills the whole container,
// which then reads terminated with reason OOMKilled (the kubelet reports
// it a moment after the exec's stream ends: waited for here).
func (b *box) oomKilled() (bool, string) {
	ctx, cancel := context.WithTimeout(b.life, 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := b.stream(ctx, []string{"sh", "-c", oomCount}, nil, &limited{w: &out, n: 4096}, io.Discard); err == nil {
		for line := range strings.Lines(out.String()) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				b.mu.Lock()
				defer b.mu.Unlock()
				if n > b.ooms {
					b.ooms = n
					return true, "the out-of-memory killer ended a process of its container"
				}
				return false, ""
			}
		}
		return false, ""
	}
	// The container does not answer: ended, maybe as a whole. A kubelet
	// notices within a second or two (its pod lifecycle relist); a
	// container still running after 10 s failed the exec for another
	// reason.
	ctx, cancel = context.WithTimeout(b.life, 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		p, err := b.d.cs.CoreV1().Pods(b.d.ns).Get(ctx, b.pod, metav1.GetOptions{})
		if err != nil {
			return false, ""
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != container || cs.State.Terminated == nil {
				continue
			}
			if t := cs.State.Terminated; t.Reason == "OOMKilled" {
				b.mu.Lock()
				defer b.mu.Unlock()
				if b.oomEnded {
					return false, "" // reported already: the commands since failed on a dead container
				}
				b.oomEnded = true
				return true, fmt.Sprintf("its container was terminated as OOMKilled (exit code %d)", t.ExitCode)
			}
			return false, ""
		}
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return false, ""
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return false, ""
}

// bounded runs run until it returns or ctx is done (the caller's, or
// Cmd.Timeout's, which the portable type enforces through ctx); then it
// calls kill, which ends the command's process tree, and waits for run to
// return: a second kill after 1 s (a command that had not yet recorded its
// pid when the first came), then at most 4 s more (a descendant that
// escaped the kill may hold the stream open; the stream is then cut).
func (b *box) bounded(ctx context.Context, run func(context.Context) error, kill func()) error {
	sctx, cut := context.WithCancel(b.life)
	defer cut()
	done := make(chan error, 1)
	go func() { done <- run(sctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	kill()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Second):
	}
	kill()
	select {
	case err := <-done:
		return err
	case <-time.After(4 * time.Second):
		cut()
		return <-done
	}
}

// kill kills the process group recorded in pidfile, with a fresh exec
// that does not depend on the caller's (maybe done) ctx.
func (b *box) kill(pidfile string) {
	ctx, cancel := context.WithTimeout(b.life, 30*time.Second)
	defer cancel()
	script := `p=$(cat "$0" 2>/dev/null) && [ -n "$p" ] && { kill -9 -"$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; }; rm -f "$0"`
	b.stream(ctx, []string{"sh", "-c", script, pidfile}, nil, io.Discard, io.Discard)
}

// limited writes at most n bytes to w and drops the rest.
type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	l.w.Write(p[:min(len(p), max(l.n-l.w.Len(), 0))])
	return len(p), nil
}
