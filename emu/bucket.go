package emu

import (
	"math"
	"time"
)

// MinBurst is the smallest default burst of a Bucket.
const MinBurst = 16 << 10

// maxWait is what Take returns when the profile never offers enough
// capacity again (the rate stays zero).
const maxWait = time.Duration(math.MaxInt64 / 4)

// DefaultBurst returns the default burst in bytes of a bucket for a rail
// of rate rateBps: max(16 KiB, 1 ms worth of the rate).
func DefaultBurst(rateBps float64) int {
	b := rateBps / 8 / 1000
	if !(b > MinBurst) { // also NaN
		return MinBurst
	}
	if b > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(b)
}

// Bucket is a pure token bucket over bytes whose fill rate follows a
// Profile. It holds at most Burst bytes of unused credit; beyond that it
// goes into debt, so that the long-term rate is exactly the profile's.
//
// Time is passed in (a time.Duration since the profile's epoch); a Bucket
// does no I/O and reads no clock. It is not safe for concurrent use.
type Bucket struct {
	profile Profile
	burst   float64 // bytes
	tokens  float64 // bytes; negative = debt
	last    time.Duration
	started bool
}

// NewBucket returns a bucket filled at the rate of p, holding at most
// burst bytes of credit (burst <= 0: DefaultBurst(p.RateBps)). The bucket
// starts full at the time of the first Take.
func NewBucket(p Profile, burst int) *Bucket {
	if burst <= 0 {
		burst = DefaultBurst(p.RateBps)
	}
	return &Bucket{profile: p, burst: float64(burst)}
}

// Burst returns the bucket's burst in bytes.
func (b *Bucket) Burst() int { return int(b.burst) }

// Profile returns the bucket's profile.
func (b *Bucket) Profile() Profile { return b.profile }

// Take accounts for n bytes sent at time now and returns how long the
// caller must wait before sending them: 0 if it may send now, otherwise
// the time until the bytes have been fully paid for at the profile's rate.
// The bytes are accounted at once (the bucket may go into debt), so later
// calls wait for them too.
func (b *Bucket) Take(now time.Duration, n int) time.Duration {
	if w := b.Reserve(now, n) - now; w > 0 {
		return w
	}
	return 0
}

// Reserve accounts for n bytes that are ready to go at time ready and
// returns the time at which they have been paid for at the profile's rate
// (>= ready): the time they leave the link. Credit accrues only up to
// ready, at most Burst bytes of it. A ready time earlier than an earlier
// call's (a backlog: the bytes waited behind earlier ones) adds no credit
// and queues the bytes behind the earlier ones.
//
// Reserve lets a caller whose clock is late (a sleep that overshot) keep the
// exact long-term rate: pass the time the bytes became ready, not the time
// the caller got round to them, and send at once if the returned time has
// passed.
func (b *Bucket) Reserve(ready time.Duration, n int) time.Duration {
	if !b.started {
		b.started = true
		b.last = ready
		b.tokens = b.burst
	}
	if ready > b.last {
		b.tokens += b.profile.bitsBetween(b.last, ready) / 8
		if b.tokens > b.burst {
			b.tokens = b.burst
		}
		b.last = ready
	}
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return b.last
	}
	t, ok := b.profile.advance(b.last, -b.tokens*8)
	if !ok {
		return maxWait
	}
	return t
}

// Rebase shifts the bucket's clock by shift: call it with old-new when the
// origin of the times passed to Take moves from old to new (so that a time
// that was t is now t+old-new). The credit or debt is kept.
func (b *Bucket) Rebase(shift time.Duration) {
	b.last += shift
}
