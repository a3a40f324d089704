package reasm

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/multirail/multirail/internal/wire"
)

// TestSpansModel: a message cut into frames of random spans (one or more
// consecutive segments, up to wire.MaxPayload), delivered in any order
// with whole duplicates, is rebuilt exactly, each duplicate discarded.
func TestSpansModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seg := rapid.IntRange(512, 4096).Draw(t, "seg")
		size := rapid.IntRange(1, 40*seg).Draw(t, "size")
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*131 + size)
		}
		r, err := New(Config{SegmentSize: seg, MaxMessage: int64(size), Window: Cost(uint64(size))})
		if err != nil {
			t.Fatal(err)
		}
		maxK := wire.MaxPayload(seg) / seg
		var frames []wire.Data
		for off := 0; off < size; {
			k := rapid.IntRange(1, maxK).Draw(t, "k")
			n := min(k*seg, size-off)
			frames = append(frames, wire.Data{Message: 1, Tag: 3, Total: uint64(size), Offset: uint64(off), Len: uint32(n)})
			off += n
		}
		lim := r.Limits()
		for _, d := range frames {
			h, fixed := header(d)
			if _, err := wire.ParseData(h, fixed, lim); err != nil {
				t.Fatalf("the wire refuses a span the sender may cut: %v", err)
			}
		}
		order := rapid.Permutation(frames).Draw(t, "order")
		dups := rapid.SliceOfN(rapid.IntRange(0, len(frames)-1), 0, 5).Draw(t, "dups")
		for _, i := range dups {
			order = append(order, frames[i])
		}
		written := 0
		for _, d := range order {
			dst, v, err := r.Begin(d)
			if err != nil {
				t.Fatal(err)
			}
			switch v {
			case Write:
				copy(dst, data[d.Offset:d.Offset+uint64(d.Len)])
				r.Commit(d)
				written++
			case Discard:
			default:
				t.Fatalf("verdict %v for a sequential delivery", v)
			}
		}
		if written != len(frames) {
			t.Fatalf("%d frames written, want %d (the %d duplicates discarded)", written, len(frames), len(dups))
		}
		m, ok := r.Next()
		if !ok || !bytes.Equal(m.Data, data) {
			t.Fatalf("message ready %v, %d bytes equal %v", ok, len(m.Data), bytes.Equal(m.Data, data))
		}
	})
}

// TestSpanOverlap: a frame that overlaps an earlier one without matching
// it is a protocol violation.
func TestSpanOverlap(t *testing.T) {
	const seg = 1024
	r, err := New(Config{SegmentSize: seg, MaxMessage: 4 * seg, Window: Cost(4 * seg)})
	if err != nil {
		t.Fatal(err)
	}
	a := wire.Data{Message: 1, Total: 4 * seg, Offset: 0, Len: 2 * seg}
	if _, v, err := r.Begin(a); err != nil || v != Write {
		t.Fatalf("first span: %v, %v", v, err)
	}
	r.Commit(a)
	b := wire.Data{Message: 1, Total: 4 * seg, Offset: seg, Len: 2 * seg}
	if _, _, err := r.Begin(b); !errors.Is(err, ErrInconsistent) {
		t.Fatalf("overlapping span: %v, want ErrInconsistent", err)
	}
	// Slots do not remember span boundaries: part of a span already done
	// is a duplicate like any other, read and discarded.
	c := wire.Data{Message: 1, Total: 4 * seg, Offset: 0, Len: seg}
	if _, v, err := r.Begin(c); err != nil || v != Discard {
		t.Fatalf("part of a done span: %v, %v; want Discard", v, err)
	}
}

// header is the frame header and fixed part of d.
func header(d wire.Data) (wire.Header, []byte) {
	b := make([]byte, wire.DataHeaderSize)
	wire.PutData(b, d)
	return wire.Header{Type: wire.TypeData, Flags: d.Flags, Len: wire.DataFixedSize + d.Len}, b[wire.HeaderSize:]
}
