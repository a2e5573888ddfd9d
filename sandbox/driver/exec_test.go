package driver

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// sleeper is a command that runs for d (or until ctx is done, then returns
// ctx.Err(), as the contract of Sandbox.Exec says), writing stderr first.
type sleeper struct {
	d      time.Duration
	stderr string
	code   int
}

func (s sleeper) Exec(ctx context.Context, _ Cmd, _, stderr io.Writer) (Exit, error) {
	io.WriteString(stderr, s.stderr)
	select {
	case <-time.After(s.d):
		return Exit{Code: s.code}, nil
	case <-ctx.Done():
		return Exit{Code: -1}, ctx.Err()
	}
}

func TestExecTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exit, err := Exec(t.Context(), sleeper{d: time.Hour}, Cmd{Timeout: time.Second}, io.Discard, io.Discard)
		require.NoError(t, err)
		require.Equal(t, Exit{Code: -1, TimedOut: true}, exit)
	})
}

func TestExecEndsBeforeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exit, err := Exec(t.Context(), sleeper{d: time.Second, code: 3}, Cmd{Timeout: time.Minute}, io.Discard, io.Discard)
		require.NoError(t, err)
		require.Equal(t, Exit{Code: 3}, exit)
	})
}

// The caller's deadline is the caller's error, even with a Timeout
// pending: only Exec's own deadline is a timeout.
func TestExecCallerDeadlineIsAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := Exec(ctx, sleeper{d: time.Hour}, Cmd{Timeout: time.Minute}, io.Discard, io.Discard)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestExecNoTimeoutPassesCtx(t *testing.T) {
	ctx := t.Context()
	var got context.Context
	x := execFunc(func(c context.Context) { got = c })
	_, err := Exec(ctx, x, Cmd{}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, ctx, got)
}

type execFunc func(context.Context)

func (f execFunc) Exec(ctx context.Context, _ Cmd, _, _ io.Writer) (Exit, error) {
	f(ctx)
	return Exit{}, nil
}

func TestSetupExitNonZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stderr := strings.Repeat("x", 2*setupTail) + "the reason\n"
		err := Setup(t.Context(), sleeper{code: 2, stderr: stderr}, []Cmd{{Args: []string{"make"}}})
		require.ErrorIs(t, err, ErrUnavailable)
		require.ErrorContains(t, err, `setup ["make"] exited 2:`)
		msg := err.Error()
		require.True(t, strings.HasSuffix(msg, "xthe reason: sandbox: unavailable"), "the end of stderr is kept")
		require.Less(t, len(msg), setupTail+100, "only the end of stderr is kept")
	})
}

func TestSetupTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		err := Setup(t.Context(), sleeper{d: time.Hour}, []Cmd{{Args: []string{"sleep"}, Timeout: time.Second}})
		require.ErrorIs(t, err, ErrUnavailable)
		require.NotErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, `setup ["sleep"] timed out after 1s`)
	})
}

func TestSetupError(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := Setup(ctx, sleeper{d: time.Hour}, []Cmd{{Args: []string{"sleep"}, Timeout: time.Second}})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, ErrUnavailable))
}
