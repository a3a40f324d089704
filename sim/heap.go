package sim

import "math/bits"

// Event kinds.
const (
	evTxDone uint32 = iota // a rail finished transmitting its head segment; a = rail
	evArrive               // a segment arrived at the receiver; a = segment
	evSubmit               // a Poisson source submits a message; a = link
	evTick                 // the dispatch timer of a link fires; a = link
	evAck                  // the sender learns a segment arrived; a = segment
)

const (
	kindShift = 29
	argMask   = 1<<kindShift - 1
)

// event is one scheduled happening in 16 bytes: its time and its kind and
// argument packed in ka.
type event struct {
	t  int64
	ka uint32 // kind<<kindShift | argument
}

func (e *event) kind() uint32 { return e.ka >> kindShift }
func (e *event) arg() int32   { return int32(e.ka & argMask) }

// runMax is the size up to which the earliest bucket of an eventHeap is
// sorted into its run rather than split further.
const runMax = 32

// eventHeap is the simulator's event queue, a monotone priority queue: it
// yields events by time and, among equal times, in the order they were
// pushed, which makes runs deterministic. Monotone means that no event may
// be pushed before the time of the event last popped (or of the last
// call to first); the simulator never schedules into its past. Times must
// not be negative. The zero value is an empty queue.
//
// It is a radix heap whose lowest level is a small sorted run. Bucket i
// holds the events whose time first differs from last in bit i-1
// (bucket 0: equal to last), so every bucket is later than the buckets
// below it. When runBits > 0, the run holds, sorted, all pending events
// of the aligned block of 2^(runBits-1) ns that contains last (the times
// t with bits.Len64(t^last) < runBits), which come before all buckets;
// a push into that block is inserted into the run, unless the run already
// holds runMax events: then they go back to the (empty) buckets below
// runBits. When the run is used up, the lowest nonempty bucket is sorted
// into the run if it holds at most runMax events (or is bucket 0), and
// otherwise split around its earliest time, which becomes last, into the
// buckets below it. So an event moves at most 63 times, a few in practice,
// and the run never holds many more than runMax events to insert among.
//
// Ties keep their push order: events of equal time always share a bucket
// (the bucket depends only on the time and on last, and a new last keeps
// the buckets of the events above it), a push appends, a split or the
// return of the run only fills empty buckets, in order, and the sort and
// the insertion into the run are stable. A run sorted from bucket 0
// (runBits 0) comes before the later pushes of its time, which go to
// bucket 0. The buckets and the run are slices that keep their capacity
// (the run's slice and a bucket's are swapped, and the run reuses the
// room of its popped events), so nothing is allocated once they have
// grown.
type eventHeap struct {
	last    int64       // no pending event is before last
	run     []event     // sorted from head on
	head    int         // the next event of run
	runBits int         // run holds the events t with bits.Len64(t^last) < runBits
	n       int         // pending events
	mask    uint64      // bit i is set when b[i] is not empty
	b       [64][]event // unordered buckets by bits.Len64(t^last)
}

func (h *eventHeap) len() int { return h.n }

// push schedules an event of kind with argument arg at time t, which must
// not be before the time of the event last popped or peeked at.
func (h *eventHeap) push(t int64, kind uint32, arg int32) {
	if t < h.last {
		panic("sim: event scheduled in the past")
	}
	h.n++
	e := event{t: t, ka: kind<<kindShift | uint32(arg)}
	i := bits.Len64(uint64(t ^ h.last))
	if i < h.runBits {
		if len(h.run)-h.head < runMax {
			h.insert(e)
			return
		}
		h.unrun() // t's bucket stays i: last is kept
	}
	h.mask |= 1 << i
	h.b[i] = append(h.b[i], e)
}

// insert adds e to the run, after the events of times up to e.t.
func (h *eventHeap) insert(e event) {
	r := h.run
	if len(r) == cap(r) && h.head > 0 {
		// Reuse the room of the events popped.
		r = r[:copy(r, r[h.head:])]
		h.head = 0
	}
	r = append(r, e)
	p := len(r) - 1
	for p > h.head && r[p-1].t > e.t {
		r[p] = r[p-1]
		p--
	}
	r[p] = e
	h.run = r
}

// unrun moves the pending events of the full run back, in their order,
// into the buckets below runBits, which are empty, and leaves last as it
// is.
func (h *eventHeap) unrun() {
	for _, e := range h.run[h.head:] {
		j := bits.Len64(uint64(e.t ^ h.last))
		h.mask |= 1 << j
		h.b[j] = append(h.b[j], e)
	}
	h.run = h.run[:0]
	h.head = 0
	h.runBits = 0
}

// fill makes the run hold the earliest pending event, if there is one.
func (h *eventHeap) fill() {
	if h.head < len(h.run) {
		return
	}
	for h.mask != 0 {
		i := bits.TrailingZeros64(h.mask)
		src := h.b[i]
		if len(src) <= runMax || i == 0 {
			// A stable insertion sort; the run's old slice becomes
			// the empty bucket.
			for a := 1; a < len(src); a++ {
				e := src[a]
				p := a
				for p > 0 && src[p-1].t > e.t {
					src[p] = src[p-1]
					p--
				}
				src[p] = e
			}
			h.b[i] = h.run[:0]
			h.mask &^= 1 << i
			h.run = src
			h.head = 0
			h.last = src[0].t
			h.runBits = i
			return
		}
		// Split bucket i around its earliest time: every event lands
		// in a bucket below i.
		h.b[i] = src[:0]
		h.mask &^= 1 << i
		last := src[0].t
		for _, e := range src[1:] {
			last = min(last, e.t)
		}
		h.last = last
		for _, e := range src {
			j := bits.Len64(uint64(e.t ^ last))
			h.mask |= 1 << j
			h.b[j] = append(h.b[j], e)
		}
	}
}

// first returns the time of the earliest event; the queue must not be
// empty. No event may be pushed before that time afterwards.
func (h *eventHeap) first() int64 {
	h.fill()
	return h.run[h.head].t
}

// pop removes and returns the earliest event, the first pushed among
// those of its time; the queue must not be empty.
func (h *eventHeap) pop() event {
	h.fill()
	e := h.run[h.head]
	h.head++
	h.n--
	return e
}
