package multirail

import (
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
// message arrives whole. A rail is taken down for a lack of progress on
// its socket, not for slow acknowledgements.
func TestLabSlowRailStaysUp(t *testing.T) {
	if testing.Short() {
		t.Skip("lab tests build network namespaces; skipped with -short")
	}
	cfg := Config{RailTimeout: 200 * time.Millisecond}
	a, b, l := labPair(t, cfg, 100e6, 100e6)
	slowed := make(chan struct{})
	var restoreErr error
	// About 25 s of traffic at the full 200 Mbit/s: the slow phase falls
	// in its middle whatever the machine does.
	gap := transfer(t, a, b, 160, 4, 8<<20, func() {
		if err := l.SetRate(1, l.Rate(1)/10); err != nil {
			t.Fatal(err)
		}
		go func() {
			defer close(slowed)
			time.Sleep(10 * time.Second) // the length of the slowdown under test
			restoreErr = l.SetRate(1, l.Rate(1))
		}()
	})
	<-slowed
	if restoreErr != nil {
		t.Fatal(restoreErr)
	}
	t.Logf("longest wait for a message after the slowdown began: %v", gap.Round(time.Millisecond))
	for side, c := range map[string]*Conn{"dialer": a, "acceptor": b} {
		for i, r := range c.Stats().Rails {
			if r.Errors != 0 || r.Rejoins != 0 || !r.Up {
				t.Errorf("%s: rail %d taken down %d times (rejoined %d, up %v): %s", side, i, r.Errors, r.Rejoins, r.Up, r.LastError)
			}
		}
	}
}
