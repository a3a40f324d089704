package comm

import "testing"

func TestBufPoolClasses(t *testing.T) {
	for _, n := range []int{0, 1, 40, 64 << 10, 64<<10 + 1, 4<<20 + headerSize, 64 << 20, 64<<20 + 1} {
		b := getBuf(n)
		if cap(*b) < n || len(*b) != 0 {
			t.Fatalf("getBuf(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		putBuf(b)
	}
}
