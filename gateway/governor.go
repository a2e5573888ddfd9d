package gateway

// The rate governor: per (provider, model, key), a lane that holds the
// calls to it within an adaptive limit, so that a fleet of agents meets the
// provider's rate limit by waiting rather than by failing.
//
//   - Concurrency is AIMD, as TCP's congestion window: it starts at
//     GovernorOptions.Initial, doubles per window of successes until the
//     first congestion answer (slow start), then grows by one per window
//     of successes; a congestion answer (429, 503, 529, or an error body of
//     type rate_limit_exceeded, rate_limit_error or overloaded_error, or a
//     stream's error event of those types, as Anthropic sends mid-stream)
//     halves it, once per window (the calls already in flight when it was
//     cut do not cut it again).
//   - A congestion answer holds the lane for its Retry-After (or
//     retry-after-ms), else for defaultHold.
//   - The rate-limit headers of every answer keep a mirror of the
//     provider's request bucket (what remains, less the calls sent since
//     the answer's call, refilled at the rate the headers imply), and a
//     call waits for a request to be there; spent tokens hold the lane
//     until they reset.
//   - A congestion answer is not passed to the agent: its call goes back
//     to the head of the lane's queue and is sent again, up to
//     GovernorOptions.Retries times, while the hold fits MaxWait and the
//     episode's time; past that the agent gets the provider's answer as it
//     came (its SDK retries as it would have).

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// GovernorOptions tune the rate governor (Options.Governor). The zero value
// governs with the defaults.
type GovernorOptions struct {
	// Off forwards every call at once, as the agent sends it: a
	// congestion answer reaches the agent.
	Off bool
	// Initial is a lane's first limit of calls in flight; 0:
	// DefaultGovernorInitial.
	Initial int
	// Max bounds a lane's limit; 0: DefaultGovernorMax.
	Max int
	// Retries is how many congestion answers of one call the gateway
	// waits out and sends again before the agent gets one; 0:
	// DefaultGovernorRetries, negative: none.
	Retries int
	// MaxWait bounds one hold (a Retry-After, a reset): a call is not sent
	// again when the hold is longer, and the agent gets the provider's
	// answer; 0: DefaultGovernorMaxWait.
	MaxWait time.Duration
	// Share, when set, makes each lane one limit among the processes
	// that share it (package cluster's, for a distributed run's workers).
	Share LimitShare
}

// The governor's defaults.
const (
	DefaultGovernorInitial = 16
	DefaultGovernorMax     = 1024
	DefaultGovernorRetries = 8
	DefaultGovernorMaxWait = 2 * time.Minute
	// defaultHold is how long a congestion answer without a hint holds
	// its lane.
	defaultHold = time.Second
)

// Lane is one governed (provider, model, key): its limit and its calls.
type Lane struct {
	Provider, Model string
	// KeyID identifies the key (the first 16 hex digits of its SHA-256),
	// never the key itself.
	KeyID string
	// Limit is the calls the lane lets be in flight at once (this
	// process's share, in a fleet); InFlight and Waiting its calls sent
	// and held.
	Limit, InFlight, Waiting int
	// HeldUntil is set while the lane is held by a Retry-After or a
	// spent limit.
	HeldUntil time.Time
	// Throttled counts the congestion answers the lane has had.
	Throttled int64
}

type governor struct {
	o      GovernorOptions
	now    func() time.Time
	mu     sync.Mutex
	lanes  map[laneKey]*lane
	member string // this process, in a shared lane's members
}

type laneKey struct{ provider, model, keyID string }

func newGovernor(o GovernorOptions, now func() time.Time) *governor {
	if o.Initial <= 0 {
		o.Initial = DefaultGovernorInitial
	}
	if o.Max <= 0 {
		o.Max = DefaultGovernorMax
	}
	o.Initial = min(o.Initial, o.Max)
	if o.Retries == 0 {
		o.Retries = DefaultGovernorRetries
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultGovernorMaxWait
	}
	return &governor{o: o, now: now, lanes: map[laneKey]*lane{}}
}

func (gv *governor) lane(provider, model, key string) *lane {
	k := laneKey{provider, model, digest([]byte(key))[:16]}
	gv.mu.Lock()
	defer gv.mu.Unlock()
	l := gv.lanes[k]
	if l == nil {
		l = &lane{gv: gv, key: k, window: float64(gv.o.Initial), slowStart: true, share: 1}
		gv.lanes[k] = l
	}
	if gv.o.Share != nil && l.shared == nil {
		if gv.member == "" {
			gv.member = newMember()
		}
		l.mu.Lock()
		l.startSharing(gv.o.Share, gv.member)
		l.mu.Unlock()
	}
	return l
}

// Lanes returns the governor's lanes, by provider, model and key.
func (g *Gateway) Lanes() []Lane {
	if g.gov == nil {
		return nil
	}
	g.gov.mu.Lock()
	lanes := make([]*lane, 0, len(g.gov.lanes))
	for _, l := range g.gov.lanes {
		lanes = append(lanes, l)
	}
	g.gov.mu.Unlock()
	out := make([]Lane, 0, len(lanes))
	for _, l := range lanes {
		out = append(out, l.state())
	}
	slices.SortFunc(out, func(a, b Lane) int {
		return strings.Compare(a.Provider+"\x00"+a.Model+"\x00"+a.KeyID, b.Provider+"\x00"+b.Model+"\x00"+b.KeyID)
	})
	return out
}

// RateLimits gives each lane's provider, model, limit and calls in flight
// and waiting to yield: the engine's progress reads the governor through
// it (package eval's optional interface of Config.Models).
func (g *Gateway) RateLimits(yield func(provider, model string, limit, inFlight, waiting int)) {
	for _, l := range g.Lanes() {
		yield(l.Provider, l.Model, l.Limit, l.InFlight, l.Waiting)
	}
}

// lane is one (provider, model, key). Its fields are guarded by mu.
type lane struct {
	gv  *governor
	key laneKey

	mu        sync.Mutex
	window    float64 // the AIMD limit of calls in flight (the fleet's, when shared)
	slowStart bool    // no congestion yet: grow by one per success
	share     float64 // this process's part of the window and bucket (1 alone)
	inflight  int
	queue     []*waiter // FIFO; a call sent again goes first
	holdUntil time.Time
	sent      uint64 // calls sent so far: a call's ticket is its number
	cutAt     uint64 // sent when the window was last cut
	throttled int64

	// bucket mirrors the provider's request limit, once its headers told.
	// Its rate is the ratio of decaying sums of what was missing and the
	// time to fill it, over the answers: each answer's own ratio is off by
	// up to half a request, the sums' much less.
	bucket struct {
		known                 bool
		level, rate, capacity float64
		missing, fill         float64
		at                    time.Time
	}

	timer   *time.Timer
	timerAt time.Time

	shared *laneShare // nil unless GovernorOptions.Share
}

type waiter struct {
	ready   chan struct{}
	ticket  uint64
	granted bool
}

// limit is the calls this process may have in flight on the lane.
func (l *lane) limit() int { return max(1, int(l.window*l.share)) }

func (l *lane) state() Lane {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Lane{Provider: l.key.provider, Model: l.key.model, KeyID: l.key.keyID, Limit: l.limit(),
		InFlight: l.inflight, Waiting: len(l.queue), Throttled: l.throttled}
	if l.holdUntil.After(l.gv.now()) {
		s.HeldUntil = l.holdUntil
	}
	return s
}

// acquire waits until the lane lets a call go (first: ahead of the calls
// waiting, for a call sent again) and returns its ticket; an error when
// ctx ends first.
func (l *lane) acquire(ctx context.Context, first bool) (uint64, error) {
	w := &waiter{ready: make(chan struct{})}
	l.mu.Lock()
	l.wakeShare()
	if first {
		l.queue = slices.Insert(l.queue, 0, w)
	} else {
		l.queue = append(l.queue, w)
	}
	l.pump()
	l.mu.Unlock()
	select {
	case <-w.ready:
		return w.ticket, nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted { // granted as ctx ended: give it back
		l.inflight--
		l.pump()
	} else if i := slices.Index(l.queue, w); i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
	}
	return 0, context.Cause(ctx)
}

// pump lets waiting calls go while the lane allows; when a hold or the
// bucket stops it, a timer calls it again. l.mu is held.
func (l *lane) pump() {
	now := l.gv.now()
	for len(l.queue) > 0 && l.inflight < l.limit() {
		if now.Before(l.holdUntil) {
			l.wakeAt(l.holdUntil)
			return
		}
		if l.bucket.known {
			lvl := l.level(now)
			if lvl < 1 {
				if rate := l.bucket.rate * l.share; rate > 0 {
					// At least a millisecond: a wake rounded to now would
					// find the level a hair short again.
					l.wakeAt(now.Add(max(time.Duration((1-lvl)/rate*float64(time.Second)), time.Millisecond)))
				}
				return
			}
			l.bucket.level, l.bucket.at = lvl-1, now
		}
		w := l.queue[0]
		l.queue = l.queue[1:]
		l.inflight++
		l.sent++
		w.ticket, w.granted = l.sent, true
		close(w.ready)
	}
}

// level is the mirror's requests at now: what the provider last said,
// refilled since at this process's share of its rate.
func (l *lane) level(now time.Time) float64 {
	b := &l.bucket
	lvl := b.level + now.Sub(b.at).Seconds()*b.rate*l.share
	if b.capacity > 0 {
		lvl = min(lvl, b.capacity*l.share)
	}
	return lvl
}

func (l *lane) wakeAt(t time.Time) {
	if l.timer != nil && !l.timerAt.After(t) {
		return // an earlier wake will pump, and arm this one if still needed
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.timerAt = t
	l.timer = time.AfterFunc(t.Sub(l.gv.now()), func() {
		l.mu.Lock()
		l.timer = nil
		l.pump()
		l.mu.Unlock()
	})
}

// answer is what an answer's status, headers and error body say.
type answer struct {
	congested bool
	ok        bool // 2xx
	hdr       rateHeaders
}

// observe learns from the answer to ticket's call, as its headers arrive:
// the provider's limits, and a congestion answer's cut and hold. It
// returns how long the lane is now held.
func (l *lane) observe(ticket uint64, a answer) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.gv.now()
	after := float64(l.sent - ticket) // calls sent since: they spent what this answer says remains
	if r := a.hdr.requests; r.known {
		b := &l.bucket
		b.known, b.at = true, now
		b.level = (r.remaining - after) * l.share
		if r.limit > 0 {
			b.capacity = r.limit
		}
		if n, in, ok := r.missing(); ok {
			const decay = 0.9
			b.missing = b.missing*decay + n
			b.fill = b.fill*decay + in.Seconds()
			b.rate = b.missing / b.fill
		} else if r.remaining-after < 1 && r.reset > 0 && b.rate == 0 {
			l.hold(now.Add(r.reset))
		}
	}
	if t := a.hdr.tokens; t.known && t.remaining <= 0 && t.reset > 0 {
		l.hold(now.Add(t.reset))
	}
	if a.congested {
		l.throttled++
		if ticket > l.cutAt {
			l.window = max(1, l.window/2)
			l.slowStart = false
			l.cutAt = l.sent
			l.shared.cut()
		}
		d := defaultHold
		if a.hdr.hasRetryAfter {
			d = a.hdr.retryAfter
		}
		l.hold(now.Add(d))
		if l.bucket.known {
			l.bucket.level, l.bucket.at = min(l.bucket.level, -after*l.share), now
		}
	} else if a.ok && l.inflight >= l.limit() {
		// The window was in use: it may grow.
		grow := 1 / l.window
		if l.slowStart {
			grow = 1
		}
		l.window = min(l.window+grow, float64(l.gv.o.Max))
		l.shared.grow(grow)
	}
	l.pump()
	return max(l.holdUntil.Sub(now), 0)
}

func (l *lane) hold(until time.Time) {
	if until.After(l.holdUntil) {
		l.holdUntil = until
		l.shared.hold(until)
	}
}

// done ends ticket's call: its place in flight is free.
func (l *lane) done() {
	l.mu.Lock()
	l.inflight--
	l.pump()
	l.mu.Unlock()
}

// governedTransport is the gateway's forwarding hook: it sends a metered
// call through its lane, waits out and retries its congestion answers,
// and frees its place in flight when its answer's body is closed.
type governedTransport struct {
	gv   *governor
	next http.RoundTripper
}

// maxErrorRead bounds the error body read to classify an answer.
const maxErrorRead = 64 << 10

func (t governedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	cl, _ := req.Context().Value(stateKey{}).(*call)
	if cl == nil || !cl.rt.metered {
		return t.next.RoundTrip(req)
	}
	ctx := req.Context()
	l := t.gv.lane(cl.rt.up.name, cl.rec.Model, cl.rt.up.key)
	for attempt := 0; ; attempt++ {
		r := req
		if attempt > 0 {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r = req.Clone(ctx)
			r.Body = body
		}
		asked := t.gv.now()
		ticket, err := l.acquire(ctx, attempt > 0)
		cl.rec.Waited += t.gv.now().Sub(asked)
		if err != nil {
			return nil, err
		}
		resp, err := t.next.RoundTrip(r)
		if err != nil {
			l.done()
			return nil, err
		}
		a := classify(resp, t.gv.now())
		held := l.observe(ticket, a)
		if a.congested && t.retry(ctx, attempt, held) {
			io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorRead))
			resp.Body.Close()
			l.done()
			cl.rec.Throttled++
			continue
		}
		// A stream the provider ends with an overload error event (its
		// status said 200) is congestion too: its window is cut and its
		// lane held, though the call, half answered, is not sent again.
		cl.congestedMidStream = func() { l.observe(ticket, answer{congested: true}) }
		resp.Body = &releasingBody{ReadCloser: resp.Body, l: l}
		return resp, nil
	}
}

// retry reports whether a call answered with congestion is sent again: it
// has retries left, and the lane's hold ends within MaxWait and the
// episode's time.
func (t governedTransport) retry(ctx context.Context, attempt int, held time.Duration) bool {
	if attempt >= t.gv.o.Retries || held > t.gv.o.MaxWait || ctx.Err() != nil {
		return false
	}
	dl, ok := ctx.Deadline()
	return !ok || t.gv.now().Add(held).Before(dl)
}

// classify reads an answer's headers and, for an error status, the start
// of its body (put back for the agent).
func classify(resp *http.Response, now time.Time) answer {
	a := answer{ok: resp.StatusCode/100 == 2, hdr: parseRateHeaders(resp.Header, now)}
	if resp.StatusCode < 400 {
		return a
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorRead))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytesReader(head, err), resp.Body), resp.Body}
	a.congested = congestion(resp.StatusCode, head)
	return a
}

// bytesReader gives back what was read, then the read's error (nil: the
// rest of the body follows).
func bytesReader(b []byte, err error) io.Reader {
	r := io.Reader(strings.NewReader(string(b)))
	if err != nil {
		r = io.MultiReader(r, errReader{err})
	}
	return r
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// congestion reports whether an error answer says the provider is over its
// rate or capacity: 429 (but an account out of credit, which waiting does
// not mend), 503, 529, or an error of a rate or overload type.
func congestion(status int, body []byte) bool {
	s := string(body)
	if strings.Contains(s, "insufficient_quota") || strings.Contains(s, "billing") {
		return false
	}
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, 529:
		return true
	}
	return strings.Contains(s, "rate_limit_exceeded") || strings.Contains(s, "rate_limit_error") || strings.Contains(s, "overloaded_error")
}

// releasingBody frees the call's place in flight once, when its answer's
// body is closed.
type releasingBody struct {
	io.ReadCloser
	l    *lane
	once sync.Once
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.l.done)
	return err
}
