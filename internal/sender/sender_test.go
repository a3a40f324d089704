package sender

import (
	"errors"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/multirail/multirail/sched"
)

func mustNew(t testing.TB, cfg Config) *Rail[int] {
	t.Helper()
	r, err := New[int](cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"all set", Config{QueueDepth: 4, SegmentSize: 1024, RateWindow: time.Millisecond, Pipe: 10, Nominal: 1e9}, true},
		{"negative depth", Config{QueueDepth: -1}, false},
		{"negative segment", Config{SegmentSize: -1}, false},
		{"negative window", Config{RateWindow: -1}, false},
		{"negative pipe", Config{Pipe: -1}, false},
		{"NaN nominal", Config{Nominal: math.NaN()}, false},
		{"negative nominal", Config{Nominal: -5}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New[int](tc.cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("New(%+v) error %v, want ok=%v", tc.cfg, err, tc.ok)
			}
		})
	}
	r := mustNew(t, Config{})
	var st sched.RailState
	r.Fill(&st)
	if st.QueueCap != DefaultQueueDepth || st.SegmentTime != 0 || st.NominalBps != 0 {
		t.Fatalf("defaults: %+v", st)
	}
}

// TestRateSteadyBacklog: a rail that always has a backlog and delivers
// 1 MB every 10 ms is estimated at 800 Mbit/s.
func TestRateSteadyBacklog(t *testing.T) {
	r := mustNew(t, Config{Pipe: 1})
	now := int64(0)
	const seg = 1 << 20
	for i := range 40 {
		r.Push(now, i, seg)
		r.Push(now, i, seg)
		r.Take(now)
		now += int64(10 * time.Millisecond)
		if _, err := r.AckTo(now, r.Acked()+1, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := float64(seg) * 8 / 0.01
	if got := r.Rate(); math.Abs(got-want)/want > 1e-9 {
		t.Fatalf("rate %.0f, want %.0f", got, want)
	}
	var st sched.RailState
	r.Fill(&st)
	if st.RateBps != r.Rate() || st.SegmentTime != int64(float64(DefaultSegmentSize)*8/want*1e9) {
		t.Fatalf("Fill: %+v", st)
	}
}

// TestRateAppLimited: a rail whose sender offers less than it could carry
// (the queue empties, the pipe is not full) takes no sample: the estimate
// would measure the offered load.
func TestRateAppLimited(t *testing.T) {
	r := mustNew(t, Config{Pipe: 4 << 20, Nominal: 1e8})
	now := int64(0)
	for i := range 40 {
		r.Push(now, i, 1000)
		r.Take(now)
		now += int64(10 * time.Millisecond)
		if _, err := r.AckTo(now, r.Acked()+1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if r.Rate() != 0 {
		t.Fatalf("rate %.0f from an app-limited rail, want no estimate", r.Rate())
	}
	var st sched.RailState
	r.Fill(&st)
	if want := int64(float64(DefaultSegmentSize) * 8 / 1e8 * 1e9); st.SegmentTime != want {
		t.Fatalf("segment time %d without a rate, want %d from the nominal rate", st.SegmentTime, want)
	}
}

// TestRateDrainingShare: a share handed over at once (every segment
// taken at the start, the pipe never full, no queue) drains at the
// rail's rate: the intervals between the acknowledgements after the
// first measure it, without a backlog. The first interval (the way there
// and back) does not count.
func TestRateDrainingShare(t *testing.T) {
	r := mustNew(t, Config{Pipe: 64 << 20})
	const seg = 64 << 10
	for round := range 4 {
		start := int64(round) * int64(time.Second)
		for i := range 8 {
			r.Push(start, i, seg)
			r.Take(start)
		}
		now := start + int64(30*time.Millisecond) // the first: RTT plus one segment
		for range 8 {
			if _, err := r.AckTo(now, r.Acked()+1, nil); err != nil {
				t.Fatal(err)
			}
			now += int64(5 * time.Millisecond)
		}
	}
	want := float64(seg) * 8 / 0.005
	if got := r.Rate(); math.Abs(got-want)/want > 1e-9 {
		t.Fatalf("rate %.0f, want %.0f from the acknowledgements' spacing", got, want)
	}
}

func TestAckDelayAndStall(t *testing.T) {
	r := mustNew(t, Config{})
	const timeout = time.Second
	if s, _ := r.Stalled(int64(time.Hour), timeout); s {
		t.Fatal("an idle rail stalled")
	}
	r.Push(0, 1, 100)
	r.Take(0)
	if s, _ := r.Stalled(int64(3*timeout), timeout); s {
		t.Fatal("stalled after 3 timeouts without an ACK-delay sample (limit: 4)")
	}
	if s, _ := r.Stalled(int64(5*timeout), timeout); !s {
		t.Fatal("not stalled after 5 timeouts without an ACK-delay sample")
	}
	if _, err := r.AckTo(int64(100*time.Millisecond), 1, nil); err != nil {
		t.Fatal(err)
	}
	if got := r.AckDelay(); got != float64(100*time.Millisecond) {
		t.Fatalf("ack delay %v, want 100ms", got)
	}
	r.Push(int64(time.Second), 2, 100)
	r.Take(int64(time.Second))
	if got, want := r.StallLimit(timeout), int64(timeout+400*time.Millisecond); got != want {
		t.Fatalf("stall limit %d, want %d", got, want)
	}
	if s, _ := r.Stalled(int64(time.Second)+int64(1300*time.Millisecond), timeout); s {
		t.Fatal("stalled within the limit")
	}
	if s, q := r.Stalled(int64(time.Second)+int64(1500*time.Millisecond), timeout); !s || q != 1500*time.Millisecond {
		t.Fatalf("stalled=%v quiet=%v, want stalled after 1.5 s", s, q)
	}
}

// TestAlive: progress seen below the protocol restarts the stall clock of
// a rail with segments in flight, and does nothing to an idle one.
func TestAlive(t *testing.T) {
	r := mustNew(t, Config{})
	const timeout = time.Second
	r.Alive(int64(10 * time.Second)) // idle: nothing to restart
	r.Push(0, 1, 100)
	r.Take(0)
	if s, _ := r.Stalled(int64(5*timeout), timeout); !s {
		t.Fatal("not stalled after 5 timeouts without progress")
	}
	r.Alive(int64(4 * timeout))
	if s, q := r.Stalled(int64(5*timeout), timeout); s || q != timeout {
		t.Fatalf("stalled=%v quiet=%v after progress 1 s ago; want not stalled, quiet 1s", s, q)
	}
	if s, _ := r.Stalled(int64(9*timeout), timeout); !s {
		t.Fatal("not stalled 5 timeouts after the last progress")
	}
}

func TestAckRange(t *testing.T) {
	r := mustNew(t, Config{})
	r.Push(0, 1, 10)
	r.Take(0)
	if _, err := r.AckTo(1, 2, nil); !errors.Is(err, ErrAckRange) {
		t.Fatalf("ack beyond what is in flight: %v, want ErrAckRange", err)
	}
	if r.InFlight() != 1 {
		t.Fatal("a rejected ACK changed the rail")
	}
	if _, err := r.AckTo(1, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AckTo(1, 0, nil); !errors.Is(err, ErrAckRange) {
		t.Fatalf("ack going back: %v, want ErrAckRange", err)
	}
}

func TestDispatchRelease(t *testing.T) {
	r := mustNew(t, Config{Dispatched: true})
	for i := range 3 {
		r.Push(0, i, 10)
	}
	if r.Sendable() != 0 {
		t.Fatalf("sendable %d before a tick", r.Sendable())
	}
	if n := r.Tick(); n != 3 {
		t.Fatalf("tick released %d, want 3", n)
	}
	r.Push(0, 3, 10)
	if r.Sendable() != 3 {
		t.Fatalf("sendable %d, want the 3 released", r.Sendable())
	}
	r.Take(1)
	r.Take(1)
	r.Take(1)
	if r.Sendable() != 0 || r.Len() != 1 {
		t.Fatalf("sendable %d, len %d after taking the released", r.Sendable(), r.Len())
	}
	if e := r.Take(2); e.Seg != 3 || e.Enq != 0 || e.Sent != 2 {
		t.Fatalf("draining take: %+v", e)
	}
}

func TestCredit(t *testing.T) {
	c := NewCredit(100)
	if !c.Fits(100) || c.Fits(101) {
		t.Fatal("window of 100")
	}
	c.Use(60)
	if c.Fits(41) || !c.Fits(40) {
		t.Fatal("60 used")
	}
	if c.Grant(50) {
		t.Fatal("credit shrank")
	}
	if !c.Grant(200) || !c.Fits(140) || c.Fits(141) {
		t.Fatal("grant to 200")
	}
}

// TestRailModel checks the queue, flight, release and acknowledgement
// bookkeeping against a plain slice model under random operations.
func TestRailModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dispatched := rapid.Bool().Draw(t, "dispatched")
		depth := rapid.IntRange(1, 8).Draw(t, "depth")
		r, err := New[int](Config{QueueDepth: depth, Dispatched: dispatched, Pipe: rapid.Int64Range(1, 1000).Draw(t, "pipe")})
		if err != nil {
			t.Fatal(err)
		}
		// Acknowledgements with or without arrival times (on a clock
		// offset from ours).
		stamped := rapid.Bool().Draw(t, "stamped")
		offset := rapid.Int64Range(-1<<60, 1<<60).Draw(t, "offset")
		ack := func(now int64, received uint64, each func(Entry[int])) (int, error) {
			if stamped {
				return r.AckArrived(now, received, now+offset, each)
			}
			return r.AckTo(now, received, each)
		}
		type seg struct{ id, size int }
		var queue, flight []seg
		release, acked, next := 0, uint64(0), 0
		now := int64(0)
		t.Repeat(map[string]func(*rapid.T){
			"push": func(t *rapid.T) {
				sz := rapid.IntRange(1, 500).Draw(t, "size")
				r.Push(now, next, sz)
				queue = append(queue, seg{next, sz})
				next++
			},
			"tick": func(t *rapid.T) {
				if got := r.Tick(); got != len(queue) {
					t.Fatalf("tick released %d, want %d", got, len(queue))
				}
				release = len(queue)
			},
			"take": func(t *rapid.T) {
				if len(queue) == 0 {
					t.Skip("empty")
				}
				e := r.Take(now)
				if e.Seg != queue[0].id || e.Size != queue[0].size || e.Sent != now {
					t.Fatalf("took %+v, want %+v", e, queue[0])
				}
				flight = append(flight, queue[0])
				queue = queue[1:]
				release = max(release-1, 0)
			},
			"ack": func(t *rapid.T) {
				n := rapid.IntRange(0, len(flight)+1).Draw(t, "n")
				var got []int
				_, err := ack(now, acked+uint64(n), func(e Entry[int]) { got = append(got, e.Seg) })
				if n > len(flight) {
					if !errors.Is(err, ErrAckRange) {
						t.Fatalf("ack of %d with %d in flight: %v", n, len(flight), err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				for i := range n {
					if got[i] != flight[i].id {
						t.Fatalf("acked %v, want the oldest %d of %v", got, n, flight)
					}
				}
				flight = flight[n:]
				acked += uint64(n)
			},
			"drain": func(t *rapid.T) {
				got := r.Drain(nil)
				want := append(append([]seg(nil), flight...), queue...)
				if len(got) != len(want) {
					t.Fatalf("drained %d, want %d", len(got), len(want))
				}
				for i := range got {
					if got[i].Seg != want[i].id {
						t.Fatalf("drain order %v, want %v", got, want)
					}
				}
				queue, flight, release = nil, nil, 0
			},
			"restart": func(t *rapid.T) {
				if len(flight) > 0 {
					t.Skip("the transport takes a rail down (Drain) before it restarts it")
				}
				r.Restart(now, 1)
				acked = 0
			},
			"time": func(t *rapid.T) {
				now += rapid.Int64Range(0, int64(50*time.Millisecond)).Draw(t, "dt")
			},
			"": func(t *rapid.T) {
				qb, fb := 0, 0
				for _, s := range queue {
					qb += s.size
				}
				for _, s := range flight {
					fb += s.size
				}
				want := len(queue)
				if dispatched {
					want = min(release, len(queue))
				}
				switch {
				case r.Len() != len(queue) || r.QueuedBytes() != int64(qb):
					t.Fatalf("queue %d/%d B, want %d/%d", r.Len(), r.QueuedBytes(), len(queue), qb)
				case r.InFlight() != len(flight) || r.InFlightBytes() != int64(fb):
					t.Fatalf("in flight %d/%d B, want %d/%d", r.InFlight(), r.InFlightBytes(), len(flight), fb)
				case r.Sendable() != want:
					t.Fatalf("sendable %d, want %d", r.Sendable(), want)
				case r.Acked() != acked:
					t.Fatalf("acked %d, want %d", r.Acked(), acked)
				case r.Full() != (len(queue) >= depth):
					t.Fatalf("full %v with %d of %d", r.Full(), len(queue), depth)
				case r.Rate() < 0 || math.IsNaN(r.Rate()) || math.IsInf(r.Rate(), 0):
					t.Fatalf("rate %v", r.Rate())
				case r.ArrivalRate() < 0 || math.IsNaN(r.ArrivalRate()) || math.IsInf(r.ArrivalRate(), 0):
					t.Fatalf("arrival-timed rate %v", r.ArrivalRate())
				case !stamped && r.ArrivalRate() != 0:
					t.Fatalf("arrival-timed rate %v without arrival times", r.ArrivalRate())
				case !(r.ForwardDelay() >= 0) || math.IsInf(r.ForwardDelay(), 0):
					t.Fatalf("forward delay %v", r.ForwardDelay())
				}
			},
		})
	})
}

// TestFlightSample: a short flight (a planned share, every segment queued
// before the one ahead of it was taken, too short for an interval sample
// of its own) moves the rate towards its bytes over its time, from the
// first Take to the last acknowledgement; a flight that waited for data,
// or one below FlightMin, does not.
func TestFlightSample(t *testing.T) {
	const seg = 16 << 10
	ms := int64(time.Millisecond)
	// prime gives the rail a rate of 8 x 64 KiB over 5 ms intervals
	// (TestRateDrainingShare) and returns it with that rate.
	prime := func(t *testing.T) (*Rail[int], float64, int64) {
		r := mustNew(t, Config{Pipe: 64 << 20})
		for i := range 8 {
			r.Push(0, i, 64<<10)
			r.Take(0)
		}
		now := 30 * ms
		for range 8 {
			if _, err := r.AckTo(now, r.Acked()+1, nil); err != nil {
				t.Fatal(err)
			}
			now += 5 * ms
		}
		if r.Rate() <= 0 {
			t.Fatal("no rate after a draining share")
		}
		if s, n, at := r.Sample(); !(s > 0) || n <= 0 || at == 0 {
			t.Fatalf("Sample() = %g of %d bytes at %d after a draining share, want its last interval sample", s, n, at)
		}
		return r, r.Rate(), now + int64(time.Second)
	}
	for _, tc := range []struct {
		name   string
		segs   int
		gap    bool // the last segment is queued after the others were taken
		sample bool
	}{
		{"share taken at once", 4, false, true},
		{"waited for data", 4, true, false},
		{"below FlightMin", FlightMin/seg - 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, rate, t0 := prime(t)
			n := tc.segs
			if tc.gap {
				n--
			}
			for i := range n {
				r.Push(t0, i, seg)
			}
			for range n {
				r.Take(t0)
			}
			if tc.gap {
				r.Push(t0+ms, n, seg)
				r.Take(t0 + ms)
			}
			end := t0 + 3*ms
			if _, err := r.AckTo(end, r.Acked()+uint64(tc.segs), nil); err != nil {
				t.Fatal(err)
			}
			want := rate
			if tc.sample {
				s := float64(tc.segs*seg) * 8 / 0.003
				want = rate + RateGain*(s-rate)
			}
			if got := r.Rate(); math.Abs(got-want)/want > 1e-9 {
				t.Fatalf("rate %.0f after the flight, want %.0f (before it %.0f)", got, want, rate)
			}
			// Sample is the flight's own sample, when it took one.
			s, b, at := r.Sample()
			if tc.sample && (at != end || b != int64(tc.segs*seg) || math.Abs(s-float64(tc.segs*seg)*8/0.003) > 1e-6) {
				t.Fatalf("Sample() = %.0f of %d bytes at %d, want the flight's %.0f of %d at %d", s, b, at, float64(tc.segs*seg)*8/0.003, tc.segs*seg, end)
			}
			if !tc.sample && at == end {
				t.Fatalf("Sample() at %d: a sample at the flight's end, which took none", at)
			}
		})
	}
}
