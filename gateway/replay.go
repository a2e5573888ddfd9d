package gateway

// Replay-resume and the development cache: a keyed episode opened again
// is answered from the call store while its requests match its recorded
// ones, in order, and goes live at the first that does not; a call no
// recording answers may be answered from a development cache (another
// run's store) by its request and epoch.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/usage"
)

// Replay values of a Call.
const (
	// ReplayReplayed: answered from the episode's recorded calls.
	ReplayReplayed = "replayed"
	// ReplayCached: answered from the development cache.
	ReplayCached = "cached"
	// ReplayDiverged: the first call of a replayed episode whose request
	// differed from the recorded one at its place; it and every later
	// call go to the provider.
	ReplayDiverged = "diverged"
)

// stores are a gateway's call store and development cache, and what they
// answered.
type stores struct {
	live, cache atomic.Pointer[store]

	mu                         sync.Mutex
	replayed, cached, diverged int
	saved                      usage.Usage
}

// ReplayCounts returns how many calls the gateway answered from call
// stores (replayed) and development caches (cached), how many episodes'
// replays diverged, and what the calls answered had cost when bought,
// since it was made.
func (g *Gateway) ReplayCounts() (replayed, cached, diverged int, saved usage.Usage) {
	s := &g.stores
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replayed, s.cached, s.diverged, s.saved
}

// count counts one call for ReplayCounts.
func (s *stores) count(how string, saved usage.Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch how {
	case ReplayReplayed:
		s.replayed++
	case ReplayCached:
		s.cached++
	case ReplayDiverged:
		s.diverged++
		return
	}
	s.saved = s.saved.Add(saved)
}

// OpenStore opens the call store at path (sidecar.Calls of the run's
// log), recovering it: a torn tail a crash left is cut off and returned
// (nil when there was none). From then on every completed metered call of
// an episode whose Meter is [Keyed] is stored, and an episode opened with
// a key the store holds is answered from it while its requests match the
// recorded ones, in order: see [Call.Replay]. closeStore flushes and
// closes it (the episodes it served must have ended); flush fsyncs what
// was stored (a graceful stop calls it). A gateway has one store at a
// time.
func (g *Gateway) OpenStore(path string) (torn *jsonl.TornTailError, flush, closeStore func() error, err error) {
	s, torn, err := openStore(path)
	if err != nil {
		return nil, nil, nil, err
	}
	if !g.stores.live.CompareAndSwap(nil, s) {
		s.close()
		return nil, nil, nil, errors.New("gateway: a call store is open already")
	}
	closeStore = func() error {
		if g.stores.live.CompareAndSwap(s, nil) {
			return s.close()
		}
		return nil
	}
	return torn, s.flush, closeStore, nil
}

// OpenCache makes the call store at path (another run's, read only) a
// development cache: a call of a Keyed episode that its own recording
// does not answer is answered from it when it holds a response to the
// same normalized request in the same epoch (Call.Replay "cached", no
// cost). closeCache stops it.
func (g *Gateway) OpenCache(path string) (closeCache func(), err error) {
	s, err := openCache(path)
	if err != nil {
		return nil, err
	}
	if !g.stores.cache.CompareAndSwap(nil, s) {
		return nil, errors.New("gateway: a development cache is open already")
	}
	return func() { g.stores.cache.CompareAndSwap(s, nil) }, nil
}

// StoreShare is a fleet's copy of the call stores of its processes (a
// distributed run's workers: package cluster keeps it in the run's
// JetStream), so that an episode whose process died resumes by replay in
// another. Put is called with each call the store keeps, before the last
// bytes of its answer go on to the agent, as the local write is; Load,
// when an episode is opened, returns the lines Put was given for its key,
// in the order they were put. Both are called concurrently.
type StoreShare struct {
	Put  func(k CallKey, line []byte) error
	Load func(k CallKey) ([][]byte, error)
}

// ShareStore makes the open call store one of a fleet's: each call it
// keeps is put in sh too, and an episode opened is first given the
// fleet's recorded calls of its key (they are added to the local store,
// and replayed from it). Call it after OpenStore, before the episodes;
// an error putting a call is reported by the store's close, one loading
// an episode's by the episode going live from its first call.
func (g *Gateway) ShareStore(sh StoreShare) error {
	s := g.stores.live.Load()
	if s == nil {
		return errors.New("gateway: ShareStore: no call store is open")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shared = &sh
	return nil
}

// replay is a keyed episode's state against the store.
type replay struct {
	key   CallKey
	store *store
	chain []storedRef // the recording it replays
	pos   int         // calls replayed (and the next stored call's Seq)
	live  bool        // gone live: nothing more is replayed
}

// openReplay starts a keyed episode's replay; nil when the episode is not
// keyed or no store is open.
func (g *Gateway) openReplay(m Meter) *replay {
	k, ok := m.(Keyed)
	if !ok {
		return nil
	}
	s := g.stores.live.Load()
	if s == nil {
		return nil
	}
	variant, sample, epoch := k.CallKey()
	key := CallKey{variant, sample, epoch}
	if err := s.importShared(key); err != nil {
		// Replayed from what the store has: at worst the episode goes
		// live sooner.
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
	}
	return &replay{key: key, store: s, chain: s.chain(key)}
}

// recorded returns the stored answer to a call whose request has digest
// req, and how it is answered (ReplayReplayed, ReplayCached); ok false
// for a call that goes live, with diverged set when it is the first call
// that differed from the recording.
func (cl *call) recorded(req string) (sc storedCall, how string, ok bool) {
	ep := cl.ep
	rp := ep.replay
	if rp == nil {
		return sc, "", false
	}
	ep.mu.Lock()
	if !rp.live && rp.pos < len(rp.chain) && rp.chain[rp.pos].req == req {
		ref := rp.chain[rp.pos]
		ep.mu.Unlock()
		sc, err := rp.store.read(ref.off)
		ep.mu.Lock()
		defer ep.mu.Unlock()
		if err == nil && !rp.live {
			rp.pos++
			return sc, ReplayReplayed, true
		}
		rp.live = true
		return sc, "", false
	}
	if !rp.live {
		rp.live = true
		if rp.pos < len(rp.chain) {
			cl.rec.Replay = ReplayDiverged
			cl.g.stores.count(ReplayDiverged, usage.Usage{})
		}
	}
	ep.mu.Unlock()
	if c := cl.g.stores.cache.Load(); c != nil {
		if off, ok := c.lookup(req, rp.key.Epoch); ok {
			if sc, err := c.read(off); err == nil {
				return sc, ReplayCached, true
			}
		}
	}
	return sc, "", false
}

// nextSeq is the Seq of the episode's next stored call.
func (ep *episode) nextSeq() int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	n := ep.replay.pos
	ep.replay.pos++
	return n
}

// serveRecorded answers a call from the store and records it: no cost
// (Usage zero), what it cost when bought in Saved.
func (cl *call) serveRecorded(w http.ResponseWriter, r *http.Request, sc storedCall, how string) {
	rec := &cl.rec
	rec.Replay, rec.Model, rec.Status, rec.Stream = how, sc.Model, sc.Status, len(sc.Events) > 0
	rec.Saved = sc.Usage
	cl.g.stores.count(how, sc.Usage)
	rec.Usage = usage.Usage{Model: sc.Model}
	if sc.Type != "" {
		w.Header().Set("Content-Type", sc.Type)
	}
	w.WriteHeader(sc.Status)
	body := []byte(sc.Body)
	if rec.Stream {
		body = []byte(strings.Join(sc.Events, ""))
		f, _ := w.(http.Flusher)
		for _, ev := range sc.Events {
			if r.Context().Err() != nil {
				rec.Cut = "client"
				break
			}
			w.Write([]byte(ev))
			if f != nil {
				f.Flush()
			}
		}
	} else {
		w.Write(body)
	}
	rec.Duration = cl.g.nowFunc().Sub(rec.Start)
	rec.RequestSHA256, rec.ResponseSHA256 = digest(cl.in), digest(body)
	if len(cl.in) <= cl.g.o.KeepBytes && json.Valid(cl.in) {
		rec.Request = cl.in
	}
	if len(body) <= cl.g.o.KeepBytes {
		rec.Response = keptBody(body, rec.Stream)
	}
	if how == ReplayCached && rec.Cut == "" {
		// Stored as this run's own: a resume replays it.
		k := cl.ep.replay.key
		sc.Variant, sc.Sample, sc.Epoch, sc.Seq = k.Variant, k.Sample, k.Epoch, cl.ep.nextSeq()
		cl.ep.replay.store.put(sc)
	}
	cl.ep.meter.Record(*rec)
}

// storable reports whether a call's answer is to be stored: a metered
// success of a keyed episode, while a store is open.
func (cl *call) storable() bool {
	return cl.ep.replay != nil && cl.rt.metered && cl.rec.Status/100 == 2 && cl.reqDigest != ""
}

// storeAnswer stores a live call's complete answer b.
func (cl *call) storeAnswer(b []byte, stream bool, contentType string) {
	if !utf8.Valid(b) {
		return // a JSON line would not keep it byte for byte
	}
	u := cl.c.estimate()
	u.Model = cl.c.model
	u.CostUSD = cl.g.o.Prices.Cost(cl.c.model, u)
	rp := cl.ep.replay
	sc := storedCall{Variant: rp.key.Variant, Sample: rp.key.Sample, Epoch: rp.key.Epoch, Seq: cl.ep.nextSeq(), Req: cl.reqDigest, API: cl.rt.api,
		Model: cl.c.model, Status: cl.rec.Status, Type: contentType, Usage: u}
	if stream {
		sc.Events = events(b)
	} else {
		sc.Body = string(b)
	}
	rp.store.put(sc)
}
