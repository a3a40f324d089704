package sim

import "slices"

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

// event is one scheduled happening in 16 bytes: its time, its sequence
// number and its kind and argument packed in ka. Events of equal time run
// in the order they were scheduled, which makes runs deterministic.
type event struct {
	t   int64
	seq uint32
	ka  uint32 // kind<<kindShift | argument
}

func (e *event) kind() uint32 { return e.ka >> kindShift }
func (e *event) arg() int32   { return int32(e.ka & argMask) }

func (e *event) before(o *event) bool {
	return e.t < o.t || (e.t == o.t && e.seq < o.seq)
}

// eventHeap is a 4-ary min-heap of events by (t, seq), typed so that no
// interface calls or allocations happen once its slice has grown.
type eventHeap struct {
	ev  []event
	seq uint32
}

func (h *eventHeap) len() int { return len(h.ev) }

func (h *eventHeap) push(t int64, kind uint32, arg int32) {
	if h.seq == 1<<32-1 {
		h.renumber()
	}
	h.seq++
	e := event{t: t, seq: h.seq, ka: kind<<kindShift | uint32(arg)}
	h.ev = append(h.ev, e)
	ev := h.ev
	i := len(ev) - 1
	for i > 0 {
		p := (i - 1) >> 2
		if !e.before(&ev[p]) {
			break
		}
		ev[i] = ev[p]
		i = p
	}
	ev[i] = e
}

// renumber gives the pending events the sequence numbers 1..n in their
// order, so that numbering can go on without wrapping around. A sorted
// slice is a valid heap.
func (h *eventHeap) renumber() {
	slices.SortFunc(h.ev, func(a, b event) int {
		if a.before(&b) {
			return -1
		}
		if b.before(&a) {
			return 1
		}
		return 0
	})
	for i := range h.ev {
		h.ev[i].seq = uint32(i + 1)
	}
	h.seq = uint32(len(h.ev))
}

// pop removes and returns the earliest event; the heap must not be empty.
// It moves the hole at the root down to a leaf along the smallest
// children, then sifts the last event up from there (fewer comparisons
// than a plain sift-down, since the last event mostly belongs low).
func (h *eventHeap) pop() event {
	ev := h.ev
	top := ev[0]
	n := len(ev) - 1
	last := ev[n]
	ev = ev[:n]
	h.ev = ev
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := i<<2 + 1
		if c >= n {
			break
		}
		m := c
		if end := c + 4; end <= n {
			if ev[c+1].before(&ev[m]) {
				m = c + 1
			}
			if ev[c+2].before(&ev[m]) {
				m = c + 2
			}
			if ev[c+3].before(&ev[m]) {
				m = c + 3
			}
		} else {
			for j := c + 1; j < n; j++ {
				if ev[j].before(&ev[m]) {
					m = j
				}
			}
		}
		ev[i] = ev[m]
		i = m
	}
	for i > 0 {
		p := (i - 1) >> 2
		if !last.before(&ev[p]) {
			break
		}
		ev[i] = ev[p]
		i = p
	}
	ev[i] = last
	return top
}
