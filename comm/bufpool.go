package comm

import "sync"

// Send buffers (header + payload) up to poolMax bytes are reused.
const poolMax = 64<<10 + headerSize

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, poolMax); return &b }}

func getBuf(n int) *[]byte {
	if n > poolMax {
		b := make([]byte, 0, n)
		return &b
	}
	return bufPool.Get().(*[]byte)
}

func putBuf(b *[]byte) {
	if cap(*b) == poolMax {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}
