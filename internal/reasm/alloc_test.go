package reasm

import (
	"testing"

	"github.com/multirail/multirail/internal/wire"
)

// bigMessage returns a Reassembler that knows message 1 of segs segments
// (none received yet) and the headers of its segments.
func bigMessage(tb testing.TB, segs int) (*Reassembler, []wire.Data) {
	tb.Helper()
	total := uint64(segs * testSeg)
	r, err := New(Config{SegmentSize: testSeg, MaxMessage: int64(total), Window: 2 * Cost(total)})
	if err != nil {
		tb.Fatal(err)
	}
	ds := make([]wire.Data, segs)
	for i := range ds {
		ds[i] = segOf(tb, r.Limits(), 1, 7, total, i)
	}
	if _, v, err := r.Begin(ds[segs-1]); err != nil || v != Write {
		tb.Fatalf("Begin = %v, %v", v, err)
	}
	r.Abort(ds[segs-1])
	return r, ds
}

// TestAllocs checks that the per-segment paths on a message already known
// allocate nothing: Begin+Commit, Begin+Abort, the Discard and Hold
// verdicts, and Offer into a missing slot.
func TestAllocs(t *testing.T) {
	const runs = 200
	payload := make([]byte, testSeg)
	t.Run("Begin+Commit", func(t *testing.T) {
		r, ds := bigMessage(t, runs+10)
		i := 0
		if a := testing.AllocsPerRun(runs, func() {
			dst, v, err := r.Begin(ds[i])
			if err != nil || v != Write {
				t.Fatalf("Begin = %v, %v", v, err)
			}
			copy(dst, payload)
			r.Commit(ds[i])
			i++
		}); a != 0 {
			t.Fatalf("Begin+Commit: %v allocations, want 0", a)
		}
	})
	t.Run("Begin+Abort", func(t *testing.T) {
		r, ds := bigMessage(t, 4)
		if a := testing.AllocsPerRun(runs, func() {
			if _, v, err := r.Begin(ds[0]); err != nil || v != Write {
				t.Fatalf("Begin = %v, %v", v, err)
			}
			r.Abort(ds[0])
		}); a != 0 {
			t.Fatalf("Begin+Abort: %v allocations, want 0", a)
		}
	})
	t.Run("Discard and Hold", func(t *testing.T) {
		r, ds := bigMessage(t, 4)
		r.Begin(ds[0])
		r.Commit(ds[0])
		r.Begin(ds[1]) // busy
		if a := testing.AllocsPerRun(runs, func() {
			if _, v, _ := r.Begin(ds[0]); v != Discard {
				t.Fatalf("Begin = %v, want Discard", v)
			}
			if _, v, _ := r.Begin(ds[1]); v != Hold {
				t.Fatalf("Begin = %v, want Hold", v)
			}
		}); a != 0 {
			t.Fatalf("Discard/Hold: %v allocations, want 0", a)
		}
	})
	t.Run("Offer into missing", func(t *testing.T) {
		r, ds := bigMessage(t, runs+10)
		i := 0
		if a := testing.AllocsPerRun(runs, func() {
			r.Offer(ds[i], payload)
			i++
		}); a != 0 {
			t.Fatalf("Offer: %v allocations, want 0", a)
		}
		if _, v, _ := r.Begin(ds[0]); v != Discard {
			t.Fatalf("Begin after Offer = %v, want Discard", v)
		}
	})
	t.Run("duplicate after delivery", func(t *testing.T) {
		r, ds := bigMessage(t, 1)
		r.Begin(ds[0])
		r.Commit(ds[0])
		if _, ok := r.Next(); !ok {
			t.Fatal("Next: none")
		}
		if a := testing.AllocsPerRun(runs, func() {
			if _, v, _ := r.Begin(ds[0]); v != Discard {
				t.Fatalf("Begin = %v, want Discard", v)
			}
		}); a != 0 {
			t.Fatalf("Discard after delivery: %v allocations, want 0", a)
		}
	})
}

// BenchmarkBeginCommit measures Begin+Commit of one segment of a message
// already known (the payload copy is left out: it belongs to the read).
// Creating and delivering a message every 4096 segments is not timed.
func BenchmarkBeginCommit(b *testing.B) {
	const segs = 4096
	total := uint64(segs * testSeg)
	r, err := New(Config{SegmentSize: testSeg, MaxMessage: int64(total), Window: 2 * Cost(total)})
	if err != nil {
		b.Fatal(err)
	}
	ds := make([]wire.Data, segs)
	for i := range ds {
		ds[i] = segOf(b, r.Limits(), 1, 7, total, i)
	}
	id := uint64(0)
	renew := func() { // deliver the message, start the next one with its last segment
		if id > 0 {
			if _, ok := r.Next(); !ok {
				b.Fatal("Next: none")
			}
		}
		id++
		for i := range ds {
			ds[i].Message = id
		}
		r.Begin(ds[segs-1])
		r.Commit(ds[segs-1])
	}
	renew()
	b.ReportAllocs()
	b.ResetTimer()
	s := 0
	for range b.N {
		if s == segs-1 {
			b.StopTimer()
			renew()
			s = 0
			b.StartTimer()
		}
		_, v, err := r.Begin(ds[s])
		if err != nil || v != Write {
			b.Fatalf("Begin = %v, %v", v, err)
		}
		r.Commit(ds[s])
		s++
	}
}
