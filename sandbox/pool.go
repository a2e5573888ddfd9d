package sandbox

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"
)

// PoolOptions configures a [Pool]. The zero value is valid.
type PoolOptions struct {
	// Capacity bounds the sandboxes open at once; 0 means the provider's
	// [Provider.Capacity] (itself 0 for no bound).
	Capacity int
	// Timeout bounds each provisioning and each fork, not the wait for a
	// capacity slot: queueing is nobody's fault. 0 means only ctx bounds
	// them.
	Timeout time.Duration
}

// Pool hands out sandboxes for many keys (a sample each, say): it
// provisions one environment per key, the first time a fork of it is
// asked for; forks one sandbox per use; bounds how many are open at once;
// and closes a key's environment after its last announced use. Its methods
// may be called concurrently.
//
// A typical run announces every key's uses with Add, then, per episode,
// calls Fork, uses and closes the sandbox, and calls Done:
//
//	pool.Add(key, epochs)
//	sb, err := pool.Fork(ctx, key, spec) // per attempt
//	… sb.Close()
//	pool.Done(key) // per episode, once settled
type Pool struct {
	p       *Provider
	slots   chan struct{} // capacity tokens; nil when unbounded
	timeout time.Duration

	mu     sync.Mutex
	keys   map[string]*poolKey
	closed bool
}

type poolKey struct {
	uses int // announced uses not yet Done

	mu  sync.Mutex // held while provisioning
	env *Environment
}

// NewPool returns a pool over p; opts may be nil.
func NewPool(p *Provider, opts *PoolOptions) *Pool {
	var o PoolOptions
	if opts != nil {
		o = *opts
	}
	if o.Capacity == 0 {
		o.Capacity = p.Capacity()
	}
	pool := &Pool{p: p, timeout: o.Timeout, keys: map[string]*poolKey{}}
	if o.Capacity > 0 {
		pool.slots = make(chan struct{}, o.Capacity)
	}
	return pool
}

// Add announces that key's environment will serve uses more episodes: it
// is closed once Done has been called that many times.
func (p *Pool) Add(key string, uses int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entry(key).uses += uses
}

// entry returns key's entry, creating it; p.mu is held.
func (p *Pool) entry(key string) *poolKey {
	k := p.keys[key]
	if k == nil {
		k = &poolKey{}
		p.keys[key] = k
	}
	return k
}

// Fork waits for a capacity slot (as long as ctx allows), provisions key's
// environment from spec() if it has none yet (a failed provision is tried
// again by the next Fork), and forks a sandbox from it. Closing the
// sandbox frees its slot. An error wrapping a [*PathError] with Op
// "provision" or "fork" says which step failed.
func (p *Pool) Fork(ctx context.Context, key string, spec func() Spec) (*Sandbox, error) {
	if p.slots != nil {
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, &PathError{Op: "fork", Err: ctx.Err()}
		}
	}
	sb, err := p.fork(ctx, key, spec)
	if err != nil {
		p.free()
		return nil, err
	}
	if p.slots != nil {
		after := sb.after
		sb.after = func() error {
			p.free()
			if after != nil {
				return after()
			}
			return nil
		}
	}
	return sb, nil
}

func (p *Pool) free() {
	if p.slots != nil {
		<-p.slots
	}
}

func (p *Pool) fork(ctx context.Context, key string, spec func() Spec) (*Sandbox, error) {
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, &PathError{Op: "fork", Err: ErrClosed}
	}
	k := p.entry(key)
	p.mu.Unlock()

	k.mu.Lock()
	env := k.env
	if env == nil {
		var s Spec
		if err := call(func() error { s = spec(); return nil }); err != nil {
			k.mu.Unlock()
			return nil, &PathError{Op: "provision", Err: err}
		}
		var err error
		if env, err = p.p.Provision(ctx, s); err != nil {
			k.mu.Unlock()
			return nil, err
		}
		k.env = env
	}
	k.mu.Unlock()
	return env.Fork(ctx)
}

// Done settles one use of key; after the last announced use the key's
// environment is closed (forks still open stay usable).
func (p *Pool) Done(key string) error {
	p.mu.Lock()
	k := p.keys[key]
	if k == nil {
		p.mu.Unlock()
		return nil
	}
	k.uses--
	if k.uses > 0 {
		p.mu.Unlock()
		return nil
	}
	delete(p.keys, key)
	p.mu.Unlock()
	return k.close()
}

func (k *poolKey) close() error {
	k.mu.Lock()
	env := k.env
	k.env = nil
	k.mu.Unlock()
	if env != nil {
		return env.Close()
	}
	return nil
}

// Close closes every environment left; sandboxes still open stay usable
// until closed. Fork fails after Close.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	keys := p.keys
	p.keys = map[string]*poolKey{}
	p.mu.Unlock()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		errs = append(errs, keys[name].close())
	}
	return errors.Join(errs...)
}
