package multirail

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Receive buffers come from power-of-two size classes from 4 KiB to
// 256 MiB; Release returns them. Larger messages are plainly allocated.
const (
	minClassShift = 12
	maxClassShift = 28
)

// bufClass is a bounded free list of released buffers of one size.
type bufClass struct {
	mu   sync.Mutex
	free [][]byte
}

// maxFree bounds the buffers kept per class: up to 64 buffers or 64 MiB,
// but always 8, so that a window of large messages in flight (8 MiB worth,
// at least 4 of them, as the benchmarks keep) reuses its buffers instead of
// faulting in fresh memory for every message; maxPooled bounds them all.
func maxFree(class int) int { return max(8, min(64, (64<<20)>>(class+minClassShift))) }

var bufClasses [maxClassShift - minClassShift + 1]bufClass

// maxPooled bounds the bytes kept for reuse in all classes together, so
// that a peer sending many large messages cannot make the process keep
// them after the application released them.
const maxPooled = 256 << 20

// pooled is the bytes now kept in all classes.
var pooled atomic.Int64

func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// exactBelow is the size below which a receive buffer is allocated at its
// own size, outside the pool: a buffer from the smallest class (4 KiB)
// would hold up to 16 times what the message costs against the credit
// window (reasm.Cost), and a peer's small messages could pin that much.
// From exactBelow on, a class buffer is at most twice the message.
const exactBelow = 1 << (minClassShift - 1)

// allocRecv returns an n-byte buffer, reusing a released one if any.
func allocRecv(n int) []byte {
	if n < exactBelow {
		return make([]byte, n)
	}
	c := classOf(n)
	if c >= len(bufClasses) {
		return make([]byte, n)
	}
	bc := &bufClasses[c]
	bc.mu.Lock()
	if k := len(bc.free); k > 0 {
		b := bc.free[k-1]
		bc.free[k-1] = nil
		bc.free = bc.free[:k-1]
		bc.mu.Unlock()
		pooled.Add(-int64(cap(b)))
		return b[:n]
	}
	bc.mu.Unlock()
	return make([]byte, n, 1<<(c+minClassShift))
}

// Release hands the Data of a received message back for reuse by later
// receives, which saves allocating (and zeroing) a buffer per message. The
// caller must not touch data afterwards. Releasing is optional; buffers not
// released are garbage collected as usual.
func (c *Conn) Release(data []byte) {
	k := cap(data)
	if k < 1<<minClassShift || k&(k-1) != 0 {
		return // not one of ours
	}
	cl := bits.Len(uint(k)) - 1 - minClassShift
	if cl >= len(bufClasses) {
		return
	}
	if pooled.Add(int64(k)) > maxPooled {
		pooled.Add(-int64(k)) // enough kept already: let the collector have it
		return
	}
	bc := &bufClasses[cl]
	bc.mu.Lock()
	if len(bc.free) < maxFree(cl) {
		bc.free = append(bc.free, data[:0])
		bc.mu.Unlock()
		return
	}
	bc.mu.Unlock()
	pooled.Add(-int64(k))
}
