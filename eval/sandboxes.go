package eval

// Sandboxes: one environment per sample, a fork per attempt, bounded by
// the provider's capacity; the bookkeeping is sandbox.Pool's.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sink"
)

// newPool makes the run's sandbox pool.
func (r *scheduler[T, O]) newPool() {
	r.pool = sandbox.NewPool(r.cfg.Sandbox, &sandbox.PoolOptions{Timeout: r.cfg.Timeout})
}

// announceAll announces to the pool, per sample, the episodes not done
// yet: its environment is closed after the last of them settles.
func (r *scheduler[T, O]) announceAll() {
	if r.pool == nil {
		return
	}
	for i := range r.samples.len() {
		if n := r.done.left(i, r.cfg.Epochs); n > 0 {
			r.pool.Add(strconv.Itoa(i), n)
		}
	}
}

func (r *scheduler[T, O]) closePool() {
	if r.pool != nil {
		r.pool.Close()
	}
}

// freeSandbox closes the attempt's sandbox, which gives back its capacity
// slot, once: when the attempt returns or when it is abandoned, whichever
// comes first, so that a hung harness holds no slot.
func (j *job) freeSandbox() {
	j.mu.Lock()
	sb := j.sb
	j.sb = nil
	j.mu.Unlock()
	if sb != nil {
		sb.Close()
	}
}

// openSandbox gives the attempt its own sandbox, forked from the sample's
// environment, before the attempt's clock starts: waiting for a capacity
// slot or for provisioning is not the agent's time. Provisioning and
// forking have a bound of their own, the episode timeout (the pool's).
func (r *scheduler[T, O]) openSandbox(runCtx context.Context, j *job, smp *dataset.Sample[T]) (sb *sandbox.Sandbox, fault sink.ErrorKind, err error) {
	sb, err = r.pool.Fork(runCtx, strconv.Itoa(j.sample), func() sandbox.Spec {
		if r.e.Sandbox == nil {
			return sandbox.Spec{}
		}
		return r.e.Sandbox(*smp)
	})
	if err != nil {
		fault = sink.KindSandbox
		if runCtx.Err() != nil {
			fault = sink.KindCancelled
		}
		var pe *sandbox.PathError
		if errors.As(err, &pe) && pe.Op == "provision" {
			return nil, fault, fmt.Errorf("provisioning the sandbox: %w", err)
		}
		return nil, fault, fmt.Errorf("forking the sandbox: %w", err)
	}
	r.samples.digests.add(sb.Resources())
	j.mu.Lock()
	j.sb = sb
	j.mu.Unlock()
	return sb, "", nil
}

// closeEnv settles one episode of sample i: the pool closes the sample's
// environment after its last.
func (r *scheduler[T, O]) closeEnv(i int) {
	if r.pool != nil {
		r.pool.Done(strconv.Itoa(i))
	}
}
