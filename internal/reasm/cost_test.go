package reasm

import (
	"testing"

	"pgregory.net/rapid"
)

func TestCapacityTable(t *testing.T) {
	for _, c := range []struct{ n, want uint64 }{
		{0, 0}, {1, 1}, {2047, 2047}, {2048, 2048}, {2049, 2304}, {2304, 2304}, {2305, 2560},
		{4095, 4096}, {4096, 4096}, {4097, 4608}, {64 << 10, 64 << 10}, {64<<10 + 1, 72 << 10},
		{1 << 20, 1 << 20}, {65 << 20, 72 << 20}, {1 << 30, 1 << 30}, {1<<30 + 1, 1<<30 + 1<<27},
	} {
		if got := Capacity(c.n); got != c.want {
			t.Errorf("Capacity(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestCapacityProperties: a capacity holds the message, wastes under an
// eighth, is a fixed point (a class), grows with n; Largest is the
// largest size whose Cost fits.
func TestCapacityProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Uint64Range(0, 1<<40).Draw(t, "n")
		c := Capacity(n)
		if c < n || (n >= ExactBelow && c-n >= n/classSteps+1) {
			t.Fatalf("Capacity(%d) = %d", n, c)
		}
		if Capacity(c) != c {
			t.Fatalf("Capacity(%d) = %d is not a class: Capacity of it is %d", n, c, Capacity(c))
		}
		if m := rapid.Uint64Range(n, 1<<40).Draw(t, "m"); Capacity(m) < c {
			t.Fatalf("Capacity(%d) = %d < Capacity(%d) = %d", m, Capacity(m), n, c)
		}
		w := rapid.Uint64Range(0, 1<<40).Draw(t, "window")
		l := Largest(w)
		if w >= Overhead && Cost(l) > w {
			t.Fatalf("Largest(%d) = %d costs %d", w, l, Cost(l))
		}
		if Cost(l+1) <= w {
			t.Fatalf("Largest(%d) = %d, but %d costs %d", w, l, l+1, Cost(l+1))
		}
	})
}
