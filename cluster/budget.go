package cluster

// The run's budgets (Config.MaxTokens, MaxCostUSD) on the model gateway's
// wire, across the workers: the run's spend is one key of the run's
// bucket, "spend", holding what each worker spent (distrib.RunSpend). A
// worker adds its own entry with compare-and-set, and hears every write
// of the key as it is made (a subscription to its subject), so that a
// call on any worker sees what the others spent within a message's
// latency. The coordinator reads it too, and stops the run as
// budget-stopped once it reaches a budget.
//
// Each entry is the most its worker ever reported, and readers merge
// what they read entry by entry, keeping the larger figure: a write read
// late, out of order, or refused by the compare-and-set (its publish
// still reaches the subscribers) never lowers what is known, so no
// worker's spend is lost to another's update.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/internal/distrib"
)

// keySpend is the run's spend, in the run's bucket.
const keySpend = "spend"

// spendEntry is what one worker spent.
type spendEntry struct {
	Tokens  int64 `json:"tokens"`
	NanoUSD int64 `json:"nano_usd"`
}

// maxSpendEntries bounds the workers the spend key names.
const maxSpendEntries = 100_000

// decodeSpend decodes the spend key's value: worker → what it spent.
func decodeSpend(b []byte) (map[string]spendEntry, error) {
	var m map[string]spendEntry
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("cluster: the run's spend: %w", err)
	}
	if len(m) > maxSpendEntries {
		return nil, fmt.Errorf("cluster: the run's spend names %d workers, more than %d", len(m), maxSpendEntries)
	}
	for k, e := range m {
		if e.Tokens < 0 || e.NanoUSD < 0 {
			return nil, fmt.Errorf("cluster: the run's spend: worker %q spent a negative figure", k)
		}
	}
	return m, nil
}

// spendView is what a reader knows of the run's spend: the largest
// figure seen of each worker's entry, and their sum.
type spendView struct {
	skip    string // this worker's own entry, which it counts itself
	mu      sync.Mutex
	entries map[string]spendEntry
	tokens  atomic.Int64 // the sum, saturating
	nanoUSD atomic.Int64
}

func newSpendView(skip string) *spendView {
	return &spendView{skip: skip, entries: map[string]spendEntry{}}
}

// merge folds in a value of the spend key.
func (v *spendView) merge(m map[string]spendEntry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	changed := false
	for k, e := range m {
		if k == v.skip {
			continue
		}
		cur, ok := v.entries[k]
		if !ok && len(v.entries) >= maxSpendEntries {
			continue
		}
		next := spendEntry{max(cur.Tokens, e.Tokens), max(cur.NanoUSD, e.NanoUSD)}
		if next != cur || !ok {
			v.entries[k], changed = next, true
		}
	}
	if !changed {
		return
	}
	var tokens, nano int64
	for _, e := range v.entries {
		tokens, nano = satAdd(tokens, e.Tokens), satAdd(nano, e.NanoUSD)
	}
	v.tokens.Store(tokens)
	v.nanoUSD.Store(nano)
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// exhausted reports whether what v knows reaches a budget (0: none).
func (v *spendView) exhausted(tokens int64, usd float64) bool {
	return tokens > 0 && v.tokens.Load() >= tokens || usd > 0 && float64(v.nanoUSD.Load())/1e9 >= usd
}

// runSpend is a worker's distrib.RunSpend.
type runSpend struct {
	kv   jetstream.KeyValue
	me   string // this worker's entry
	log  *slog.Logger
	view *spendView // the other workers'
	// What this worker counted (Add), and the most it ever was: the count
	// dips for a moment as a call in flight is taken back before its
	// attempt's usage counts (distrib.RunSpend); what it spent does not.
	tokens, nanoUSD       atomic.Int64
	maxTokens, maxNanoUSD atomic.Int64
	kick                  chan struct{}
}

// shareSpend returns cfg with the run's budgets, as its manifest holds
// them (the coordinator's, whatever this worker's flags say), and the
// spend shared with the run's other workers, for the worker's run (ctx);
// cfg as it is and no spend when the run has no budget.
func (w *worker) shareSpend(ctx context.Context, cfg eval.Config) (eval.Config, distrib.RunSpend, error) {
	b := w.manifest.Budget
	if b == nil || b.Tokens <= 0 && b.CostUSD <= 0 {
		return cfg, nil, nil
	}
	me := w.batchIDs[:len(w.batchIDs)-1] // <host>-<pid>-<random>: this process's
	r := &runSpend{kv: w.kv, me: me, log: w.log, view: newSpendView(me), kick: make(chan struct{}, 1)}
	sub, err := w.nc.Subscribe("$KV."+w.n.kv+"."+keySpend, func(msg *nats.Msg) {
		if m, err := decodeSpend(msg.Data); err == nil {
			r.view.merge(m)
		}
	})
	if err != nil {
		return cfg, nil, fmt.Errorf("cluster: the run's spend: %w", err)
	}
	context.AfterFunc(ctx, func() { sub.Unsubscribe() })
	r.read(ctx)
	go r.flush(ctx)
	cfg.MaxTokens, cfg.MaxCostUSD = b.Tokens, b.CostUSD
	return cfg, r, nil
}

// Add implements distrib.RunSpend.
func (r *runSpend) Add(tokens, nanoUSD int64) {
	raise(&r.maxTokens, r.tokens.Add(tokens))
	raise(&r.maxNanoUSD, r.nanoUSD.Add(nanoUSD))
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// raise sets c to v when v is larger.
func raise(c *atomic.Int64, v int64) {
	for old := c.Load(); v > old && !c.CompareAndSwap(old, v); old = c.Load() {
	}
}

// Spent implements distrib.RunSpend.
func (r *runSpend) Spent() (tokens, nanoUSD int64) {
	return satAdd(r.maxTokens.Load(), r.view.tokens.Load()), satAdd(r.maxNanoUSD.Load(), r.view.nanoUSD.Load())
}

// read folds the key's value into the view; its revision, 0 when there
// is none.
func (r *runSpend) read(ctx context.Context) (map[string]spendEntry, uint64, error) {
	e, err := r.kv.Get(ctx, keySpend)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return map[string]spendEntry{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	m, err := decodeSpend(e.Value())
	if err != nil {
		r.log.Warn("proctor: the run's spend key holds what no worker wrote; writing it afresh", "err", err)
		m = map[string]spendEntry{}
	}
	r.view.merge(m)
	return m, e.Revision(), nil
}

// flush writes this worker's entry whenever Add changed it, one write at
// a time, until ctx is done.
func (r *runSpend) flush(ctx context.Context) {
	var sent spendEntry
	for {
		select {
		case <-r.kick:
		case <-ctx.Done():
			return
		}
		for ctx.Err() == nil {
			want := spendEntry{r.maxTokens.Load(), r.maxNanoUSD.Load()}
			if want == sent {
				break
			}
			if err := r.put(ctx, want); err != nil {
				if ctx.Err() == nil {
					r.log.Debug("proctor: writing this worker's spend", "err", err)
					sleep(ctx, 100*time.Millisecond)
				}
				continue
			}
			sent = want
		}
	}
}

// put sets this worker's entry to e, compare-and-set on the key's
// revision, reading it again when another worker wrote first.
func (r *runSpend) put(ctx context.Context, e spendEntry) error {
	for {
		m, rev, err := r.read(ctx)
		if err != nil {
			return err
		}
		m[r.me] = e
		b, _ := json.Marshal(m)
		if rev == 0 {
			_, err = r.kv.Create(ctx, keySpend, b)
		} else {
			_, err = r.kv.Update(ctx, keySpend, b, rev)
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
	}
}

// watchSpend returns a channel closed once the run's spend, as the
// workers report it, reaches a budget of the run; nil (never ready) when
// the run has none. It reads the key every 50 ms until ctx is done (serve
// returns).
func (c *Coordinator) watchSpend(ctx context.Context) <-chan struct{} {
	tokens, usd := c.cfg.MaxTokens, c.cfg.MaxCostUSD
	if tokens <= 0 && usd <= 0 {
		return nil
	}
	spent := make(chan struct{})
	view := newSpendView("")
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			e, err := c.kv.Get(ctx, keySpend)
			if err != nil {
				continue
			}
			if m, err := decodeSpend(e.Value()); err == nil {
				view.merge(m)
			}
			if view.exhausted(tokens, usd) {
				close(spent)
				return
			}
		}
	}()
	return spent
}
