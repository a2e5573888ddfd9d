package eval_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
)

const interruptChildEnv = "PROCTOR_TEST_INTERRUPT_CHILD"

// interruptChild runs a slow eval under InterruptContext, announcing on
// stdout when episodes are running. With "stubborn", its harness ignores
// its context (the engine abandons it) and the process then takes a minute
// to shut down (a slow remote sink, say), so only a second interrupt ends
// it early.
func interruptChild(log, mode string) {
	ctx, stop := eval.InterruptContext(context.Background())
	defer stop()
	started := make(chan struct{}, 1)
	h := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		select {
		case started <- struct{}{}:
			fmt.Println("running")
		default:
		}
		if mode == "stubborn" {
			time.Sleep(time.Minute)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Duration(ep.Seed%50) * time.Millisecond):
		}
		return ep.Sample.Input, nil
	})
	inputs := make([]string, 400)
	for i := range inputs {
		inputs[i] = "ok"
	}
	e := &eval.Eval[string, string]{Name: "interrupt", Dataset: samples(inputs...), Harness: h, Judge: wantOK}
	rep, err := e.Run(ctx, eval.Config{Concurrency: 4, Log: log, Timeout: 2 * time.Minute})
	fmt.Printf("cancelled=%d episodes=%d err=%v\n", rep.Cancelled, rep.Episodes, err)
	if mode == "stubborn" {
		time.Sleep(time.Minute)
	}
	os.Exit(0)
}

func TestInterruptOnceStopsGracefullyTwiceAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	// start runs a child; eof is closed once its stdout is read to the
	// end, which must come before cmd.Wait: Wait closes the pipe, and a
	// line still unread is lost.
	start := func(log, mode string) (cmd *exec.Cmd, all *lockedBuf, running, eof chan struct{}) {
		cmd = exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), interruptChildEnv+"="+log+","+mode)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		all = &lockedBuf{}
		running, eof = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(eof)
			buf := make([]byte, 4096)
			once := false
			for {
				n, err := out.Read(buf)
				all.Write(buf[:n])
				if !once && strings.Contains(all.String(), "running") {
					once = true
					close(running)
				}
				if err != nil {
					return
				}
			}
		}()
		return cmd, all, running, eof
	}
	dir := t.TempDir()

	// Once: the run stops gracefully, reports what it cancelled, and a
	// second run resumes to the end with every episode once.
	log := filepath.Join(dir, "once.jsonl")
	cmd, out, running, eof := start(log, "normal")
	<-running
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	<-eof
	require.NoError(t, cmd.Wait(), "a graceful stop exits normally")
	require.Contains(t, out.String(), "err=interrupt signal received")
	require.Regexp(t, `cancelled=[1-9]`, out.String(), "episodes in flight end as cancelled")
	n := len(logRecords(t, log))
	require.Less(t, n, 400)
	rep, err := (&eval.Eval[string, string]{Name: "interrupt", Dataset: samples(repeat("ok", 400)...), Harness: echo, Judge: wantOK}).
		Run(context.Background(), eval.Config{Log: log})
	require.NoError(t, err)
	require.Equal(t, 400, rep.Episodes)
	require.Equal(t, n, rep.Resumed)

	// Twice, with a harness that ignores its context and a slow shutdown:
	// the second interrupt ends the process at once; the log is still
	// resumable.
	log = filepath.Join(dir, "twice.jsonl")
	cmd, out, running, eof = start(log, "stubborn")
	<-running
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	for !strings.Contains(out.String(), "err=") { // the run returned: its harness was abandoned
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() {
		<-eof
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, syscall.SIGINT, ee.Sys().(syscall.WaitStatus).Signal(), "killed by the second interrupt")
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("a second interrupt did not end the process")
	}
	rep, err = (&eval.Eval[string, string]{Name: "interrupt", Dataset: samples(repeat("ok", 400)...), Harness: echo, Judge: wantOK}).
		Run(context.Background(), eval.Config{Log: log})
	require.NoError(t, err)
	require.Equal(t, 400, rep.Episodes)
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// lockedBuf is the output of a child process, read while it is written.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
