package multirail

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/multirail/multirail/internal/reasm"
)

// Receive buffers have the capacity the credit window charges for them
// (reasm.Capacity): a message under reasm.ExactBelow (2 KiB) gets a buffer
// of its own size; a larger one a buffer of its size class, eight classes
// per doubling up to 256 MiB, kept for reuse when Release returns it.
// Larger messages are plainly allocated.
const (
	minClassShift = 11 // log2(reasm.ExactBelow)
	maxClassShift = 28
	classSteps    = 8
	numClasses    = (maxClassShift-minClassShift)*classSteps + 1
)

// bufClass is a bounded free list of released buffers of one size.
type bufClass struct {
	mu   sync.Mutex
	free [][]byte
}

var bufClasses [numClasses]bufClass

// maxFree bounds the buffers kept per class of size bytes: up to 64
// buffers or 64 MiB, but always 8, so that a window of large messages in
// flight (8 MiB worth, at least 4 of them, as the benchmarks keep) reuses
// its buffers instead of faulting in fresh memory for every message;
// maxPooled bounds them all.
func maxFree(size int) int { return max(8, min(64, (64<<20)/size)) }

// maxPooled bounds the bytes kept for reuse in all classes together, so
// that a peer sending many large messages cannot make the process keep
// them after the application released them.
const maxPooled = 256 << 20

// pooled is the bytes now kept in all classes.
var pooled atomic.Int64

// classOf returns the class of buffers of capacity k, or -1 when k is not
// a class size of the pool.
func classOf(k int) int {
	if k < reasm.ExactBelow || uint64(k) != reasm.Capacity(uint64(k)) {
		return -1
	}
	p := bits.Len(uint(k)) - 1
	c := (p-minClassShift)*classSteps + k>>(p-3) - classSteps
	if c >= numClasses {
		return -1
	}
	return c
}

// allocRecv returns an n-byte buffer of capacity reasm.Capacity(n),
// reusing a released one if any.
func allocRecv(n int) []byte {
	k := int(reasm.Capacity(uint64(n)))
	c := classOf(k)
	if c < 0 {
		return make([]byte, n, k)
	}
	bc := &bufClasses[c]
	bc.mu.Lock()
	if m := len(bc.free); m > 0 {
		b := bc.free[m-1]
		bc.free[m-1] = nil
		bc.free = bc.free[:m-1]
		bc.mu.Unlock()
		pooled.Add(-int64(cap(b)))
		return b[:n]
	}
	bc.mu.Unlock()
	return make([]byte, n, k)
}

// Release hands the Data of a received message back for reuse by later
// receives, which saves allocating (and zeroing) a buffer per message. The
// caller must not touch data afterwards. Releasing is optional; buffers not
// released are garbage collected as usual.
func (c *Conn) Release(data []byte) {
	k := cap(data)
	cl := classOf(k)
	if cl < 0 {
		return // not one of ours
	}
	if pooled.Add(int64(k)) > maxPooled {
		pooled.Add(-int64(k)) // enough kept already: let the collector have it
		return
	}
	bc := &bufClasses[cl]
	bc.mu.Lock()
	if len(bc.free) < maxFree(k) {
		bc.free = append(bc.free, data[:0])
		bc.mu.Unlock()
		return
	}
	bc.mu.Unlock()
	pooled.Add(-int64(k))
}
