package console

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Sign-in attempts are bounded per client address and for the console as a whole, as the API
// bounds refused requests (auth.refusal_rate_per_source): a wrong token costs a place in both
// budgets, a right one gives its place back. An address past its budget, or any address while
// the whole is spent, is refused before its token is checked, so the refusal tells nothing about
// the token.
const (
	signInPerSource      = 1 // attempts per second per address
	signInPerSourceBurst = 5
	signInTotal          = 20 // attempts per second in all
	signInTotalBurst     = 40
	// maxSignInSources bounds the per-address limiters; past it they start afresh (an attacker
	// with more addresses gains a fresh budget per address, still within the total).
	maxSignInSources = 16384
)

// signInLimiter holds the sign-in budgets.
type signInLimiter struct {
	mu      sync.Mutex
	total   *rate.Limiter
	sources map[string]*rate.Limiter
}

func newSignInLimiter() *signInLimiter {
	return &signInLimiter{total: rate.NewLimiter(signInTotal, signInTotalBurst), sources: map[string]*rate.Limiter{}}
}

// attempt takes a place in src's budget and the total's. It returns a function that gives the
// places back (for a sign-in that succeeded), or how long until one is free.
func (l *signInLimiter) attempt(src string, now time.Time) (giveBack func(), wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.sources[src]
	if !ok {
		if len(l.sources) >= maxSignInSources {
			clear(l.sources)
		}
		s = rate.NewLimiter(signInPerSource, signInPerSourceBurst)
		l.sources[src] = s
	}
	rs := s.ReserveN(now, 1)
	if d := rs.DelayFrom(now); d > 0 {
		rs.CancelAt(now)
		return nil, d
	}
	rt := l.total.ReserveN(now, 1)
	if d := rt.DelayFrom(now); d > 0 {
		rt.CancelAt(now)
		rs.CancelAt(now)
		return nil, d
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		rs.CancelAt(now)
		rt.CancelAt(now)
	}, 0
}

// signInRefusal is the refusal's message.
func signInRefusal(src string, wait time.Duration) string {
	return fmt.Sprintf("too many sign-in attempts from %s or in all; retry in %s", src, wait.Round(time.Second)+time.Second)
}

// revocations holds the sessions signed out before they expire: a copy of a signed-out cookie
// stops working. It is bounded; full of live entries, the console changes its session keys
// instead, which ends every session at once (each user signs in again).
type revocations struct {
	mu  sync.Mutex
	ids map[string]int64 // session id → expiry, unix seconds
}

// maxRevoked bounds revocations: a user signing in and out again costs an entry until the
// session would have expired.
const maxRevoked = 1 << 16

// revoke records id until exp; false when full of live entries (the caller rotates its keys).
func (r *revocations) revoke(id string, exp int64, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil {
		r.ids = map[string]int64{}
	}
	if len(r.ids) >= maxRevoked {
		for k, e := range r.ids {
			if e <= now.Unix() {
				delete(r.ids, k)
			}
		}
		if len(r.ids) >= maxRevoked {
			clear(r.ids)
			return false
		}
	}
	r.ids[id] = exp
	return true
}

func (r *revocations) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ids[id]
	return ok
}
