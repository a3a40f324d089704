package emu

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestDefaultBurst(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want int
	}{{1e6, 16 << 10}, {200e6, 25000}, {1e9, 125000}, {100e9, 12500000}, {math.NaN(), 16 << 10}} {
		if got := DefaultBurst(tc.rate); got != tc.want {
			t.Errorf("DefaultBurst(%v) = %d, want %d", tc.rate, got, tc.want)
		}
	}
	if b := NewBucket(Profile{RateBps: 1e9}, 0); b.Burst() != 125000 {
		t.Errorf("default burst = %d", b.Burst())
	}
	if b := NewBucket(Profile{RateBps: 1e9}, 1000); b.Burst() != 1000 {
		t.Errorf("burst = %d", b.Burst())
	}
}

// TestBucketBurst: a full bucket lets Burst bytes through at once, then
// paces.
func TestBucketBurst(t *testing.T) {
	b := NewBucket(Profile{RateBps: 8e6}, 10000) // 1 byte per µs
	if w := b.Take(0, 10000); w != 0 {
		t.Fatalf("first burst waits %v", w)
	}
	if w := b.Take(0, 1000); w != time.Millisecond {
		t.Fatalf("after the burst: wait %v, want 1ms", w)
	}
	// Idle for a long time: the credit is capped at the burst.
	if w := b.Take(10*sec, 10000); w != 0 {
		t.Fatalf("after idle: wait %v", w)
	}
	if w := b.Take(10*sec, 1); w != time.Microsecond {
		t.Fatalf("after idle burst: wait %v, want 1µs", w)
	}
}

// TestBucketRateExact drives a bucket in virtual time with random chunk
// sizes and random oversleeping, and checks that the long-term rate is
// exactly the profile's.
func TestBucketRateExact(t *testing.T) {
	for _, rate := range []float64{50e6, 200e6, 1e9, 12345} {
		rng := rand.New(rand.NewPCG(1, uint64(rate)))
		b := NewBucket(Profile{RateBps: rate}, 0)
		burst := float64(b.Burst())
		var now time.Duration
		total := 0.0
		for i := 0; i < 200000; i++ {
			n := 1 + rng.IntN(ChunkSize)
			total += float64(n)
			// A caller that must wait sleeps and oversleeps by up to half
			// the time the burst lasts: never long enough to lose capacity.
			if w := b.Take(now, n); w > 0 {
				now += w + time.Duration(rng.Float64()*burst*8/rate*1e9/2)
			}
		}
		// Nothing was lost: what was taken is the initial burst plus what
		// the profile offered, less the credit left (or plus the debt).
		b.Take(now, 0)
		offered := rate * now.Seconds() / 8
		if got := burst + offered - b.tokens; math.Abs(got-total) > 1e-9*total {
			t.Errorf("rate %v: took %v bytes, bucket accounts for %v", rate, total, got)
		}
		if b.tokens > burst/2+1 {
			t.Errorf("rate %v: credit %v left, oversleeping can leave at most %v", rate, b.tokens, burst/2)
		}
	}
}

// TestBucketReserveLateCaller: a caller that wakes up late but passes the
// time the bytes were ready keeps the exact rate.
func TestBucketReserveLateCaller(t *testing.T) {
	const rate = 200e6
	rng := rand.New(rand.NewPCG(7, 7))
	b := NewBucket(Profile{RateBps: rate}, 0)
	var now, release time.Duration
	const n, chunks = 16 << 10, 100000
	for i := 0; i < chunks; i++ {
		// A backlog: every chunk is ready when the previous one left.
		release = b.Reserve(release, n)
		if release > now {
			now = release + time.Duration(rng.IntN(5e6)) // wakes up to 5 ms late
		}
	}
	want := (float64(chunks*n) - float64(b.Burst())) * 8 / rate
	if got := release.Seconds(); math.Abs(got-want) > 1e-6 {
		t.Errorf("last chunk leaves at %vs, want %vs", got, want)
	}
}

// TestBucketRateChange: the rate changes mid-way; the bytes sent by any
// time follow the integral of the profile.
func TestBucketRateChange(t *testing.T) {
	const rate = 80e6 // 10 MB/s
	p := NewProfile(rate, []Load{{Fraction: 0.5, At: sec}, {Fraction: 0.9, At: 2 * sec}, {Fraction: 0, At: 3 * sec}})
	b := NewBucket(p, 0)
	burst := float64(b.Burst())
	var now time.Duration
	sent := 0.0
	const n = 1500
	for now < 4*sec {
		now += b.Take(now, n)
		sent += n
		// Everything accounted by now was paid for: sent <= burst + offered.
		if offered := p.bitsBetween(0, now) / 8; sent > burst+offered+1e-6 {
			t.Fatalf("at %v: sent %v > burst %v + offered %v", now, sent, burst, offered)
		}
	}
	offered := p.bitsBetween(0, now) / 8
	if got := sent - burst; math.Abs(got-offered) > n {
		t.Errorf("sent %v beyond the burst, profile offered %v", got, offered)
	}
	// 10 + 5 + 1 + 10 MB in 4 s.
	if want := 26e6; math.Abs(offered-want) > n+burst {
		t.Errorf("offered %v, want about %v", offered, want)
	}
}

func TestBucketZeroRate(t *testing.T) {
	b := NewBucket(Profile{RateBps: 8, Steps: []Load{{Fraction: 1, At: 0}}}, 1)
	if w := b.Take(0, 1); w != 0 {
		t.Errorf("burst: wait %v", w)
	}
	if w := b.Take(0, 1); w != maxWait {
		t.Errorf("rate stays zero: wait %v, want maxWait", w)
	}
	b = NewBucket(Profile{RateBps: 8, Steps: []Load{{Fraction: 1, At: 0}, {Fraction: 0, At: sec}}}, 1)
	b.Take(0, 1)
	if w := b.Take(0, 1); w != 2*sec {
		t.Errorf("paused rail: wait %v, want 2s", w)
	}
}

func TestBucketRebase(t *testing.T) {
	b := NewBucket(Profile{RateBps: 8e6}, 1000) // 1 byte per µs
	b.Take(5*sec, 1000)
	b.Take(5*sec, 1000) // 1000 bytes of debt, paid at 5s+1ms
	// The origin moves 5 s later: 5 s is now 0.
	b.Rebase(-5 * sec)
	if w := b.Take(0, 0); w != time.Millisecond {
		t.Errorf("after Rebase: wait %v, want 1ms", w)
	}
}

func TestBucketAllocs(t *testing.T) {
	b := NewBucket(NewProfile(1e9, []Load{{Fraction: 0.5, At: sec}}), 0)
	var now time.Duration
	allocs := testing.AllocsPerRun(1000, func() {
		now += b.Take(now, 1500)
	})
	if allocs != 0 {
		t.Errorf("Take allocates %v times", allocs)
	}
}
