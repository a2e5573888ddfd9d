package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/local"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

// tracedContext returns a context under a recording span of a fresh SDK
// provider, and the recorder of its spans.
func tracedContext(t *testing.T) (context.Context, trace.Span, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "caller")
	return ctx, span, rec
}

func envOf(t *testing.T, out []byte) map[string]string {
	t.Helper()
	env := map[string]string{}
	for line := range strings.Lines(string(out)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		env[k] = v
	}
	return env
}

func traceparentOf(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

func TestExecTraceContext(t *testing.T) {
	t.Parallel()
	ctx, caller, rec := tracedContext(t)
	ts, err := trace.ParseTraceState("vendor=abc")
	require.NoError(t, err)
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceState: ts, Remote: true})
	sb, err := sandbox.Open(ctx, (&sandboxtest.Fake{}).Provider(), sandbox.Spec{Env: map[string]string{"FROM_SPEC": "1"}})
	require.NoError(t, err)
	defer sb.Close()

	t.Run("under a recording span: a span of its own, and its context", func(t *testing.T) {
		env := map[string]string{"MINE": "x"}
		res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"env"}, Env: env})
		require.NoError(t, err)
		got := envOf(t, res.Stdout)
		var execSpan sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == "sandbox.exec" {
				execSpan = s
			}
		}
		require.NotNil(t, execSpan)
		require.Equal(t, caller.SpanContext().SpanID(), execSpan.Parent().SpanID())
		require.Equal(t, traceparentOf(execSpan.SpanContext()), got["TRACEPARENT"])
		require.Equal(t, "x", got["MINE"])
		require.Equal(t, "1", got["FROM_SPEC"])
		require.Equal(t, map[string]string{"MINE": "x"}, env, "the caller's Env is not modified")
		attrs := attribute.NewSet(execSpan.Attributes()...)
		cmd, _ := attrs.Value("process.command")
		code, _ := attrs.Value("process.exit.code")
		require.Equal(t, "env", cmd.AsString())
		require.Equal(t, int64(0), code.AsInt64())
	})
	t.Run("under a remote parent that does not record: its context, no span", func(t *testing.T) {
		n := len(rec.Ended())
		rctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
		res, err := sb.Exec(rctx, sandbox.Cmd{Args: []string{"env"}})
		require.NoError(t, err)
		got := envOf(t, res.Stdout)
		require.Equal(t, traceparentOf(remote), got["TRACEPARENT"])
		require.Equal(t, "vendor=abc", got["TRACESTATE"])
		require.Len(t, rec.Ended(), n, "no span without a recording parent")
	})
	t.Run("a command's own TRACEPARENT wins", func(t *testing.T) {
		res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"env"}, Env: map[string]string{"TRACEPARENT": "mine"}})
		require.NoError(t, err)
		got := envOf(t, res.Stdout)
		require.Equal(t, "mine", got["TRACEPARENT"])
		require.NotContains(t, got, "TRACESTATE")
	})
	t.Run("untraced: nothing added", func(t *testing.T) {
		res, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"env"}})
		require.NoError(t, err)
		require.NotContains(t, envOf(t, res.Stdout), "TRACEPARENT")
	})
}

func TestProvisionAndForkSpans(t *testing.T) {
	t.Parallel()
	ctx, caller, rec := tracedContext(t)
	p := (&sandboxtest.Fake{}).Provider()
	env, err := p.Provision(ctx, sandbox.Spec{})
	require.NoError(t, err)
	defer env.Close()
	sb, err := env.Fork(ctx)
	require.NoError(t, err)
	sb.Close()
	env.Close()
	_, err = env.Fork(ctx) // closed: an error
	require.ErrorIs(t, err, sandbox.ErrClosed)
	var names []string
	for _, s := range rec.Ended() {
		require.Equal(t, caller.SpanContext().SpanID(), s.Parent().SpanID(), s.Name())
		names = append(names, s.Name())
	}
	// The failed fork stopped before the driver: no span for it.
	require.Equal(t, []string{"sandbox.provision", "sandbox.fork"}, names)
}

// A real process in the local driver reads TRACEPARENT from its
// environment, as an instrumented agent would.
func TestLocalCommandSeesTraceparent(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" {
			t.Fatal("PROCTOR_REQUIRE_TOOLS=1 but sh is not on PATH")
		}
		t.Skip("this test runs sh, which is not on PATH")
	}
	ctx, _, rec := tracedContext(t)
	sb, err := sandbox.Open(ctx, local.New(&local.Options{Dir: t.TempDir(), Method: local.Copy}), sandbox.Spec{})
	require.NoError(t, err)
	defer sb.Close()
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"sh", "-c", `echo "$TRACEPARENT"`}})
	require.NoError(t, err)
	var execSpan sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "sandbox.exec" {
			execSpan = s
		}
	}
	require.NotNil(t, execSpan)
	require.Equal(t, traceparentOf(execSpan.SpanContext())+"\n", string(res.Stdout))
}
