// Package fifo is the one first-in first-out queue of the module: a
// growable power-of-two ring buffer, generic over its elements. It is used
// for the transport's per-rail send queues and unacknowledged segments,
// the simulator's queues and the emulated links' packet queues.
//
// A Queue is not safe for concurrent use; its zero value is an empty queue.
package fifo

// Queue is a FIFO of T. The zero value is empty and ready to use.
type Queue[T any] struct {
	buf  []T
	head int
	n    int
}

// Len is the number of elements queued.
func (q *Queue[T]) Len() int { return q.n }

// Push appends v at the back.
func (q *Queue[T]) Push(v T) {
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = v
	q.n++
}

func (q *Queue[T]) grow() {
	nb := make([]T, max(4, 2*len(q.buf)))
	for i := range q.n {
		nb[i] = q.buf[(q.head+i)&(len(q.buf)-1)]
	}
	q.buf, q.head = nb, 0
}

// Front returns the oldest element; the queue must not be empty.
func (q *Queue[T]) Front() T { return q.buf[q.head] }

// FrontPtr returns a pointer to the oldest element, valid until the next
// Push or Pop; the queue must not be empty.
func (q *Queue[T]) FrontPtr() *T { return &q.buf[q.head] }

// At returns the i-th oldest element (0 is the front); 0 <= i < Len().
func (q *Queue[T]) At(i int) T { return q.buf[(q.head+i)&(len(q.buf)-1)] }

// Pop removes and returns the oldest element; the queue must not be empty.
// The slot is zeroed, so that the queue keeps no reference to it.
func (q *Queue[T]) Pop() T {
	var zero T
	v := q.buf[q.head]
	q.buf[q.head] = zero
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	return v
}

// Back returns the newest element; the queue must not be empty.
func (q *Queue[T]) Back() T { return q.buf[(q.head+q.n-1)&(len(q.buf)-1)] }

// PopBack removes and returns the newest element; the queue must not be
// empty. The slot is zeroed.
func (q *Queue[T]) PopBack() T {
	var zero T
	i := (q.head + q.n - 1) & (len(q.buf) - 1)
	v := q.buf[i]
	q.buf[i] = zero
	q.n--
	return v
}

// Drain appends every element, oldest first, to dst, empties the queue and
// returns the extended slice.
func (q *Queue[T]) Drain(dst []T) []T {
	for q.n > 0 {
		dst = append(dst, q.Pop())
	}
	q.head = 0
	return dst
}
