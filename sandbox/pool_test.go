package sandbox_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/driver"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

// probed wraps the Fake driver: it counts provisions and environment
// closes, and fails or panics on demand.
type probed struct {
	sandboxtest.Fake
	provisions, envCloses atomic.Int32
	fail                  func(n int32) error // before each Provision
	panicFork             bool
}

func (p *probed) Provision(ctx context.Context, spec sandbox.Spec) (driver.Environment, error) {
	n := p.provisions.Add(1)
	if p.fail != nil {
		if err := p.fail(n); err != nil {
			return nil, err
		}
	}
	env, err := p.Fake.Provision(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &probedEnv{Environment: env, p: p}, nil
}

type probedEnv struct {
	driver.Environment
	p *probed
}

func (e *probedEnv) Fork(ctx context.Context) (driver.Sandbox, error) {
	if e.p.panicFork {
		panic("driver bug")
	}
	return e.Environment.Fork(ctx)
}

func (e *probedEnv) Close() error {
	e.p.envCloses.Add(1)
	return e.Environment.Close()
}

func noSpec() sandbox.Spec { return sandbox.Spec{} }

func TestPoolProvisionsOncePerKeyAndClosesAfterTheLastUse(t *testing.T) {
	t.Parallel()
	d := &probed{}
	pool := sandbox.NewPool(sandbox.NewProvider(d, nil), nil)
	ctx := context.Background()
	pool.Add("a", 3)
	var wg sync.WaitGroup
	sbs := make([]*sandbox.Sandbox, 3)
	for i := range sbs {
		wg.Go(func() {
			sb, err := pool.Fork(ctx, "a", noSpec)
			require.NoError(t, err)
			sbs[i] = sb
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), d.provisions.Load(), "one Provision for the key")
	require.NoError(t, pool.Done("a"))
	require.NoError(t, pool.Done("a"))
	require.Zero(t, d.envCloses.Load(), "closed before its last use")
	require.NoError(t, pool.Done("a"))
	require.Zero(t, d.envCloses.Load(), "the environment's resources outlive its open forks")
	require.NoError(t, sbs[0].WriteFile(ctx, "f", []byte("x"), 0o644), "a fork stays usable")
	for _, sb := range sbs {
		require.NoError(t, sb.Close())
	}
	require.Equal(t, int32(1), d.envCloses.Load(), "released once, after the last fork")
	require.NoError(t, pool.Close())
	require.Equal(t, int32(1), d.envCloses.Load(), "and never again")
}

func TestPoolRetriesAFailedProvision(t *testing.T) {
	t.Parallel()
	d := &probed{fail: func(n int32) error {
		if n == 1 {
			return errors.New("image pull failed")
		}
		return nil
	}}
	pool := sandbox.NewPool(sandbox.NewProvider(d, nil), nil)
	_, err := pool.Fork(context.Background(), "a", noSpec)
	var pe *sandbox.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "provision", pe.Op)
	sb, err := pool.Fork(context.Background(), "a", noSpec)
	require.NoError(t, err)
	require.NoError(t, sb.Close())
	require.Equal(t, int32(2), d.provisions.Load())
	require.NoError(t, pool.Close())
}

func TestPoolCapacity(t *testing.T) {
	t.Parallel()
	pool := sandbox.NewPool((&sandboxtest.Fake{MaxOpen: 1}).Provider(), nil)
	ctx := context.Background()
	a, err := pool.Fork(ctx, "k", noSpec)
	require.NoError(t, err)

	// Full: a Fork waits, as long as its ctx allows.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = pool.Fork(short, "k", noSpec)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// Closing a sandbox frees its slot once, even if closed twice and
	// from another goroutine while in use.
	got := make(chan *sandbox.Sandbox)
	forkErr := make(chan error, 1)
	go func() {
		sb, err := pool.Fork(ctx, "k", noSpec)
		forkErr <- err
		got <- sb
	}()
	closed := make(chan struct{})
	go func() {
		a.Close()
		close(closed)
	}()
	require.NoError(t, <-forkErr)
	b := <-got
	<-closed
	require.NoError(t, a.Close(), "a second Close")
	short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	_, err = pool.Fork(short2, "k", noSpec)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a double Close freed two slots")
	require.NoError(t, b.Close())
	require.NoError(t, pool.Close())
	_, err = pool.Fork(ctx, "k", noSpec)
	require.ErrorIs(t, err, sandbox.ErrClosed, "Fork after Close")
}

// Waiting for a slot is not provisioning: Timeout bounds only the latter.
func TestPoolTimeoutBoundsProvisioningNotTheWait(t *testing.T) {
	t.Parallel()
	pool := sandbox.NewPool((&sandboxtest.Fake{MaxOpen: 1}).Provider(), &sandbox.PoolOptions{Timeout: 100 * time.Millisecond})
	ctx := context.Background()
	a, err := pool.Fork(ctx, "k", noSpec)
	require.NoError(t, err)
	time.AfterFunc(300*time.Millisecond, func() { a.Close() })
	b, err := pool.Fork(ctx, "k", noSpec) // waits 300 ms, longer than Timeout
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.NoError(t, pool.Close())
}

func TestPanickingDriverIsAnError(t *testing.T) {
	t.Parallel()
	d := &probed{panicFork: true}
	pool := sandbox.NewPool(sandbox.NewProvider(d, &sandbox.ProviderOptions{Capacity: 1}), nil)
	for range 2 { // the slot was given back: the second Fork does not block
		_, err := pool.Fork(context.Background(), "k", noSpec)
		require.ErrorIs(t, err, sandbox.ErrUnavailable)
		require.ErrorContains(t, err, "driver panicked: driver bug")
	}
	_, err := pool.Fork(context.Background(), "other", func() sandbox.Spec { panic("spec bug") })
	require.ErrorContains(t, err, "spec bug")
	require.NoError(t, pool.Close())
}

func TestErrorsAreWrappedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, err := sandbox.Open(ctx, (&sandboxtest.Fake{}).Provider(), sandbox.Spec{})
	require.NoError(t, err)
	defer sb.Close()
	_, err = sb.ReadFile(ctx, "dir/missing")
	var pe *sandbox.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "read", pe.Op)
	require.Equal(t, "dir/missing", pe.Path)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.True(t, strings.HasPrefix(err.Error(), "sandbox: read dir/missing: "), err.Error())

	for name, want := range map[string]error{"..": sandbox.ErrEscape, "../x": sandbox.ErrEscape, "/etc/passwd": sandbox.ErrEscape,
		"a/../../x": sandbox.ErrEscape, "a\x00b": fs.ErrInvalid} {
		_, err := sb.ReadFile(ctx, name)
		require.ErrorIs(t, err, want, "ReadFile %q", name)
	}
	for _, name := range []string{"..name", "a/..b", "...", "a/../b"} {
		require.NoError(t, sb.WriteFile(ctx, name, []byte(name), 0o644), "WriteFile %q", name)
	}
	got, err := sb.ReadFile(ctx, "b")
	require.NoError(t, err)
	require.Equal(t, "a/../b", string(got), `"a/../b" is "b"`)
}
