package gateway

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"math"
	"net/http"
	"strings"
	"sync"

	"github.com/proctor-evals/proctor/usage"
)

// tokenPrefix marks a gateway token, so that one pasted in the wrong place
// is recognisable; what follows is an id and a secret.
const tokenPrefix = "proctor-gw-"

// episode is one open episode: its meter, the secret half of its token,
// and its calls in flight, which end cancels and waits for.
type episode struct {
	meter    Meter
	secret   []byte
	ctx      context.Context
	cancel   context.CancelFunc
	inflight sync.WaitGroup

	mu     sync.Mutex
	held   held    // answers the agent may already have read, not yet recorded
	replay *replay // nil: not kept in a call store (replay.go); its state under mu
}

// held is what an episode's answers on their way spent: only what the
// budget reads (Budget's two dimensions), in nano-dollars so that a
// release takes back exactly what its hold added.
type held struct {
	tokens, nanoUSD int64
}

func heldOf(u usage.Usage) held { return held{u.Tokens(), int64(u.CostUSD * 1e9)} }

// hold counts u, the usage of an answer on its way to the agent, against
// the episode's budget until its call is recorded: an agent may send its
// next call as soon as it has read the answer, before the gateway
// recorded it, and that call's budget must not count the answer as
// unspent.
func (ep *episode) hold(u usage.Usage) {
	h := heldOf(u)
	ep.mu.Lock()
	ep.held.tokens += h.tokens
	ep.held.nanoUSD += h.nanoUSD
	ep.mu.Unlock()
}

// release ends a hold once its call is recorded: u is what hold took.
func (ep *episode) release(u usage.Usage) {
	h := heldOf(u)
	ep.mu.Lock()
	ep.held.tokens -= h.tokens
	ep.held.nanoUSD -= h.nanoUSD
	ep.mu.Unlock()
}

// remaining is the meter's budget less what is held.
func (ep *episode) remaining() Budget {
	b := ep.meter.Remaining()
	if !b.Capped {
		return b
	}
	ep.mu.Lock()
	held := ep.held
	ep.mu.Unlock()
	if b.Tokens < math.MaxInt64 {
		b.Tokens -= held.tokens
	}
	if !math.IsInf(b.CostUSD, 1) {
		b.CostUSD -= float64(held.nanoUSD) / 1e9
	}
	return b
}

// Open admits one episode: it returns the token the episode's sandbox
// presents as its API key, and end, which revokes it: later calls with it
// are refused with 401, calls in flight are cancelled (recorded with Cut
// "client"), and end returns once every call of the episode is recorded, so
// that the episode's record holds them all. end may be called more than
// once.
//
// A token is "proctor-gw-" + a 64-bit id + "." + a 256-bit secret, from
// crypto/rand: the id finds the episode, the secret is compared in
// constant time, so neither a lookup's timing nor a guess reveals it.
func (g *Gateway) Open(m Meter) (token string, end func()) {
	var raw [8 + 32]byte
	rand.Read(raw[:]) // never fails (crypto/rand: it panics rather)
	id := base64.RawURLEncoding.EncodeToString(raw[:8])
	ep := &episode{meter: m, secret: []byte(base64.RawURLEncoding.EncodeToString(raw[8:])), replay: g.openReplay(m)}
	ep.ctx, ep.cancel = context.WithCancel(context.Background())
	g.mu.Lock()
	g.tokens[id] = ep
	g.mu.Unlock()
	end = func() {
		g.mu.Lock()
		if g.tokens[id] == ep {
			delete(g.tokens, id)
		}
		g.mu.Unlock()
		ep.cancel()
		ep.inflight.Wait()
	}
	return tokenPrefix + id + "." + string(ep.secret), end
}

// lookup returns the episode of the token r presents (Authorization:
// Bearer, or x-api-key), or nil. A call found is counted in flight (under
// the lock end takes to revoke, so that end waits for it): the caller
// calls ep.inflight.Done when the call is recorded.
func (g *Gateway) lookup(r *http.Request) *episode {
	tok := r.Header.Get("x-api-key")
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && (tok == "" || !strings.HasPrefix(tok, tokenPrefix)) {
		tok = b
	}
	rest, ok := strings.CutPrefix(tok, tokenPrefix)
	if !ok {
		return nil
	}
	id, secret, ok := strings.Cut(rest, ".")
	if !ok {
		return nil
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	ep := g.tokens[id]
	if ep == nil || subtle.ConstantTimeCompare(ep.secret, []byte(secret)) != 1 {
		return nil
	}
	ep.inflight.Add(1)
	return ep
}
