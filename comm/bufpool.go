package comm

import (
	"math/bits"
	"sync"
)

// Send buffers (header + payload) are reused: a message is copied behind
// its header into a buffer of the next power-of-two size class, from 64 KiB
// up to maxPooled; larger ones are allocated each time. Reuse spares the
// allocator and the kernel a fresh, zeroed buffer per large message (a
// 4 MiB window of 64 Isends would otherwise churn 256 MiB).
const (
	minPooledShift = 16 // 64 KiB
	maxPooledShift = 26 // 64 MiB
)

var bufPools [maxPooledShift - minPooledShift + 1]sync.Pool

func poolClass(n int) (int, bool) {
	shift := max(minPooledShift, bits.Len(uint(n-1)))
	if n <= 0 {
		shift = minPooledShift
	}
	if shift > maxPooledShift {
		return 0, false
	}
	return shift - minPooledShift, true
}

// getBuf returns an empty buffer with room for n bytes.
func getBuf(n int) *[]byte {
	k, ok := poolClass(n)
	if !ok {
		b := make([]byte, 0, n)
		return &b
	}
	if b, _ := bufPools[k].Get().(*[]byte); b != nil {
		*b = (*b)[:0]
		return b
	}
	b := make([]byte, 0, 1<<(k+minPooledShift))
	return &b
}

// putBuf hands a buffer from getBuf back once nothing refers to it.
func putBuf(b *[]byte) {
	k, ok := poolClass(cap(*b))
	if !ok || cap(*b) != 1<<(k+minPooledShift) {
		return
	}
	*b = (*b)[:0]
	bufPools[k].Put(b)
}
