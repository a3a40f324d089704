package multirail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/emu"
)

// TestPeerKilledMidTransfer: the peer's process is killed (SIGKILL) while
// a large message crosses to it. Its kernel closes the sockets, so the
// survivor's blocked Send and its Recv fail within 2 s with
// ErrAllRailsDown, and another session of the survivor is untouched.
func TestPeerKilledMidTransfer(t *testing.T) {
	child := startHelper(t)
	addr := child.expect(t, "addr ")
	child.expect(t, "ready")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, Config{Token: rssToken, MaxMessageSize: rssMaxMessage, Rails: []Rail{{Addr: addr}, {Addr: addr}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other, otherPeer := pair(t, 2, Config{})

	// The session works: a message and its SHA-256 back.
	if err := c.Send(ctx, 1, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Recv(ctx); err != nil || len(m.Data) != 32 {
		t.Fatalf("reply: %d bytes, %v", len(m.Data), err)
	}
	sent := make(chan error, 1)
	go func() { sent <- c.Send(ctx, 2, make([]byte, rssMaxMessage)) }()
	// Kill once part of the message has been written.
	for {
		var n uint64
		for _, r := range c.Stats().Rails {
			n += r.BytesSent
		}
		if n > 1<<20 {
			break
		}
		select {
		case err := <-sent:
			t.Fatalf("the 8 MiB Send ended before the kill: %v", err)
		case <-ctx.Done():
			t.Fatal("the 8 MiB Send did not start")
		case <-time.After(time.Millisecond):
		}
	}
	if err := child.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	within, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	if _, err := c.Recv(within); !errors.Is(err, ErrAllRailsDown) {
		t.Fatalf("Recv after the peer was killed: %v; want ErrAllRailsDown within 2 s", err)
	}
	select {
	case err := <-sent:
		if !errors.Is(err, ErrAllRailsDown) {
			t.Fatalf("Send after the peer was killed: %v; want ErrAllRailsDown", err)
		}
	case <-within.Done():
		t.Fatal("Send still blocked 2 s after the peer was killed")
	}
	_ = child.stop() // reaps the killed child
	if err := other.Send(ctx, 3, []byte("untouched")); err != nil {
		t.Fatal(err)
	}
	if m, err := otherPeer.Recv(ctx); err != nil || string(m.Data) != "untouched" {
		t.Fatalf("the other session: %q, %v", m.Data, err)
	}
}

// TestAllRailsBlackout: every rail black-holed for 5 s (the emulated links
// carry nothing and nobody sees an error), then restored: the session
// survives and every message arrives, once, intact.
func TestAllRailsBlackout(t *testing.T) {
	if testing.Short() {
		t.Skip("a 5 s outage")
	}
	a, b, links := emuPair(t, Config{}, 100e6, 100e6)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n, size = 40, 256 << 10
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, size) }
	sent := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if err := a.Send(ctx, 1, msg(i)); err != nil {
				sent <- fmt.Errorf("message %d: %w", i, err)
				return
			}
		}
		sent <- nil
	}()
	for i := 0; i < n; i++ {
		if i == n/4 {
			for _, l := range links {
				l.SetDown(true)
			}
			time.Sleep(5 * time.Second) // the outage itself
			for _, l := range links {
				l.SetDown(false)
			}
		}
		m, err := b.Recv(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !bytes.Equal(m.Data, msg(i)) {
			t.Fatalf("message %d: %d bytes, not the message sent", i, len(m.Data))
		}
		b.Release(m.Data)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// outageConfig notices a silent link within a few hundred milliseconds,
// so that an outage of a second or two takes every rail down.
var outageConfig = Config{IdleTimeout: 300 * time.Millisecond, RailTimeout: 100 * time.Millisecond, HandshakeTimeout: 2 * time.Second}

// setDown takes every link down or back up.
func setDown(links []*emu.Link, down bool) {
	for _, l := range links {
		l.SetDown(down)
	}
}

// railsUp counts c's rails that are up.
func railsUp(c *Conn) int {
	n := 0
	for _, r := range c.Stats().Rails {
		if r.Up {
			n++
		}
	}
	return n
}

// TestSessionGraceOutage: every link goes silent for longer than the
// idle timeout, so that both sides take every rail down; the session
// waits (Send queues, Recv waits), the dialing side reconnects once the
// links are back, and every message arrives whole, once, in order,
// including the ones sent while no rail was up.
func TestSessionGraceOutage(t *testing.T) {
	a, b, links := emuPair(t, outageConfig, 100e6, 100e6)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1000+i*7919%(256<<10)) }
	const n, during = 60, 20 // messages 20..39 are sent while no rail is up
	got := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			m, err := b.Recv(ctx)
			if err != nil {
				got <- fmt.Errorf("message %d: %w", i, err)
				return
			}
			if !bytes.Equal(m.Data, msg(i)) {
				got <- fmt.Errorf("message %d: %d bytes, not the message sent", i, len(m.Data))
				return
			}
			b.Release(m.Data)
		}
		got <- nil
	}()
	for i := 0; i < during; i++ {
		if err := a.Send(ctx, 1, msg(i)); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	setDown(links, true)
	waitLong(t, "every rail down on both sides", func() bool { return railsUp(a) == 0 && railsUp(b) == 0 })
	sent := make(chan error, 1)
	go func() {
		for i := during; i < n; i++ {
			if err := a.Send(ctx, 1, msg(i)); err != nil {
				sent <- fmt.Errorf("message %d: %w", i, err)
				return
			}
		}
		sent <- nil
	}()
	// The eager messages among them are held while no rail is up; the
	// first large one waits for its acknowledgement.
	time.Sleep(time.Second) // part of the outage, not a synchronisation
	if railsUp(a) != 0 || railsUp(b) != 0 {
		t.Fatalf("a rail came up while every link was down: %d and %d", railsUp(a), railsUp(b))
	}
	setDown(links, false)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Conn{a, b} {
		for _, r := range c.Stats().Rails {
			if r.Rejoins == 0 {
				t.Errorf("rail %s never rejoined", r.Name)
			}
		}
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close after everything was received: %v", err)
	}
}

// TestSessionGraceExpires: when no rail comes back within SessionGrace,
// Recv and Send fail with ErrAllRailsDown, and Close reports the eager
// message that was held and never delivered.
func TestSessionGraceExpires(t *testing.T) {
	cfg := outageConfig
	cfg.SessionGrace = 700 * time.Millisecond
	a, b, links := emuPair(t, cfg, 100e6, 100e6)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	setDown(links, true)
	waitLong(t, "every rail of the sender down", func() bool { return railsUp(a) == 0 })
	if err := a.Send(ctx, 1, []byte("held")); err != nil {
		t.Fatalf("eager Send during the grace: %v; want nil (held)", err)
	}
	start := time.Now()
	if _, err := b.Recv(ctx); !errors.Is(err, ErrAllRailsDown) || !strings.Contains(err.Error(), "SessionGrace") {
		t.Fatalf("Recv once the grace ran out: %v; want ErrAllRailsDown naming SessionGrace", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("Recv failed %v after the outage began; SessionGrace is %v", waited, cfg.SessionGrace)
	}
	if err := a.Send(ctx, 1, make([]byte, 1<<20)); !errors.Is(err, ErrAllRailsDown) {
		t.Fatalf("Send after the grace: %v; want ErrAllRailsDown", err)
	}
	if err := a.Close(); !errors.Is(err, ErrUndelivered) {
		t.Fatalf("Close: %v; want ErrUndelivered for the held message", err)
	}
}

// TestSessionGraceNone: a negative SessionGrace fails the session as soon
// as its last rail is down.
func TestSessionGraceNone(t *testing.T) {
	cfg := outageConfig
	cfg.SessionGrace = -1
	_, b, links := emuPair(t, cfg, 100e6, 100e6)
	setDown(links, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.Recv(ctx); !errors.Is(err, ErrAllRailsDown) || strings.Contains(err.Error(), "SessionGrace") {
		t.Fatalf("Recv with no grace: %v; want ErrAllRailsDown at once", err)
	}
}

// TestSessionGraceRefused: the accepting side gave up on the session (its
// grace is short) before the links came back; the dialing side's rejoins
// are refused, and it fails at once rather than at the end of its own
// long grace.
func TestSessionGraceRefused(t *testing.T) {
	lcfg, dcfg := outageConfig, outageConfig
	lcfg.SessionGrace = 300 * time.Millisecond
	dcfg.SessionGrace = time.Minute
	a, b, links := emuPairOf(t, lcfg, dcfg, 100e6, 100e6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	setDown(links, true)
	if _, err := b.Recv(ctx); !errors.Is(err, ErrAllRailsDown) {
		t.Fatalf("accepting side: %v; want ErrAllRailsDown after its grace", err)
	}
	setDown(links, false)
	if _, err := a.Recv(ctx); !errors.Is(err, ErrAllRailsDown) || !strings.Contains(err.Error(), "no longer has the session") {
		t.Fatalf("dialing side: %v; want ErrAllRailsDown saying the peer no longer has the session", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the dialing side waited for its own grace")
	}
}
