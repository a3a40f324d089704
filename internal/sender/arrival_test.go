package sender

import (
	"errors"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// link is a rail with a backlog whose bottleneck delivers rate bits/s: a
// segment arrives at the peer when the bytes before it and its own have
// drained (arrival times on the peer's clock, offset from the sender's).
type link struct {
	r       *Rail[int]
	rate    float64
	offset  int64 // the peer's clock less the sender's
	drained int64 // bytes the bottleneck has delivered
	arrived []int64
	now     int64
}

// tb is what testing.TB and rapid.T have in common here.
type tb interface {
	Helper()
	Fatal(args ...any)
}

func newLink(t tb, rate float64, offset int64) *link {
	r, err := New[int](Config{Pipe: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &link{r: r, rate: rate, offset: offset}
}

// send queues and takes segments of the given sizes; they arrive back to
// back at the bottleneck's rate.
func (l *link) send(sizes ...int) {
	for _, sz := range sizes {
		l.r.Push(l.now, len(l.arrived), sz)
		l.r.Take(l.now)
		l.drained += int64(sz)
		l.arrived = append(l.arrived, int64(float64(l.drained)*8/l.rate*1e9)+l.offset)
	}
}

// ackTo acknowledges the first n segments at now = the arrival of the
// n-th on the sender's clock plus back (the way back, queueing included),
// no earlier than the last ACK.
func (l *link) ackTo(t tb, n int, back int64) {
	t.Helper()
	a := l.arrived[n-1]
	l.now = max(l.now, a-l.offset+back)
	if _, err := l.r.AckArrived(l.now, uint64(n), a, nil); err != nil {
		t.Fatal(err)
	}
}

func relErr(got, want float64) float64 { return math.Abs(got-want) / want }

// TestRateArrivalReverseJitter: whatever the way back does to the ACKs
// (constant delay, alternating, batched, random), a rail whose arrival
// times are spaced by its rate is estimated at exactly that rate
// (ArrivalRate). The ACK-timed estimate (Rate) averages some jitter out, but reads a
// growing queue on the way back (the peer's data building up in front of
// its ACKs) as a slower rail.
func TestRateArrivalReverseJitter(t *testing.T) {
	const rate = 191e6
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		name   string
		back   func(i int, a int64) int64 // the way back of the i-th ACK, sent at a
		ackLow bool                       // Rate is more than 5 % low
	}{
		{"constant", func(int, int64) int64 { return 5 * ms }, false},
		{"alternating", func(i int, _ int64) int64 { return int64(i%2) * 25 * ms }, false},
		// ACKs wait behind the peer's data and leave in bursts: every ACK
		// of a 30 ms period arrives at its end.
		{"batched", func(_ int, a int64) int64 { return 30*ms - a%(30*ms) }, false},
		{"growing queue", func(i int, _ int64) int64 { return int64(i) * ms / 2 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLink(t, rate, -123456789)
			l.send(64 << 10)
			for i := 1; i <= 400; i++ {
				l.send(64<<10, 64<<10)
				l.ackTo(t, i, tc.back(i, l.arrived[i-1]-l.offset))
			}
			if e := relErr(l.r.ArrivalRate(), rate); e > 1e-6 {
				t.Fatalf("rate %.1f Mbit/s, want %.1f", l.r.ArrivalRate()/1e6, rate/1e6)
			}
			if tc.ackLow && l.r.Rate() > 0.95*rate {
				t.Fatalf("ACK-timed rate %.1f Mbit/s against %.1f, want it more than 5 %% low", l.r.Rate()/1e6, rate/1e6)
			}
		})
	}
}

// TestRateArrivalProperty: random segment sizes, random numbers of
// segments per ACK, random delays on the way back (ACKs in order, as TCP
// delivers them), any clock offset: the estimate is the rate.
func TestRateArrivalProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Float64Range(1e6, 1e11).Draw(t, "rate")
		l := newLink(t, rate, rapid.Int64Range(-1<<60, 1<<60).Draw(t, "offset"))
		l.send(rapid.IntRange(1, 1<<20).Draw(t, "first"))
		acked := 0
		for l.r.ArrivalRate() == 0 || acked < 200 {
			k := rapid.IntRange(1, 8).Draw(t, "per ack")
			for range k + 1 { // one more than acknowledged: the backlog stays
				l.send(rapid.IntRange(1, 1<<20).Draw(t, "size"))
			}
			acked += k
			l.ackTo(t, acked, rapid.Int64Range(0, int64(200*time.Millisecond)).Draw(t, "back"))
			if acked > 100000 {
				t.Fatalf("no estimate after %d segments", acked)
			}
		}
		// Arrival times are whole nanoseconds: a sample of at least
		// RateWindow is off by at most 2 ns in 20 ms.
		if e := relErr(l.r.ArrivalRate(), rate); e > 1e-6 {
			t.Fatalf("rate %.6g, want %.6g (off by %.2g)", l.r.ArrivalRate(), rate, e)
		}
	})
}

// TestRateArrivalAppLimited: arrival times do not lift the backlog rule:
// a rail whose sender offers less than it carries takes no sample.
func TestRateArrivalAppLimited(t *testing.T) {
	r := mustNew(t, Config{Pipe: 4 << 20})
	now := int64(0)
	for i := range 40 {
		r.Push(now, i, 1000)
		r.Take(now)
		if _, err := r.AckArrived(now+int64(time.Millisecond), r.Acked()+1, now+int64(100*time.Microsecond), nil); err != nil {
			t.Fatal(err)
		}
		now += int64(10 * time.Millisecond)
	}
	if r.ArrivalRate() != 0 || r.Rate() != 0 {
		t.Fatalf("rates %.0f / %.0f from an app-limited rail, want no estimate", r.ArrivalRate(), r.Rate())
	}
}

// TestArrivalBack: an arrival time before an earlier one is refused and
// changes nothing; an ACK of nothing new is not checked.
func TestArrivalBack(t *testing.T) {
	r := mustNew(t, Config{})
	for i := range 3 {
		r.Push(0, i, 10)
		r.Take(0)
	}
	if _, err := r.AckArrived(5, 1, 1000, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AckArrived(6, 2, 999, nil); !errors.Is(err, ErrAckRange) {
		t.Fatalf("arrival going back: %v, want ErrAckRange", err)
	}
	if r.Acked() != 1 || r.InFlight() != 2 {
		t.Fatalf("a refused ACK changed the rail: acked %d, in flight %d", r.Acked(), r.InFlight())
	}
	if _, err := r.AckArrived(6, 1, 0, nil); err != nil {
		t.Fatalf("ACK of nothing new (credit only): %v", err)
	}
	if _, err := r.AckArrived(7, 3, 1000, nil); err != nil {
		t.Fatalf("same arrival time again: %v", err)
	}
	r.Restart(8, 1)
	r.Push(8, 4, 10)
	r.Take(8)
	if _, err := r.AckArrived(9, 1, 3, nil); err != nil {
		t.Fatalf("a new connection's first arrival time, lower than the old one's: %v", err)
	}
}

// TestForwardDelay: the one-way delay above its minimum follows the
// forward queue, whatever the clocks' offset and the way back; a base
// that rises for good (a longer path, a drifting clock) is forgotten
// within two FwdWindows.
func TestForwardDelay(t *testing.T) {
	ms := int64(time.Millisecond)
	r := mustNew(t, Config{})
	const offset = 1 << 50
	now := int64(0)
	step := func(fwd, back int64) {
		r.Push(now, 0, 100)
		e := r.Take(now)
		if _, err := r.AckArrived(now+fwd+back, r.Acked()+1, e.Sent+fwd+offset, nil); err != nil {
			t.Fatal(err)
		}
		now += ms
	}
	for i := range 100 {
		step(3*ms, int64(i%7)*5*ms) // no queue forward, jitter back
	}
	if got := r.ForwardDelay(); got != 0 {
		t.Fatalf("forward delay %v with none, want 0", time.Duration(got))
	}
	for range 200 {
		step(13*ms, 0) // a 10 ms forward queue
	}
	if got := time.Duration(r.ForwardDelay()); got < 9900*time.Microsecond || got > 10*time.Millisecond {
		t.Fatalf("forward delay %v with a 10 ms queue, want 10 ms", got)
	}
	for now < int64(2*FwdWindow)+int64(time.Second) {
		step(13*ms, 0) // the queue stays: after two windows it is the base
	}
	if got := time.Duration(r.ForwardDelay()); got > 10*time.Microsecond {
		t.Fatalf("forward delay %v two windows after the base rose, want about 0", got)
	}
}

// TestRateArrivalLateAcks: a rail offered half its rate, whose ACKs come
// back 100 ms late (behind the peer's data): its bytes in flight exceed
// the pipe all the time, which the ACK-timed estimate takes for a backlog
// and so measures the offered load. With arrival times no sample counts:
// no frame waited behind another.
func TestRateArrivalLateAcks(t *testing.T) {
	const (
		rate = 100e6
		seg  = 64 << 10
	)
	r := mustNew(t, Config{Pipe: seg})
	tx := int64(seg * 8 / rate * 1e9)
	back := int64(100 * time.Millisecond)
	type ack struct{ at, arrived int64 }
	var acks []ack
	for i := range 400 {
		sent := int64(i) * 2 * tx // every other slot: half the rate
		for len(acks) > 0 && acks[0].at <= sent {
			if _, err := r.AckArrived(acks[0].at, r.Acked()+1, acks[0].arrived, nil); err != nil {
				t.Fatal(err)
			}
			acks = acks[1:]
		}
		r.Push(sent, i, seg)
		r.Take(sent)
		arrived := sent + tx + int64(time.Millisecond)
		acks = append(acks, ack{arrived + back, arrived + 7})
	}
	if r.ArrivalRate() != 0 {
		t.Fatalf("rate %.1f Mbit/s from a rail offered half its %.0f, want no sample", r.ArrivalRate()/1e6, rate/1e6)
	}
	if got := r.Rate(); got < 0.45*rate || got > 0.55*rate {
		t.Fatalf("ACK-timed rate %.1f Mbit/s, want the offered load, about %.0f (this test's premise)", got/1e6, rate/2e6)
	}
}
