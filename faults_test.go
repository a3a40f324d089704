package multirail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
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
