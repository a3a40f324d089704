package reasm

import (
	"bytes"
	"testing"

	"github.com/multirail/multirail/internal/wire"
)

// TestCopiesBounded: segments offered while a frame spanning them is read
// elsewhere are kept only within MaxCopies; settling the span forgets the
// copies inside it; a failed read of the span is filled from the copies
// kept, and what no copy covers is missing again.
func TestCopiesBounded(t *testing.T) {
	const segs, maxCopies = 8, 2 * testSeg
	total := uint64(segs * testSeg)
	span := wire.Data{Message: 1, Total: total, Offset: 0, Len: 4 * testSeg} // segments 0..3 in one frame
	single := func(i int) wire.Data {
		return wire.Data{Message: 1, Total: total, Offset: uint64(i * testSeg), Len: testSeg}
	}
	for _, fail := range []bool{false, true} {
		r, err := New(Config{SegmentSize: testSeg, MaxMessage: int64(total), Window: Cost(total), MaxCopies: maxCopies})
		if err != nil {
			t.Fatal(err)
		}
		dst, v, err := r.Begin(span)
		if err != nil || v != Write {
			t.Fatalf("Begin(span) = %v, %v", v, err)
		}
		for i := 0; i < 4; i++ {
			if _, v, err := r.Begin(single(i)); err != nil || v != Hold {
				t.Fatalf("Begin(segment %d) while the span is read = %v, %v; want Hold", i, v, err)
			}
			r.Offer(single(i), bytes.Repeat([]byte{byte('a' + i)}, testSeg))
			if r.Copies() > maxCopies {
				t.Fatalf("after offering segment %d: %d bytes of copies, MaxCopies %d", i, r.Copies(), maxCopies)
			}
		}
		if r.Copies() != maxCopies {
			t.Fatalf("%d bytes of copies kept, want %d (the first two offered)", r.Copies(), maxCopies)
		}
		if !fail {
			copy(dst, bytes.Repeat([]byte{'s'}, len(dst)))
			r.Commit(span)
			if r.Copies() != 0 {
				t.Fatalf("after the span committed: %d bytes of copies still kept", r.Copies())
			}
			continue
		}
		r.Abort(span)
		if r.Copies() != 0 {
			t.Fatalf("after the span failed: %d bytes of copies still kept", r.Copies())
		}
		for i, want := range []Verdict{Discard, Discard, Write, Write} { // 0 and 1 filled from copies
			if _, v, err := r.Begin(single(i)); err != nil || v != want {
				t.Fatalf("Begin(segment %d) after the span failed = %v, %v; want %v", i, v, err, want)
			}
		}
	}
}
