package multirail

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/multirail/multirail/internal/sender"
)

// addrConn is a net.Conn that only has a local address.
type addrConn struct {
	net.Conn
	local net.Addr
}

func (c addrConn) LocalAddr() net.Addr { return c.local }

func TestNicOf(t *testing.T) {
	tcp := func(ip string) net.Conn { return addrConn{local: &net.TCPAddr{IP: net.ParseIP(ip), Port: 1}} }
	a, b, other := nicOf(tcp("10.77.0.1")), nicOf(tcp("10.77.0.1")), nicOf(tcp("10.77.0.2"))
	if a == nil || a != b {
		t.Errorf("two connections from 10.77.0.1: interfaces %p and %p, want one", a, b)
	}
	if other == nil || other == a {
		t.Errorf("10.77.0.2 shares 10.77.0.1's interface (%p)", other)
	}
	for _, c := range []net.Conn{tcp("127.0.0.1"), tcp("::1"), tcp("0.0.0.0"), addrConn{local: &net.UDPAddr{IP: net.ParseIP("10.77.0.3")}}, nil} {
		if k := nicOf(c); k != nil {
			t.Errorf("nicOf(%v) = %p, want nil (loopback, unspecified, not TCP)", c, k)
		}
	}
}

// TestPlanUsesInterfaceRate: the rails' samples feed their interfaces'
// pools (the reader, on each ACK that took one), and the planner uses a
// pool's rate for a rail whose own newest sample is older than poolAfter,
// while the pool's is fresh; the rail's own otherwise. The emulated
// rails are on loopback, which has no interface of its own (nicOf), so
// the test gives them interfaces.
func TestPlanUsesInterfaceRate(t *testing.T) {
	a, b, _ := emuPair(t, Config{}, 200e6, 100e6, 50e6)
	nics := []*nic{{}, {}, {}}
	a.mu.Lock()
	for i, r := range a.rails {
		if r.nic != nil {
			t.Fatalf("rail %d on loopback has an interface", i)
		}
		r.nic = nics[i]
	}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 4
	done := recvAll(ctx, b, n)
	for range n {
		if err := a.Send(ctx, 1, make([]byte, 4<<20)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, k := range nics {
		if k.pool.Samples() == 0 {
			t.Errorf("rail %d: its interface took no sample in %d messages of 4 MiB", i, n)
		}
	}
	pnow := pollNow()
	nics[0].pool = sender.Pool{}
	nics[0].pool.Add(pnow, 1e9) // fresh
	nics[1].pool = sender.Pool{}
	nics[1].pool.Add(pnow-2*int64(sender.RateTrust), 1e9) // stale
	_, _, at := a.rails[0].core.Sample()
	for _, tc := range []struct {
		name string
		now  int64 // c.now()
		rail int
		want float64
	}{
		{"own sample fresh: own rate", at, 0, a.rails[0].core.Rate()},
		{"own sample older than poolAfter: the interface's", at + int64(poolAfter) + 1, 0, 1e9},
		{"the interface's stale: own rate", at + int64(poolAfter) + 1, 1, a.rails[1].core.Rate()},
	} {
		l := a.laneLocked(a.rails[tc.rail], tc.now, pnow)
		if l.Rate != tc.want || l.Stale && tc.want == 1e9 {
			t.Errorf("%s: rail %d lane rate %.0f (stale %v), want %.0f", tc.name, tc.rail, l.Rate, l.Stale, tc.want)
		}
	}
}
