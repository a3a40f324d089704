package multirail

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// manualTicks replaces the dispatch timer of every Conn created during the
// test by a channel the test ticks by hand.
func manualTicks(t *testing.T) chan<- time.Time {
	t.Helper()
	ch := make(chan time.Time)
	old := dispatchTicker
	dispatchTicker = func(time.Duration) (<-chan time.Time, func()) { return ch, func() {} }
	t.Cleanup(func() { dispatchTicker = old })
	return ch
}

// queuedAndSent sums the rails' send queues and the segments written.
func queuedAndSent(st Stats) (queued int, sent uint64) {
	for _, r := range st.Rails {
		queued += r.Queued
		sent += r.SegmentsSent
	}
	return queued, sent
}

// waitFor polls cond until it holds or ctx is done.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// TestDispatchOnlyAtTicks drives the dispatch timer by hand: without a tick
// no segment leaves a queue (not even an eager one, which Send otherwise
// writes itself), while acknowledgements and pings still flow; a tick
// releases exactly what was queued at that moment; Close releases the rest.
func TestDispatchOnlyAtTicks(t *testing.T) {
	ticks := manualTicks(t)
	const idle = 400 * time.Millisecond
	// Only the dialing side dispatches on the timer, so the test's ticks
	// all go to it.
	ln, err := Listen("127.0.0.1:0", Config{IdleTimeout: idle, SegmentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	a, b := dialAndAccept(t, ln, Config{
		Rails:     []Rail{{Name: "r0", Addr: addr}, {Name: "r1", Addr: addr}},
		Scheduler: "roundrobin", SegmentSize: 4096, IdleTimeout: idle,
		DispatchInterval: 100 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Eager one-segment messages are queued, not written.
	for i := 0; i < 3; i++ {
		if err := a.Send(ctx, 1, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	st := a.Stats()
	if q, sent := queuedAndSent(st); q != 3 || sent != 0 || st.DispatchTicks != 0 {
		t.Fatalf("before any tick: %d queued, %d sent, %d ticks; want 3, 0, 0", q, sent, st.DispatchTicks)
	}
	// For three idle timeouts without a tick nothing arrives, yet the
	// rails stay up: pings are not held back by the timer.
	short, cancelShort := context.WithTimeout(ctx, 3*idle)
	m, err := b.Recv(short)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Recv before the first tick: %q, %v; want nothing until the deadline", m.Data, err)
	}
	for _, r := range append(a.Stats().Rails, b.Stats().Rails...) {
		if !r.Up {
			t.Fatalf("rail %s went down while the dispatch timer held the data", r.Name)
		}
	}

	// One tick releases everything queued.
	ticks <- time.Now()
	for i := 0; i < 3; i++ {
		m, err := b.Recv(ctx)
		if err != nil || !bytes.Equal(m.Data, []byte{byte(i)}) {
			t.Fatalf("message %d after the tick: %q, %v", i, m.Data, err)
		}
	}
	waitFor(ctx, t, "the released segments to be written", func() bool {
		q, sent := queuedAndSent(a.Stats())
		return q == 0 && sent == 3
	})

	// Segments queued after a tick wait for the next one: a large Send
	// (which waits for the peer's acknowledgement) cannot complete.
	done := make(chan error, 1)
	big := bytes.Repeat([]byte{7}, 5*4096)
	go func() { done <- a.Send(ctx, 2, big) }()
	waitFor(ctx, t, "the large message to be queued", func() bool {
		q, _ := queuedAndSent(a.Stats())
		return q == 5
	})
	select {
	case err := <-done:
		t.Fatalf("large Send completed before a tick: %v", err)
	default:
	}
	if _, sent := queuedAndSent(a.Stats()); sent != 3 {
		t.Fatalf("%d segments written before the second tick, want 3", sent)
	}
	ticks <- time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m, err := b.Recv(ctx); err != nil || !bytes.Equal(m.Data, big) {
		t.Fatalf("large message: %d bytes, %v", len(m.Data), err)
	}
	// The writer counts a batch once its write returns, which may be just
	// after the peer's acknowledgement let Send return.
	waitFor(ctx, t, "the second tick's segments to be counted", func() bool {
		_, sent := queuedAndSent(a.Stats())
		return sent >= 8
	})
	st = a.Stats()
	if q, sent := queuedAndSent(st); q != 0 || sent != 8 || st.DispatchTicks != 2 {
		t.Fatalf("after two ticks: %d queued, %d sent, %d ticks; want 0, 8, 2", q, sent, st.DispatchTicks)
	}

	// Control frames are not delayed: the listener's large Send completes
	// on a's acknowledgements without a tick on a's side.
	if err := b.Send(ctx, 3, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	if m, err := a.Recv(ctx); err != nil || len(m.Data) != 64<<10 {
		t.Fatalf("reverse message: %d bytes, %v", len(m.Data), err)
	}
	if n := a.Stats().DispatchTicks; n != 2 {
		t.Fatalf("%d ticks, want 2", n)
	}

	// Close writes what is still queued without waiting for a tick.
	if err := a.Send(ctx, 4, []byte("last")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if m, err := b.Recv(ctx); err != nil || string(m.Data) != "last" {
		t.Fatalf("after Close: %q, %v", m.Data, err)
	}
	if _, err := b.Recv(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last message: %v, want io.EOF", err)
	}
}

// TestDispatchTimer runs the real timer (200 ms): a message is never
// delivered before a tick released it. The check is an ordering one (the
// sender's tick count, read after the receipt, has moved), not a
// wall-clock bound.
func TestDispatchTimer(t *testing.T) {
	a, b, _ := emuPair(t, Config{DispatchInterval: 200 * time.Millisecond}, 100e6, 100e6)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		before := a.Stats()
		_, sent0 := queuedAndSent(before)
		if err := a.Send(ctx, 0, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		st := a.Stats()
		if q, sent := queuedAndSent(st); st.DispatchTicks == before.DispatchTicks && (q != 1 || sent != sent0) {
			t.Fatalf("message %d: no tick yet but %d queued, %d sent (want 1, %d)", i, q, sent, sent0)
		}
		m, err := b.Recv(ctx)
		if err != nil || !bytes.Equal(m.Data, []byte{byte(i)}) {
			t.Fatalf("message %d: %q, %v", i, m.Data, err)
		}
		if after := a.Stats().DispatchTicks; after <= before.DispatchTicks {
			t.Fatalf("message %d delivered with no tick since it was sent (%d ticks before, %d after)", i, before.DispatchTicks, after)
		}
	}
}

// TestDispatchTransfer: with a 10 ms dispatch timer, a transfer of many
// messages over three emulated rails arrives whole (SHA-256), once, in
// order, also when a rail breaks midway.
func TestDispatchTransfer(t *testing.T) {
	t.Run("emulated rails", func(t *testing.T) {
		a, b, _ := emuPair(t, Config{DispatchInterval: 10 * time.Millisecond, SegmentSize: 8 << 10, QueueDepth: 8}, 400e6, 200e6, 100e6)
		transfer(t, a, b, 60, 3, 300<<10, nil)
		st := a.Stats()
		if st.DispatchTicks == 0 {
			t.Error("no dispatch tick counted")
		}
		for _, r := range st.Rails {
			if r.SegmentsSent == 0 {
				t.Errorf("rail %s carried nothing: %+v", r.Name, st.Rails)
			}
		}
	})
	t.Run("rail failure", func(t *testing.T) {
		a, b, links := emuPair(t, Config{DispatchInterval: 10 * time.Millisecond, Scheduler: "roundrobin", SegmentSize: 4 << 10, QueueDepth: 8}, 300e6, 300e6, 300e6)
		transfer(t, a, b, 60, 3, 200<<10, func() { links[1].BreakAll() })
		checkRejoined(t, a, b, 1, true)
	})
}
