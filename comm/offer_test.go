package comm

import (
	"context"
	"fmt"
	"testing"
)

// TestMessagesHandedOnInPlace: a message of a collective goes from the
// rail that completed it straight to the call waiting for it
// (multirail.Conn.OnMessage), not through the demultiplexer's Recv (a
// goroutine wake-up per message): over many small allreduces on three
// rails per pair, nearly every message is handed on in place and the
// demultiplexer hardly ever waits to be handed one.
func TestMessagesHandedOnInPlace(t *testing.T) {
	cs := local(t, 4, Config{LoopbackRails: 3})
	const calls = 300
	each(t, cs, func(ctx context.Context, c *Comm) error {
		for i := range calls {
			x := []float32{float32(c.Rank() + i)}
			if err := Allreduce(ctx, c, x, Sum); err != nil {
				return err
			}
			if want := float32(4*i + 6); x[0] != want {
				return fmt.Errorf("call %d: %v, want %v", i, x[0], want)
			}
		}
		return nil
	})
	busy := 0
	for _, c := range cs {
		for _, ps := range c.Stats().Peers {
			if ps.Conn == nil || ps.Conn.MessagesReceived < calls {
				continue // a pair that the algorithm does not use each call
			}
			busy++
			got, handed, waits := ps.Conn.MessagesReceived, ps.Conn.Path.Handed, ps.Conn.Path.RecvWaits
			t.Logf("rank %d from %d: %d messages, %d handed on in place, the demultiplexer waited %d times", c.Rank(), ps.Rank, got, handed, waits)
			if handed < got*9/10 || waits > got/10 {
				t.Errorf("rank %d from %d: of %d messages %d handed on in place, and the demultiplexer waited %d times; want nearly all in place", c.Rank(), ps.Rank, got, handed, waits)
			}
		}
	}
	if busy < 4 {
		t.Errorf("%d pairs carried a message per call, want at least 4", busy)
	}
}
