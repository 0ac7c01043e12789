package executor

import (
	"math/rand/v2"
	"time"
)

// backoff is capped exponential backoff with jitter: each delay is drawn
// uniformly from [cur/2, cur], cur doubling from min up to max. The cap is a bound, never passed:
// the reconnect pause must stay inside the server's heartbeat timeout (capBackoff). That is why
// this is not cenkalti/backoff, whose randomization spreads each delay around its interval, up to
// 1.5 times the maximum with the usual factor.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(lo, hi time.Duration) *backoff { return &backoff{min: lo, max: hi} }

func (b *backoff) next() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.min
	case b.cur < b.max:
		b.cur = min(b.cur*2, b.max)
	}
	half := b.cur / 2
	return half + rand.N(half+1)
}

func (b *backoff) reset() { b.cur = 0 }
