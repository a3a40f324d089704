package multirail

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/lab"
)

// labPair builds a lab of network namespaces joined by tbf-shaped veth
// rails (root only), listens in namespace B and dials from namespace A,
// one rail per veth pair.
func labPair(t *testing.T, cfg Config, rates ...float64) (*Conn, *Conn, *lab.Lab) {
	t.Helper()
	if err := lab.Available(); err != nil {
		t.Skipf("needs a network-namespace lab (root, iproute2): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Without ethtool the offloads stay on: the rails are shaped less
	// faithfully, which does not matter to failure tests.
	_, noEthtool := exec.LookPath("ethtool")
	l, err := lab.Up(ctx, lab.Config{Rates: rates, Prefix: fmt.Sprintf("mrf%04x", rand.IntN(1<<16)), Offloads: noEthtool != nil})
	if err != nil {
		t.Fatalf("lab up: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Down(); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	var ln *Listener
	if err := l.Run(1, func() (err error) { ln, err = Listen(":0", cfg); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	dcfg := cfg
	dcfg.Rails = nil
	for i := range rates {
		dcfg.Rails = append(dcfg.Rails, Rail{Name: fmt.Sprintf("rail%d", i),
			Addr: net.JoinHostPort(l.RailIP(1, i), fmt.Sprint(port)), Local: l.RailIP(0, i)})
	}
	// Rails are dialed, and redialed after a failure, from namespace A.
	dcfg.DialRail = func(ctx context.Context, r Rail) (net.Conn, error) {
		var c net.Conn
		err := l.Run(0, func() (err error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(r.Local)}}
			c, err = d.DialContext(ctx, "tcp", r.Addr)
			return err
		})
		return c, err
	}
	a, b := dialAndAccept(t, ln, dcfg)
	return a, b, l
}

// TestLabRailFailure runs transfers between two network namespaces over
// three tbf-shaped veth rails and, midway, takes one rail's link down
// (ip link set down: packets vanish, no error reaches either end) or
// resets one rail's TCP connection. Every message must arrive whole
// (SHA-256), once and in per-tag order; the rail must be declared failed,
// and once its link is back it must rejoin and carry traffic again.
func TestLabRailFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("lab tests build network namespaces; skipped with -short")
	}
	// The idle timeout is far beyond the transfer's deadline: the transfer
	// must not wait for it to notice a dead rail.
	cfg := Config{IdleTimeout: 10 * time.Minute}
	a, b, l := labPair(t, cfg, 100e6, 100e6, 50e6)

	t.Run("link down", func(t *testing.T) {
		gap := transfer(t, a, b, 90, 3, 512<<10, func() {
			if err := l.SetLink(1, false); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("link down: longest wait for a message after the link went down: %v", gap.Round(time.Millisecond))
		waitLong(t, "rail 1 declared down", func() bool { return !a.Stats().Rails[1].Up })
		if e := a.Stats().Rails[1].LastError; !strings.Contains(e, "stalled") {
			t.Errorf("rail 1 went down with %q, want a stall", e)
		}
		if err := l.SetLink(1, true); err != nil {
			t.Fatal(err)
		}
		checkRejoined(t, a, b, 1, true)
	})

	t.Run("connection reset", func(t *testing.T) {
		before := a.Stats().Rails[2].Rejoins
		gap := transfer(t, a, b, 90, 3, 512<<10, func() { resetRail(a, 2) })
		t.Logf("connection reset: longest wait for a message after the reset: %v", gap.Round(time.Millisecond))
		waitLong(t, "rail 2 rejoined after the reset", func() bool {
			ra, rb := a.Stats().Rails[2], b.Stats().Rails[2]
			return ra.Up && ra.Rejoins > before && rb.Up
		})
		checkRejoined(t, a, b, 2, true)
	})
}

// resetRail aborts rail i's current TCP connection with a reset, as a
// middlebox or a crashed NIC driver would.
func resetRail(c *Conn, i int) {
	r := c.rails[i]
	c.mu.Lock()
	nc := r.c
	c.mu.Unlock()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = nc.Close()
}

// TestLabSlowRailStaysUp slows one of two tbf-shaped rails to a tenth of
// its rate for 10 s in the middle of a transfer (tc qdisc change, as cross
// traffic would): no rail may be taken down on either side, and every
// message arrives whole and in order. A rail is taken down for a lack of
// progress on its socket, not for slow acknowledgements. The sender sends
// from 2 s before the slowdown until 2 s after it, however fast the
// machine (-race) moves the bytes.
func TestLabSlowRailStaysUp(t *testing.T) {
	if testing.Short() {
		t.Skip("lab tests build network namespaces; skipped with -short")
	}
	cfg := Config{RailTimeout: 200 * time.Millisecond}
	a, b, l := labPair(t, cfg, 100e6, 100e6)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const size = 1 << 20
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, size/2) }
	stop := make(chan struct{})
	sent := make(chan int, 1)
	go func() {
		n := 0
		defer func() { sent <- n }()
		for {
			select {
			case <-stop:
				// An empty message on the same tag (in order) ends it.
				if err := a.Send(ctx, 1, nil); err != nil {
					t.Errorf("Send of the end: %v", err)
				}
				return
			default:
			}
			if err := a.Send(ctx, 1, msg(n)); err != nil {
				t.Errorf("Send %d: %v", n, err)
				return
			}
			n++
		}
	}()
	phases := make(chan error, 1)
	go func() {
		wait := func(d time.Duration) bool {
			select {
			case <-time.After(d): // the phases of the scenario under test
				return true
			case <-ctx.Done():
				return false
			}
		}
		defer close(stop)
		if !wait(2 * time.Second) {
			phases <- ctx.Err()
			return
		}
		if err := l.SetRate(1, l.Rate(1)/10); err != nil {
			phases <- err
			return
		}
		if !wait(10 * time.Second) {
			phases <- ctx.Err()
			return
		}
		err := l.SetRate(1, l.Rate(1))
		if err == nil && !wait(2*time.Second) {
			err = ctx.Err()
		}
		phases <- err
	}()
	got := 0
	for {
		m, err := b.Recv(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", got, err)
		}
		if len(m.Data) == 0 {
			break
		}
		if !bytes.Equal(m.Data, msg(got)) {
			t.Fatalf("message %d: %d bytes, not the message sent", got, len(m.Data))
		}
		b.Release(m.Data)
		got++
	}
	if total := <-sent; got != total {
		t.Fatalf("received %d messages, sent %d", got, total)
	}
	if err := <-phases; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d messages of 1 MiB over 14 s, the slow phase in the middle", got)
	for side, c := range map[string]*Conn{"dialer": a, "acceptor": b} {
		for i, r := range c.Stats().Rails {
			if r.Errors != 0 || r.Rejoins != 0 || !r.Up {
				t.Errorf("%s: rail %d taken down %d times (rejoined %d, up %v): %s", side, i, r.Errors, r.Rejoins, r.Up, r.LastError)
			}
		}
	}
}
