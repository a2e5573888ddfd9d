package gateway

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
)

// tokenPrefix marks a gateway token, so that one pasted in the wrong place
// is recognisable; what follows is an id and a secret.
const tokenPrefix = "proctor-gw-"

// episode is one open episode: its meter and the secret half of its token.
type episode struct {
	meter  Meter
	secret []byte
}

// Open admits one episode: it returns the token the episode's sandbox
// presents as its API key, and end, which revokes it (later calls with it
// are refused with 401; calls in flight finish and are recorded). end may be
// called more than once.
//
// A token is "proctor-gw-" + a 64-bit id + "." + a 256-bit secret, from
// crypto/rand: the id finds the episode, the secret is compared in
// constant time, so neither a lookup's timing nor a guess reveals it.
func (g *Gateway) Open(m Meter) (token string, end func()) {
	var raw [8 + 32]byte
	rand.Read(raw[:]) // never fails (crypto/rand: it panics rather)
	id := base64.RawURLEncoding.EncodeToString(raw[:8])
	ep := &episode{meter: m, secret: []byte(base64.RawURLEncoding.EncodeToString(raw[8:]))}
	g.mu.Lock()
	g.tokens[id] = ep
	g.mu.Unlock()
	end = func() {
		g.mu.Lock()
		if g.tokens[id] == ep {
			delete(g.tokens, id)
		}
		g.mu.Unlock()
	}
	return tokenPrefix + id + "." + string(ep.secret), end
}

// lookup returns the episode of the token r presents (Authorization:
// Bearer, or x-api-key), or nil.
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
	ep := g.tokens[id]
	g.mu.RUnlock()
	if ep == nil || subtle.ConstantTimeCompare(ep.secret, []byte(secret)) != 1 {
		return nil
	}
	return ep
}
