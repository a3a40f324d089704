package multirail

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestBusyPollConfig: BusyPoll outside 0..MaxBusyPoll is refused with an
// error naming the field.
func TestBusyPollConfig(t *testing.T) {
	for _, d := range []time.Duration{-time.Microsecond, MaxBusyPoll + 1} {
		err := Config{Token: NewToken(), BusyPoll: d}.Validate()
		if !errors.Is(err, ErrConfig) || !bytes.Contains([]byte(err.Error()), []byte("BusyPoll")) {
			t.Errorf("BusyPoll %v: err %v, want ErrConfig naming BusyPoll", d, err)
		}
	}
	for _, d := range []time.Duration{0, time.Microsecond, MaxBusyPoll} {
		if err := (Config{Token: NewToken(), BusyPoll: d}).Validate(); err != nil {
			t.Errorf("BusyPoll %v: %v", d, err)
		}
	}
}

// waitPollerIdle waits until the poller goroutine has ended (it ends once
// the polling connections have been quiet for their BusyPoll).
func waitPollerIdle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(ctx, t, "the poller goroutine to end after the last message", func() bool {
		pollers.mu.Lock()
		defer pollers.mu.Unlock()
		return !pollers.running.Load()
	})
}

// waitParked waits until r's reader is parked at the poller.
func waitParked(t *testing.T, r *rail) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(ctx, t, "the reader to park at the poller", func() bool {
		pollers.mu.Lock()
		defer pollers.mu.Unlock()
		return slices.Contains(pollers.parked, r)
	})
}

// TestBusyPollPingPong: two connections that poll, over one and three
// rails, exchange messages of every size class (eager, one segment, spans
// over several rails) in a ping-pong, with pauses longer than BusyPoll in
// between (the readers go back to the kernel and must be woken); every
// message arrives intact, the poller woke readers, and it ends once the
// connections are quiet.
func TestBusyPollPingPong(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("polling a socket without waiting needs Linux")
	}
	for _, rails := range []int{1, 3} {
		cfg := Config{Token: NewToken(), BusyPoll: 2 * time.Millisecond, SegmentSize: 16 << 10}
		a, b := pair(t, rails, cfg)
		if !a.rails[0].br.CanPoll() {
			t.Fatal("a TCP rail cannot poll")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		echo := make(chan error, 1)
		go func() {
			for {
				m, err := b.Recv(ctx)
				if err != nil {
					echo <- err
					return
				}
				if err := b.Send(ctx, m.Tag, m.Data); err != nil {
					echo <- err
					return
				}
			}
		}()
		wakes := pollers.wakes.Load()
		rng := rand.New(rand.NewPCG(uint64(rails), 7))
		for i := range 300 {
			n := []int{1, 8, 1000, 16 << 10, 100 << 10}[rng.IntN(5)]
			msg := make([]byte, n)
			for j := range msg {
				msg[j] = byte(rng.Uint32())
			}
			if err := a.Send(ctx, uint32(i), msg); err != nil {
				t.Fatal(err)
			}
			m, err := a.Recv(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m.Tag != uint32(i) || !bytes.Equal(m.Data, msg) {
				t.Fatalf("%d rails, message %d: got tag %d and %d bytes, want tag %d and %d bytes as sent", rails, i, m.Tag, len(m.Data), i, n)
			}
			if i%100 == 99 {
				waitPollerIdle(t) // quiet: the readers wait in the kernel now
			}
		}
		if pollers.wakes.Load() == wakes {
			t.Errorf("%d rails: the poller never woke a reader: the connections did not poll", rails)
		}
		a.Close()
		if err := <-echo; err == nil {
			t.Errorf("%d rails: the echo ended without an error", rails)
		}
		b.Close()
		waitPollerIdle(t)
	}
}

// TestBusyPollRecvCancel: on a single rail a Recv reads the rail itself,
// parked at the poller while it polls; cancelling its context ends it
// with the context's error, and the connection works on.
func TestBusyPollRecvCancel(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("polling a socket without waiting needs Linux")
	}
	a, b := pair(t, 1, Config{Token: NewToken(), BusyPoll: MaxBusyPoll})
	ctx := context.Background()
	for range 20 {
		if err := a.Send(ctx, 1, []byte("keep polling")); err != nil { // activity: the readers poll
			t.Fatal(err)
		}
		if _, err := b.Recv(ctx); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { _, err := b.Recv(rctx); done <- err }()
		waitParked(t, b.rails[0])
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Recv: %v, want context.Canceled", err)
		}
	}
	if err := a.Send(ctx, 2, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if m, err := b.Recv(ctx); err != nil || string(m.Data) != "after" {
		t.Fatalf("Recv after the cancellations: %q, %v", m.Data, err)
	}
}

// TestBusyPollRecvCancelWhileBusy: a cancelled Recv parked at the poller
// returns while another polling connection of the process keeps the
// poller busy: the poke's wake-up must end the polling (the polling read
// reports the passed deadline), not park the Recv again until its own
// rail gets data or every polling connection of the process goes quiet.
func TestBusyPollRecvCancelWhileBusy(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("polling a socket without waiting needs Linux")
	}
	cfg := Config{Token: NewToken(), BusyPoll: MaxBusyPoll}
	a, b := pair(t, 1, cfg)
	c, d := pair(t, 1, cfg)
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	busy := make(chan error, 1)
	go func() { // c and d keep the process's poller running
		for ctx.Err() == nil {
			if err := c.Send(ctx, 1, []byte("busy")); err != nil {
				busy <- err
				return
			}
			if _, err := d.Recv(ctx); err != nil {
				busy <- err
				return
			}
		}
		busy <- nil
	}()
	if err := a.Send(ctx, 1, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Recv(ctx); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { _, err := b.Recv(rctx); done <- err }()
		waitParked(t, b.rails[0])
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Recv: %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a cancelled Recv did not return in 5 s while another connection kept the poller busy")
		}
	}
	stop()
	if err := <-busy; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("the busy pair: %v", err)
	}
}

// TestBusyPollClose: closing connections whose readers are parked at the
// poller ends them (no reader stays parked: Close returns and the poller
// ends).
func TestBusyPollClose(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("polling a socket without waiting needs Linux")
	}
	for range 5 {
		a, b := pair(t, 3, Config{Token: NewToken(), BusyPoll: MaxBusyPoll})
		ctx := context.Background()
		if err := a.Send(ctx, 1, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Recv(ctx); err != nil {
			t.Fatal(err)
		}
		waitParked(t, b.rails[0])
		a.Close()
		b.Close()
	}
	waitPollerIdle(t)
	pollers.mu.Lock()
	defer pollers.mu.Unlock()
	if len(pollers.parked) != 0 || len(pollers.conns) != 0 {
		t.Errorf("after Close: %d readers parked, %d connections polling; want none", len(pollers.parked), len(pollers.conns))
	}
}

// pollingPair connects two Conns of three rails that busy-poll for 1 ms
// (Linux only: the test skips elsewhere), closed at the test's end, and a
// context for the test's calls.
func pollingPair(t *testing.T) (a, b *Conn, ctx context.Context) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("polling a socket without waiting needs Linux")
	}
	a, b = pair(t, 3, Config{Token: NewToken(), BusyPoll: time.Millisecond})
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return a, b, ctx
}

// TestBusyPollResumeWakesOne: once the polling connections have been
// quiet for their BusyPoll, their readers wait in the kernel; the next
// message wakes the reader of the rail it came on and no other (waking
// every reader to poll again put a goroutine per rail of the process
// ahead of that message). Stats.Path counts the lapses and the wake.
func TestBusyPollResumeWakesOne(t *testing.T) {
	a, b, ctx := pollingPair(t)
	sleeping := func(r *rail) bool { return r.pollWait.Load() }
	for round := range 5 {
		if err := a.Send(ctx, 1, []byte("wake up")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Recv(ctx); err != nil {
			t.Fatal(err)
		}
		waitPollerIdle(t)
		waitFor(ctx, t, "every reader of b to wait in the kernel", func() bool {
			return !slices.ContainsFunc(b.rails, func(r *rail) bool { return !sleeping(r) })
		})
		before := b.Stats()
		if err := a.Send(ctx, 2, []byte("one message")); err != nil {
			t.Fatal(err)
		}
		m, err := b.Recv(ctx)
		if err != nil || string(m.Data) != "one message" {
			t.Fatalf("round %d: Recv: %q, %v", round, m.Data, err)
		}
		after := b.Stats()
		for i, r := range b.rails {
			carried := after.Rails[i].SegmentsReceived != before.Rails[i].SegmentsReceived
			if !carried && !sleeping(r) {
				t.Errorf("round %d: rail %d carried nothing and its reader was woken", round, i)
			}
		}
		if after.Path.PollLapses == 0 {
			t.Errorf("round %d: no poll lapse counted after a quiet period", round)
		}
	}
}

// TestBusyPollLazyAckArrives: on polling connections an eager message's
// ACK may wait for a frame to ride on, but with nothing to ride on it
// still goes out on its own (a bare ACK, counted in Stats.Path): the
// sender's segment is acknowledged. Sealed frames count their records.
func TestBusyPollLazyAckArrives(t *testing.T) {
	a, b, ctx := pollingPair(t)
	for i := range 20 {
		if err := a.Send(ctx, 1, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Recv(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(ctx, t, "every eager segment to be acknowledged", func() bool {
		for _, r := range a.Stats().Rails {
			if r.InFlight != 0 {
				return false
			}
		}
		return true
	})
	sa, sb := a.Stats().Path, b.Stats().Path
	if sb.BareAcks == 0 || sb.Writes < sb.BareAcks {
		t.Errorf("receiver: %d writes, %d bare ACKs; want at least one bare ACK among the writes", sb.Writes, sb.BareAcks)
	}
	if sa.Writes == 0 || sa.Seals < 2*20 {
		t.Errorf("sender: %d writes, %d seals; want writes and at least 2 sealed records per message (a SMALL frame's header and body)", sa.Writes, sa.Seals)
	}
	if sb.FramesRead < 20 {
		t.Errorf("receiver read %d frames, want at least the 20 messages", sb.FramesRead)
	}
}
