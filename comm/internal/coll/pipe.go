package coll

import (
	"context"
	"slices"
)

// Pipelined algorithms. An algorithm whose steps exchange ranges of one
// vector (the ring, recursive halving and doubling, their folds) is
// written as a plan: for each step, what this rank sends to whom and what
// it receives from whom, each range cut into pieces. runPipe then lets
// every piece flow on as soon as what it depends on has arrived: a piece
// of step i+1 goes out while the rest of step i is still on the way, so
// no step waits for a whole range to land, and the ranks' links stay busy
// across step boundaries.

// Framing is how a transport carries a message: in segments of Segment
// payload bytes, after Overhead bytes of its own header that travel in
// the same segments. A message of b bytes costs ceil((b+Overhead)/Segment)
// segments; the collectives cut their pieces so that header plus payload
// fill whole segments.
type Framing struct {
	Segment  int
	Overhead int
}

// Framer is a Transport that says how it frames messages. Transports that
// are not Framers get DefaultFraming.
type Framer interface {
	Framing() Framing
}

// DefaultFraming is the framing assumed for a Transport that is not a
// Framer: multirail's default frame size, no header.
var DefaultFraming = Framing{Segment: 64 << 10, Overhead: 0}

// MaxPiece bounds a piece's payload and header, in bytes (a whole number
// of segments of at least one): large enough that a piece's per-message
// cost is small against its time on the rails (a few milliseconds at
// hundreds of Mbit/s), small enough that a step's pieces overlap.
const MaxPiece = 256 << 10

// PipeDepth is the number of pieces a block is cut into at least, when
// blocks are large enough for pieces of one segment. 1: a block is cut
// only where it is longer than MaxPiece. Measured on the lab's tbf rails
// (docs/comm.md, "Thresholds measured here"): pieces of one multirail
// frame were slower, being below the size its planner splits over the
// rails, and costing a message's work per frame.
const PipeDepth = 1

// framingOf returns t's framing, sanitised: a segment of at least one
// byte, an overhead in [0, Segment).
func framingOf(t Transport) Framing {
	f := DefaultFraming
	if fr, ok := t.(Framer); ok {
		f = fr.Framing()
	}
	f.Segment = max(f.Segment, 1)
	f.Overhead = min(max(f.Overhead, 0), f.Segment-1)
	return f
}

// PieceElems is the number of elements of size elem in a full piece when
// the largest block of the vector is blockBytes long: k whole segments of
// f less the header, in elements (rounded down), with k the segments that
// cut a block into PipeDepth pieces, at least 1 and at most what fits in
// MaxPiece (1 if a segment alone is larger). A full piece's header and
// payload so fill k segments, less than one element short. At least 1.
func PieceElems(f Framing, blockBytes, elem int) int {
	seg := max(f.Segment, 1)
	k := min(blockBytes/(PipeDepth*seg), MaxPiece/seg)
	k = max(k, 1)
	return max(1, (k*seg-f.Overhead)/max(elem, 1))
}

// pipeOp is one message of a plan: a send of acc[lo:hi] to peer, or a
// receive of it from peer, reduced into acc or copied.
type pipeOp struct {
	peer, step int
	lo, hi     int
	reduce     bool // receives: reduce into acc[lo:hi] (else copy into it)
	after      int  // sends: index in plan.recvs of the receive it waits for, -1 none
}

// plan is one rank's schedule of a pipelined algorithm over a vector of
// elements, each range it sends or receives cut into pieces (cut). A
// piece sent waits for the pieces received earlier that wrote any of its
// elements.
//
// Every message between a pair of ranks gets the next step number of
// that direction (sends to a peer and receives from it are numbered
// separately, from base on): both ranks add the steps of an algorithm in
// the same order, so the sender's numbering is the receiver's.
type plan struct {
	grid    int
	minTail int // elements: a shorter remainder rides in the last full piece
	base    int
	sends   []pipeOp
	recvs   []pipeOp
	sent    map[int]int // next step number to each peer
	recvd   map[int]int // next step number from each peer
}

func newPlan(pc pieces, base int) *plan {
	return &plan{grid: max(pc.elems, 1), minTail: pc.minTail, base: base, sent: map[int]int{}, recvd: map[int]int{}}
}

// cut calls f for each piece of [lo, hi): full pieces of p.grid elements
// from lo on, then the remainder: a piece of its own if it is at least a
// segment long, else part of the last full piece (a remainder shorter than
// a segment costs a segment either way; riding in the last piece it costs
// no message of its own). A range of at most one piece is one piece, and
// an empty range one empty piece (its message tells the receiver that the
// step happened, as the unpipelined algorithms do). Sender and receiver
// cut the same range alike.
func (p *plan) cut(lo, hi int, f func(lo, hi int)) {
	full := (hi - lo) / p.grid
	if rem := (hi - lo) - full*p.grid; full >= 1 && rem > 0 && rem < p.minTail {
		for range full - 1 {
			f(lo, lo+p.grid)
			lo += p.grid
		}
		f(lo, hi)
		return
	}
	for hi-lo > p.grid {
		f(lo, lo+p.grid)
		lo += p.grid
	}
	f(lo, hi)
}

// lastWriter returns the index of the latest receive of the plan so far
// that writes into [lo, hi), -1 if none.
func (p *plan) lastWriter(lo, hi int) int {
	for i := len(p.recvs) - 1; i >= 0; i-- {
		r := p.recvs[i]
		if r.lo < hi && lo < r.hi {
			return i
		}
	}
	return -1
}

// step adds one step: send acc[slo:shi] to dst (dst < 0: nothing), and
// receive acc[rlo:rhi] from src (src < 0: nothing), reducing it into acc
// or copying it. The send's pieces wait for the receives of earlier steps
// that wrote their elements. The ranges must not overlap.
func (p *plan) step(dst, slo, shi, src, rlo, rhi int, reduce bool) {
	if dst >= 0 {
		p.cut(slo, shi, func(lo, hi int) {
			p.sends = append(p.sends, pipeOp{peer: dst, step: p.base + p.sent[dst], lo: lo, hi: hi, after: p.lastWriter(lo, hi)})
			p.sent[dst]++
		})
	}
	if src >= 0 {
		p.cut(rlo, rhi, func(lo, hi int) {
			p.recvs = append(p.recvs, pipeOp{peer: src, step: p.base + p.recvd[src], lo: lo, hi: hi, reduce: reduce})
			p.recvd[src]++
		})
	}
}

// runPipe runs plan p on acc. Receives are handled one at a time in plan
// order (so every element is reduced in the order the steps say, whatever
// the timing); a send goes out as soon as the receive it waits for has
// been handled, each in a goroutine of its own (or from this one when the
// transport takes it at once, TrySender), without waiting for earlier
// sends to complete.
//
// The plans' shapes guarantee that no receive overwrites elements that a
// send still reads: whenever a receive writes elements this rank sent
// before, what it receives was computed from them by the peer, who
// therefore holds that send already.
func runPipe[T Number](x *xfer[T], p *plan, acc []T) error {
	if len(p.sends) == 0 && len(p.recvs) == 0 {
		return nil
	}
	sends := slices.Clone(p.sends)
	slices.SortStableFunc(sends, func(a, b pipeOp) int { return a.after - b.after })
	ts, try := x.t.(TrySender)
	grp := newGroup(x.ctx)
	next := 0
	release := func(upTo int) error {
		for ; next < len(sends) && sends[next].after <= upTo; next++ {
			s := sends[next]
			b := asBytes(acc[s.lo:s.hi])
			if try {
				ok, err := ts.TrySend(grp.ctx, s.peer, s.step, b)
				if err != nil {
					return sendErr(s.peer, s.step, err)
				}
				if ok {
					continue
				}
			}
			grp.spawn(func(ctx context.Context) error {
				if err := x.t.Send(ctx, s.peer, s.step, b); err != nil {
					return sendErr(s.peer, s.step, err)
				}
				return nil
			})
		}
		return nil
	}
	grp.do(func(ctx context.Context) error {
		if err := release(-1); err != nil {
			return err
		}
		for i, r := range p.recvs {
			b, err := x.t.Recv(ctx, r.peer, r.step)
			if err != nil {
				return recvErr(r.peer, r.step, err)
			}
			v := acc[r.lo:r.hi]
			if err := x.checkLen(r.peer, r.step, b, len(v)); err != nil {
				return err
			}
			if r.reduce {
				x.reduceBytes(v, b)
			} else {
				decode(v, b)
			}
			if err := release(i); err != nil {
				return err
			}
		}
		return nil
	})
	return grp.wait()
}

// pieces is how a plan cuts ranges: full pieces of elems elements, and
// remainders shorter than minTail elements ride in the last full piece.
type pieces struct{ elems, minTail int }

// piecesFor returns how to cut the ranges of a vector cut into blocks at
// bounds, for t's framing and elements of type T: full pieces of
// PieceElems, remainders shorter than a segment merged.
func piecesFor[T Number](t Transport, bounds []int) pieces {
	maxElems := 0
	for b := 0; b+1 < len(bounds); b++ {
		maxElems = max(maxElems, bounds[b+1]-bounds[b])
	}
	e := elemSize[T]()
	f := framingOf(t)
	pc := pieces{elems: PieceElems(f, maxElems*e, e), minTail: (f.Segment + e - 1) / e}
	return pc
}
