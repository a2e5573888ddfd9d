package eval

// Sandboxes: one environment per sample, a fork per attempt, bounded by
// the provider's capacity.

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sink"
)

type envSlot struct {
	mu  sync.Mutex
	env sandbox.Environment
}

// freeSandbox closes the attempt's sandbox and gives back its capacity
// slot, once: when the attempt returns or when it is abandoned, whichever
// comes first, so that a hung harness holds no slot.
func (j *job) freeSandbox() {
	j.mu.Lock()
	sb, release := j.sb, j.release
	j.sb, j.release = nil, nil
	j.mu.Unlock()
	if sb != nil {
		sb.Close()
	}
	if release != nil {
		release()
	}
}

// openSandbox gives the attempt its own sandbox, forked from the sample's
// environment, before the attempt's clock starts: waiting for a capacity
// slot or for provisioning is not the agent's time. Provisioning and
// forking have a bound of their own, the episode timeout.
func (r *scheduler[T, O]) openSandbox(runCtx context.Context, j *job) (sb sandbox.Sandbox, fault sink.ErrorKind, err error) {
	fault = sink.KindSandbox
	defer func() {
		if p := recover(); p != nil {
			fault, err = sink.KindPanic, fmt.Errorf("sandbox provider panicked: %v\n%s", p, debug.Stack())
		}
		if runCtx.Err() != nil {
			fault = sink.KindCancelled
		}
	}()
	if r.sandboxes != nil {
		select {
		case r.sandboxes <- struct{}{}:
		case <-runCtx.Done():
			return nil, fault, runCtx.Err()
		}
	}
	ctx, cancel := runCtx, context.CancelFunc(func() {})
	if r.cfg.Timeout > 0 {
		ctx, cancel = context.WithTimeout(runCtx, r.cfg.Timeout)
	}
	defer cancel()
	env, err := r.environment(ctx, j.sample)
	if err == nil {
		sb, err = env.Fork(ctx)
		if err != nil {
			err = fmt.Errorf("forking the sandbox: %w", err)
		}
	}
	if err != nil {
		if r.sandboxes != nil {
			<-r.sandboxes
		}
		return nil, fault, err
	}
	j.mu.Lock()
	j.sb = sb
	if r.sandboxes != nil {
		j.release = func() { <-r.sandboxes }
	}
	j.mu.Unlock()
	return sb, "", nil
}

// environment provisions a sample's environment once; a failed provision
// is tried again by the next attempt.
func (r *scheduler[T, O]) environment(ctx context.Context, i int) (sandbox.Environment, error) {
	slot := &r.envs[i]
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.env != nil {
		return slot.env, nil
	}
	var spec sandbox.Spec
	if r.e.Sandbox != nil {
		spec = r.e.Sandbox(r.samples[i])
	}
	env, err := r.cfg.Sandbox.Provision(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("provisioning the sandbox: %w", err)
	}
	slot.env = env
	return env, nil
}

func (r *scheduler[T, O]) closeEnv(i int) {
	slot := &r.envs[i]
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.env != nil {
		slot.env.Close()
		slot.env = nil
	}
}
