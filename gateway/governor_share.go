package gateway

// Sharing a lane among processes (GovernorOptions.Share): the workers of a
// distributed run on one key hold one limit, not one each. Each lane is one
// small JSON value in a shared store, updated atomically (read, merge,
// compare-and-set) by every process on the lane every shareEvery:
//
//   - window is the fleet's AIMD limit: each process adds the growth its
//     successes earned since its last update, and a cut halves it, once
//     per cutGuard however many processes met the congestion;
//   - members are the processes on the lane, each stamped at its latest
//     update and dropped memberTTL after: each process takes 1/members of
//     the window and of the request bucket's refill;
//   - holdUntil is the latest hold any of them met (a Retry-After);
//   - rate and capacity are the request bucket as the latest to read
//     the provider's headers found it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// LimitShare is a store that processes governing the same keys share
// their lanes through: it replaces the value at key with update's result
// for the value stored (nil when none), atomically; when another process
// stored a value in between, it calls update again on that one. Package
// cluster's is a distributed run's JetStream key-value bucket.
type LimitShare func(ctx context.Context, key string, update func(old []byte) ([]byte, error)) error

// ShareLimits makes the gateway's lanes shared through share from their
// next call on (GovernorOptions.Share, set after New): package cluster's
// workers call it on the run's gateway.
func (g *Gateway) ShareLimits(share func(ctx context.Context, key string, update func(old []byte) ([]byte, error)) error) {
	if g.gov == nil {
		return
	}
	g.gov.mu.Lock()
	g.gov.o.Share = share
	g.gov.mu.Unlock()
}

const (
	shareEvery = 250 * time.Millisecond
	memberTTL  = 5 * time.Second
	cutGuard   = time.Second
	// shareIdle is how long a lane with no calls keeps updating before
	// it stops (and leaves the members memberTTL later).
	shareIdle = 5 * time.Second
	// maxMembers bounds the members a shared value may list.
	maxMembers = 4096
)

// sharedLane is a lane's value in the store.
type sharedLane struct {
	Window    float64              `json:"window"`
	CutAt     time.Time            `json:"cut_at,omitzero"`
	HoldUntil time.Time            `json:"hold_until,omitzero"`
	Rate      float64              `json:"rate,omitempty"`
	Capacity  float64              `json:"capacity,omitempty"`
	Members   map[string]time.Time `json:"members"`
}

// decodeSharedLane reads a lane's value as another process stored it.
func decodeSharedLane(b []byte) (sharedLane, error) {
	var s sharedLane
	if err := json.Unmarshal(b, &s); err != nil {
		return sharedLane{}, fmt.Errorf("gateway: a shared lane: %w", err)
	}
	switch {
	case !(s.Window >= 0) || math.IsInf(s.Window, 1):
		return sharedLane{}, fmt.Errorf("gateway: a shared lane's window %v: want a count", s.Window)
	case !(s.Rate >= 0) || math.IsInf(s.Rate, 1) || !(s.Capacity >= 0) || math.IsInf(s.Capacity, 1):
		return sharedLane{}, fmt.Errorf("gateway: a shared lane's rate %v and capacity %v: want counts", s.Rate, s.Capacity)
	case len(s.Members) > maxMembers:
		return sharedLane{}, fmt.Errorf("gateway: a shared lane lists %d members, over %d", len(s.Members), maxMembers)
	}
	return s, nil
}

// laneNews is what one process learned of a lane since its last update.
type laneNews struct {
	window         float64 // its window, for a lane the store does not have yet
	grow           float64
	cut            bool
	holdUntil      time.Time
	rate, capacity float64
}

// merge is s with n from member at now.
func (s sharedLane) merge(n laneNews, member string, now time.Time, maxWindow int) sharedLane {
	if s.Window == 0 {
		s.Window = n.window
	}
	s.Window += n.grow
	if n.cut && now.Sub(s.CutAt) >= cutGuard {
		s.Window, s.CutAt = s.Window/2, now
	}
	s.Window = min(max(s.Window, 1), float64(maxWindow))
	if n.holdUntil.After(s.HoldUntil) {
		s.HoldUntil = n.holdUntil
	}
	if n.rate > 0 {
		s.Rate, s.Capacity = n.rate, n.capacity
	}
	members := map[string]time.Time{member: now}
	for m, at := range s.Members {
		if m != member && now.Sub(at) < memberTTL && len(members) < maxMembers {
			members[m] = at
		}
	}
	s.Members = members
	return s
}

// laneShare is a lane's side of a LimitShare; its fields are guarded by
// the lane's mu. A nil *laneShare is a lane alone.
type laneShare struct {
	share   LimitShare
	member  string
	key     string
	news    laneNews
	running bool // the update loop runs
	err     error
}

// shareKey is the lane's key in the store: its provider, key ID and a
// digest of its model (a model's name may hold any character).
func (k laneKey) shareKey() string {
	return "lane." + k.provider + "." + k.keyID + "." + digest([]byte(k.model))[:16]
}

func newMember() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *laneShare) cut() {
	if s != nil {
		s.news.cut = true
	}
}

func (s *laneShare) grow(d float64) {
	if s != nil {
		s.news.grow += d
	}
}

func (s *laneShare) hold(until time.Time) {
	if s != nil && until.After(s.news.holdUntil) {
		s.news.holdUntil = until
	}
}

// startSharing makes l shared through share; l.mu is held. Its loop runs
// while the lane has calls (see wakeShare).
func (l *lane) startSharing(share LimitShare, member string) {
	l.shared = &laneShare{share: share, member: member, key: l.key.shareKey()}
	l.wakeShare()
}

// wakeShare starts the lane's update loop if it is not running; l.mu is
// held.
func (l *lane) wakeShare() {
	if l.shared == nil || l.shared.running {
		return
	}
	l.shared.running = true
	go l.shareLoop()
}

func (l *lane) shareLoop() {
	idle := time.Duration(0)
	for {
		l.syncShare()
		l.mu.Lock()
		if l.inflight == 0 && len(l.queue) == 0 {
			idle += shareEvery
		} else {
			idle = 0
		}
		if idle >= shareIdle {
			l.shared.running = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		time.Sleep(shareEvery)
	}
}

// syncShare sends the lane's news to the store and takes the fleet's lane
// back. An update that fails leaves the lane as it was (its news is sent
// with the next).
func (l *lane) syncShare() {
	l.mu.Lock()
	s := l.shared
	n := s.news
	s.news = laneNews{}
	n.window = l.window
	if l.bucket.known && l.bucket.rate > 0 {
		n.rate, n.capacity = l.bucket.rate, l.bucket.capacity
	}
	l.mu.Unlock()
	var fleet sharedLane
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err := s.share(ctx, s.key, func(old []byte) ([]byte, error) {
		var cur sharedLane
		if old != nil {
			var err error
			if cur, err = decodeSharedLane(old); err != nil {
				cur = sharedLane{} // a value no process could use: started again
			}
		}
		fleet = cur.merge(n, s.member, l.gv.now(), l.gv.o.Max)
		return json.Marshal(fleet)
	})
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	s.err = err
	if err != nil {
		// Keep the news for the next update.
		s.news.grow += n.grow
		s.news.cut = s.news.cut || n.cut
		if n.holdUntil.After(s.news.holdUntil) {
			s.news.holdUntil = n.holdUntil
		}
		return
	}
	l.window = min(max(fleet.Window+s.news.grow, 1), float64(l.gv.o.Max))
	l.share = 1 / float64(max(len(fleet.Members), 1))
	if fleet.HoldUntil.After(l.holdUntil) {
		l.holdUntil = fleet.HoldUntil
	}
	if !fleet.CutAt.IsZero() {
		l.slowStart = false
	}
	l.pump()
}
