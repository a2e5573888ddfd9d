package eval

// Sandboxes: one environment per sample, a fork per attempt, bounded by
// the provider's capacity; the bookkeeping is sandbox.Pool's.

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	key, spec := strconv.Itoa(j.sample), func() sandbox.Spec {
		if r.e.Sandbox == nil {
			return sandbox.Spec{}
		}
		return r.e.Sandbox(*smp)
	}
	if j.oomKills > 0 && r.cfg.OOMRetryMemory > 1 {
		// A retry after an OOM kill, with more memory: an environment of
		// its own (the sample's keeps its limit for its other epochs),
		// closed once the forks made for such retries are.
		n, base := j.oomKills, spec
		key += "/oom" + strconv.Itoa(int(n))
		spec = func() sandbox.Spec { return scaleMemory(base(), r.cfg.OOMRetryMemory, n) }
		r.pool.Add(key, 1)
		defer r.pool.Done(key)
	}
	sb, err = r.pool.Fork(runCtx, key, spec)
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

// scaleMemory is spec with its memory limit multiplied by factor n times
// (a retry after n OOM kills), bounded by math.MaxInt64; a spec with no
// memory limit is returned as it is.
func scaleMemory(spec sandbox.Spec, factor float64, n uint8) sandbox.Spec {
	if spec.Limits.MemoryBytes <= 0 {
		return spec
	}
	m := float64(spec.Limits.MemoryBytes) * math.Pow(factor, float64(n))
	if m >= math.MaxInt64 {
		spec.Limits.MemoryBytes = math.MaxInt64
	} else {
		spec.Limits.MemoryBytes = int64(m)
	}
	return spec
}
