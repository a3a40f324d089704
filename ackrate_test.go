package multirail

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestRateUnderReverseTraffic: both ends send at once over emulated rails,
// so that each side's ACKs wait behind its own data in the same shaped
// direction (as in a collective, where every rank sends and receives).
// The drain-rate estimate timed by the peer's arrival times (wire
// version 5, ArrivalRateBps) must still read each rail's rate; the
// ACK-timed estimate (RateBps) is logged for comparison.
func TestRateUnderReverseTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 2 x 12 MB over emulated rails; skipped with -short")
	}
	rates := []float64{40e6, 20e6}
	a, b, _ := emuPair(t, Config{}, rates...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const (
		size    = 256 << 10
		msgs    = 48 // 12 MiB each way: about 2.5 s at 40+20 Mbit/s
		senders = 4
	)
	payload := make([]byte, size)
	var wg sync.WaitGroup
	errc := make(chan error, 2*(senders+1))
	for _, c := range []*Conn{a, b} {
		for s := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range msgs / senders {
					if err := c.Send(ctx, uint32(s), payload); err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range msgs {
				m, err := c.Recv(ctx)
				if err != nil {
					errc <- err
					return
				}
				if len(m.Data) != size {
					t.Errorf("received %d bytes, want %d", len(m.Data), size)
				}
			}
		}()
	}
	start := time.Now()
	wg.Wait()
	elapsed := time.Since(start)
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for side, c := range map[string]*Conn{"dialer": a, "acceptor": b} {
		for i, rs := range c.Stats().Rails {
			t.Logf("%s rail %d (%.0f Mbit/s): sent %.1f Mbit/s, by arrivals %.1f Mbit/s, ACK-timed %.1f, ACK delay %v, forward delay %v",
				side, i, rates[i]/1e6, float64(rs.BytesSent)*8/elapsed.Seconds()/1e6, rs.ArrivalRateBps/1e6, rs.RateBps/1e6, rs.AckDelay, rs.ForwardDelay)
			if rs.ArrivalRateBps < 0.8*rates[i] || rs.ArrivalRateBps > 1.2*rates[i] {
				t.Errorf("%s rail %d: rate by arrivals %.1f Mbit/s, want %.0f within 20 %%", side, i, rs.ArrivalRateBps/1e6, rates[i]/1e6)
			}
		}
	}
}
