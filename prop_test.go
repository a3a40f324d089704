package multirail

import (
	"bytes"
	"context"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPropertySegmentation: over a real connection of 1-3 loopback rails,
// any segment size and any mix of message sizes (empty, one byte, exact
// multiples of the segment size, odd tails, eager and not) arrive whole and
// in per-tag order.
func TestPropertySegmentation(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		seg := rapid.IntRange(512, 16<<10).Draw(rt, "segment")
		rails := rapid.IntRange(1, 3).Draw(rt, "rails")
		eager := rapid.SampledFrom([]int{-1, 0, 512}).Draw(rt, "eagerLimit")
		a, b := pair(t, rails, Config{SegmentSize: seg, EagerLimit: eager, QueueDepth: rapid.IntRange(1, 8).Draw(rt, "queue")})
		defer a.Close()
		defer b.Close()
		n := rapid.IntRange(1, 12).Draw(rt, "messages")
		type msg struct {
			tag  uint32
			data []byte
		}
		var msgs []msg
		for i := 0; i < n; i++ {
			size := rapid.OneOf(
				rapid.Just(0), rapid.Just(1), rapid.Just(seg), rapid.Just(3*seg),
				rapid.IntRange(0, 5*seg+17),
			).Draw(rt, "size")
			p := make([]byte, size)
			for j := range p {
				p[j] = byte(i*31 + j)
			}
			msgs = append(msgs, msg{uint32(rapid.IntRange(0, 2).Draw(rt, "tag")), p})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			for _, m := range msgs {
				if err := a.Send(ctx, m.tag, m.data); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		want := map[uint32][][]byte{}
		for _, m := range msgs {
			want[m.tag] = append(want[m.tag], m.data)
		}
		for range msgs {
			m, err := b.Recv(ctx)
			if err != nil {
				rt.Fatalf("Recv: %v", err)
			}
			q := want[m.Tag]
			if len(q) == 0 || !bytes.Equal(q[0], m.Data) {
				rt.Fatalf("tag %d: got %d bytes, not the next message sent on the tag", m.Tag, len(m.Data))
			}
			want[m.Tag] = q[1:]
		}
		if err := <-errc; err != nil {
			rt.Fatalf("Send: %v", err)
		}
	})
}
