package multirail

import (
	"testing"

	"github.com/multirail/multirail/internal/reasm"
	"pgregory.net/rapid"
)

// TestRecvBufferCapacity: a receive buffer, fresh or reused, has exactly
// the capacity the credit window charges for it (reasm.Capacity), so a
// peer can make a receiver hold no more than the window.
func TestRecvBufferCapacity(t *testing.T) {
	var c Conn
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 1<<rapid.IntRange(0, 26).Draw(t, "log2 bound")).Draw(t, "n")
		b := allocRecv(n)
		if len(b) != n || uint64(cap(b)) != reasm.Capacity(uint64(n)) {
			t.Fatalf("allocRecv(%d): len %d cap %d, want cap %d", n, len(b), cap(b), reasm.Capacity(uint64(n)))
		}
		c.Release(b)
		if again := allocRecv(n); uint64(cap(again)) != reasm.Capacity(uint64(n)) {
			t.Fatalf("allocRecv(%d) after a Release: cap %d, want %d", n, cap(again), reasm.Capacity(uint64(n)))
		}
	})
}

// TestBufferClasses: every class size from 2 KiB to 256 MiB has its own
// free list, in order; other capacities have none.
func TestBufferClasses(t *testing.T) {
	next := 0
	for k := uint64(reasm.ExactBelow); k <= 1<<maxClassShift; k = reasm.Capacity(k + 1) {
		if c := classOf(int(k)); c != next {
			t.Fatalf("classOf(%d) = %d, want %d", k, c, next)
		}
		next++
	}
	if next != numClasses {
		t.Fatalf("%d class sizes, numClasses is %d", next, numClasses)
	}
	for _, k := range []int{0, 100, reasm.ExactBelow - 1, reasm.ExactBelow + 1, 4097, 1<<maxClassShift + 1<<(maxClassShift-2)} {
		if c := classOf(k); c != -1 {
			t.Errorf("classOf(%d) = %d, want -1 (not a pooled size)", k, c)
		}
	}
}
