package sim

import (
	"math/rand/v2"
	"testing"
)

// TestHeapOrder: events come out by time, and in scheduling order among
// equal times, also across the renumbering of sequence numbers.
func TestHeapOrder(t *testing.T) {
	for _, start := range []uint32{0, 1<<32 - 100} {
		h := eventHeap{seq: start}
		r := rand.New(rand.NewPCG(1, uint64(start)))
		type ref struct {
			t int64
			n int32
		}
		var want []ref
		next := int32(0)
		now := int64(0)
		popped := 0
		check := func() {
			e := h.pop()
			// The earliest pending time; the first scheduled among equals.
			best := -1
			for i, w := range want {
				if best < 0 || w.t < want[best].t {
					best = i
				}
			}
			if e.t != want[best].t || e.arg() != want[best].n {
				t.Fatalf("start %d, pop %d: got (%d, %d), want (%d, %d)", start, popped, e.t, e.arg(), want[best].t, want[best].n)
			}
			want = append(want[:best], want[best+1:]...)
			now = e.t
			popped++
		}
		for range 5000 {
			if len(want) > 0 && r.IntN(3) == 0 {
				check()
				continue
			}
			at := now + int64(r.IntN(20)) // many equal times
			h.push(at, evArrive, next)
			want = append(want, ref{at, next})
			next++
		}
		for len(want) > 0 {
			check()
		}
		if h.len() != 0 {
			t.Fatalf("%d events left", h.len())
		}
	}
}
