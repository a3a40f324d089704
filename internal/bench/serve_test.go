package bench

import (
	"context"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/topo"
)

// TestReceiveMeterInterval: a window of w messages of s bytes in flight
// over one rail of rate r bytes/s, the first byte at t0. The transport
// counts a 64 KiB segment once it is whole; the w first messages complete
// together once w*s bytes have arrived, then one every s/r; the last at
// n*s/r. Measured from the first complete message, as serve did, the
// goodput is r*n/(n-w): too high. From the first byte it is r.
func TestReceiveMeterInterval(t *testing.T) {
	const (
		r   = 40e6 / 8 // bytes per second
		s   = 1 << 20
		seg = 64 << 10
		w   = 16
		n   = 400
	)
	t0 := time.Unix(1000, 0)
	at := func(bytes float64) time.Time { return t0.Add(time.Duration(bytes / r * 1e9)) }
	var m meter
	m.counted(at(seg), []uint64{seg}) // the first look that saw bytes
	for k := range n {
		done := float64(k+1) * s
		if k < w {
			done = w * s
		}
		m.message(s, at(done))
	}
	res := m.result(multirail.Stats{Rails: []multirail.RailStats{{Name: "a", BytesReceived: n * s}}})
	if got := res.GoodputBps / 8; got < r*0.9999 || got > r*1.0001 {
		t.Errorf("goodput %.0f B/s, want the path's %.0f B/s", got, r)
	}
	if want := at(n * s).Sub(t0).Seconds(); res.DurationS < want*0.9999 || res.DurationS > want*1.0001 {
		t.Errorf("duration %.4f s, want %.4f s (first byte to last)", res.DurationS, want)
	}
	if got := res.Rails[0].GoodputBps / 8; got < r*0.9999 || got > r*1.0001 {
		t.Errorf("rail goodput %.0f B/s, want %.0f B/s", got, r)
	}
	old := float64(n*s) / at(n*s).Sub(at(w*s)).Seconds() // first message to last
	if old <= r*1.03 {
		t.Fatalf("the old computation gives %.0f B/s: the test does not tell it apart", old)
	}
	// Later looks do not move the start.
	m.counted(t0.Add(time.Second), []uint64{10 * seg})
	if m.start != at(seg) || m.atStart != seg {
		t.Errorf("start moved to %v, %d bytes", m.start, m.atStart)
	}
	var empty meter
	if r := empty.result(multirail.Stats{}); r.GoodputBps != 0 || r.DurationS != 0 {
		t.Errorf("nothing received: %+v", r)
	}
}

// TestReceiveAllWithinLinkRate: serve's goodput over one emulated rail of
// 40 Mbit/s, with 2 MiB in flight, stays within 1 % of the rail's rate
// (the payload is a little less than what crosses the link). Counting
// from the first complete message would report about 55 Mbit/s here.
func TestReceiveAllWithinLinkRate(t *testing.T) {
	if testing.Short() {
		t.Skip("short: sends for 1.5 s")
	}
	const rate = 40e6
	p := emuPair(t, topo.PairConfig{Rails: []emu.Spec{{Kind: emu.KindEmu, RateBps: rate}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type got struct {
		r   ServeResult
		err error
	}
	ch := make(chan got, 1)
	go func() { r, err := ReceiveAll(ctx, p.Acceptor); ch <- got{r, err} }()
	n, err := SendWindow(ctx, p.Dialer, Payload(256<<10), SendOptions{Window: 8, Until: time.Now().Add(1500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	p.Dialer.Close()
	res := <-ch
	if res.err != nil {
		t.Fatal(res.err)
	}
	r := res.r
	t.Logf("%d messages, %.2f Mbit/s over %.3f s", r.Messages, r.GoodputBps/1e6, r.DurationS)
	if r.Messages != n || r.Bytes != int64(n)*256<<10 {
		t.Errorf("received %d messages, %d bytes; sent %d of 256 KiB", r.Messages, r.Bytes, n)
	}
	if r.GoodputBps > 1.01*rate || r.GoodputBps < 0.7*rate {
		t.Errorf("goodput %.1f Mbit/s over %.2f s on a %.0f Mbit/s rail", r.GoodputBps/1e6, r.DurationS, rate/1e6)
	}
	if len(r.Rails) != 1 || r.Rails[0].GoodputBps > 1.01*rate || r.Rails[0].Name != "emu:40mbit" {
		t.Errorf("rails %+v", r.Rails)
	}
}
