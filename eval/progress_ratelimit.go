package eval

// The model gateway's rate governor in progress: each governed lane's
// limit and the calls it holds, read from Config.Models when it governs
// (package gateway's *Gateway does) at each snapshot.

import (
	"cmp"
	"slices"
)

// RateLimit is one lane of the model gateway's rate governor: the calls to
// one provider and model (with one key) that it holds within an adaptive
// limit of calls in flight.
type RateLimit struct {
	Provider, Model string
	// Limit is the calls the lane lets be in flight at once (this
	// process's share, in a distributed run); InFlight and Waiting are
	// the calls sent and held.
	Limit, InFlight, Waiting int
}

// rateGoverned is the optional interface of a Models whose calls are
// rate-governed.
type rateGoverned interface {
	RateLimits(yield func(provider, model string, limit, inFlight, waiting int))
}

// rateLimitsOf returns what reads the governor of m, nil when m has none.
func rateLimitsOf(m Models) func() []RateLimit {
	g, ok := m.(rateGoverned)
	if !ok {
		return nil
	}
	return func() []RateLimit {
		var out []RateLimit
		g.RateLimits(func(provider, model string, limit, inFlight, waiting int) {
			out = append(out, RateLimit{provider, model, limit, inFlight, waiting})
		})
		return out
	}
}

// rateLimitPart is the progress line's part about the governor: its most
// held lane (the most waiting, then the most in flight), when any call
// waits or is in flight.
func (p *Progress) rateLimitPart(add func(rank int, format string, args ...any)) {
	if len(p.RateLimits) == 0 || p.Final {
		return
	}
	l := slices.MaxFunc(p.RateLimits, func(a, b RateLimit) int {
		return cmp.Or(cmp.Compare(a.Waiting, b.Waiting), cmp.Compare(a.InFlight, b.InFlight))
	})
	if l.Waiting == 0 && l.InFlight == 0 {
		return
	}
	add(4, "%s limit %d, %d waiting", l.Model, l.Limit, l.Waiting)
}
