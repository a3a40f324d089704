package sim

// ring is a FIFO of int32 (segment or message numbers) on a growable
// power-of-two circular buffer.
type ring struct {
	buf  []int32
	head int32
	n    int32
}

func (r *ring) push(v int32) {
	if int(r.n) == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&int32(len(r.buf)-1)] = v
	r.n++
}

func (r *ring) grow() {
	nb := make([]int32, max(4, 2*len(r.buf)))
	for i := range r.n {
		nb[i] = r.buf[(r.head+i)&int32(len(r.buf)-1)]
	}
	r.buf, r.head = nb, 0
}

// front returns the oldest element; the ring must not be empty.
func (r *ring) front() int32 { return r.buf[r.head] }

// pop removes and returns the oldest element; the ring must not be empty.
func (r *ring) pop() int32 {
	v := r.buf[r.head]
	r.head = (r.head + 1) & int32(len(r.buf)-1)
	r.n--
	return v
}
