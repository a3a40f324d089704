package coll

import "context"

// Building blocks shared by several algorithms. Each takes the step
// numbers it may use as a base and documents how many it uses.

// Step numbers of the folding phases; algorithms that fold start their
// own steps at stepCore.
const (
	stepFold   = 0
	stepUnfold = 1
	stepCore   = 2
)

// mod returns a mod n in [0, n).
func mod(a, n int) int {
	a %= n
	if a < 0 {
		a += n
	}
	return a
}

// evenBounds returns the n+1 offsets splitting count elements into n
// blocks, block i being [i*count/n, (i+1)*count/n).
func evenBounds(count, n int) []int {
	b := make([]int, n+1)
	for i := range b {
		b[i] = i * count / n
	}
	return b
}

// fold maps the size ranks of a call onto the largest power of two p <=
// size, as MPICH does: of the first 2*rem ranks (rem = size-p) the odd ones
// hand their data to the even one below them and sit out the core of the
// algorithm; the even ones and the ranks from 2*rem up take part, renumbered
// 0..p-1 in rank order.
type fold struct{ p, rem int }

func newFold(size int) fold {
	p := 1
	for p*2 <= size {
		p *= 2
	}
	return fold{p: p, rem: size - p}
}

// newRank is r's rank among the p participants, -1 if r sits out.
func (f fold) newRank(r int) int {
	if r < 2*f.rem {
		if r%2 == 0 {
			return r / 2
		}
		return -1
	}
	return r - f.rem
}

// oldRank is the rank of participant nr.
func (f fold) oldRank(nr int) int {
	if nr < f.rem {
		return 2 * nr
	}
	return nr + f.rem
}

// superBounds returns the p+1 offsets of the participants' blocks when the
// size ranks own blocks bounds (size+1 offsets): participant nr < rem owns
// the blocks of ranks 2nr and 2nr+1, the others their own rank's block.
func (f fold) superBounds(bounds []int) []int {
	sb := make([]int, f.p+1)
	for nr := range f.p {
		sb[nr] = bounds[f.oldRank(nr)]
	}
	sb[f.p] = bounds[len(bounds)-1]
	return sb
}

// halving is the recursive-halving reduce-scatter among the p participants
// of f: acc holds this participant's (nr's) vector; afterwards
// acc[bounds[nr]:bounds[nr+1]] holds the reduction of all participants'
// blocks nr (the rest of acc is clobbered). bounds has p+1 offsets. Steps
// base..base+log2(p)-1. Partners are at distance p/2 first, then p/4, ...,
// so that participant nr ends with block nr; each block's final value is
// computed by its owner alone.
func halving[T Number](x *xfer[T], f fold, nr int, acc []T, bounds []int, base int) error {
	lo, hi := 0, f.p
	for i, mask := 0, f.p/2; mask > 0; i, mask = i+1, mask/2 {
		partner := f.oldRank(nr ^ mask)
		mid := lo + mask
		keepLo, keepHi, sendLo, sendHi := lo, mid, mid, hi
		if nr&mask != 0 {
			keepLo, keepHi, sendLo, sendHi = mid, hi, lo, mid
		}
		if err := x.sendRecvReduce(partner, base+i, acc[bounds[sendLo]:bounds[sendHi]],
			partner, base+i, acc[bounds[keepLo]:bounds[keepHi]]); err != nil {
			return err
		}
		lo, hi = keepLo, keepHi
	}
	return nil
}

// doubling is the recursive-doubling allgather among the p participants of
// f: acc[bounds[nr]:bounds[nr+1]] holds participant nr's block; afterwards
// acc[bounds[0]:bounds[p]] holds every participant's. Steps
// base..base+log2(p)-1.
func doubling[T Number](x *xfer[T], f fold, nr int, acc []T, bounds []int, base int) error {
	for i, mask := 0, 1; mask < f.p; i, mask = i+1, mask<<1 {
		pnr := nr ^ mask
		partner := f.oldRank(pnr)
		my := nr &^ (mask - 1)
		their := pnr &^ (mask - 1)
		if err := x.sendRecv(partner, base+i, acc[bounds[my]:bounds[my+mask]],
			partner, base+i, acc[bounds[their]:bounds[their+mask]]); err != nil {
			return err
		}
	}
	return nil
}

// foldIn performs the folding step of f for rank r: an odd rank below
// 2*rem sends acc to the rank below it, which reduces it into its own acc.
func foldIn[T Number](x *xfer[T], f fold, r int, acc []T) error {
	if r >= 2*f.rem {
		return nil
	}
	if r%2 == 1 {
		return x.send(r-1, stepFold, acc)
	}
	return x.recvReduce(r+1, stepFold, acc)
}

// foldOut performs the unfolding step of f for rank r: an even rank below
// 2*rem sends v to the rank above it, which receives it into v.
func foldOut[T Number](x *xfer[T], f fold, r int, v []T) error {
	if r >= 2*f.rem {
		return nil
	}
	if r%2 == 0 {
		return x.send(r+1, stepUnfold, v)
	}
	return x.recv(r-1, stepUnfold, v)
}

// ringReduceScatter reduces acc around the ring of virtual ranks 0..n-1
// (this rank is vr, virtual rank v is real rank abs(v)): afterwards
// acc[bounds[vr]:bounds[vr+1]] holds the reduction of every rank's block
// vr. Pipelined (see ringPipe); steps from base on.
func ringReduceScatter[T Number](x *xfer[T], vr, n int, abs func(int) int, acc []T, bounds []int, base int) error {
	return ringPipe(x, vr, n, abs, acc, bounds, base, 0, n-1)
}

// ringAllgather circulates the blocks around the ring of virtual ranks
// 0..n-1: acc[bounds[vr]:bounds[vr+1]] holds this rank's block; afterwards
// acc holds every rank's. Pipelined (see ringPipe); steps from base on.
func ringAllgather[T Number](x *xfer[T], vr, n int, abs func(int) int, acc []T, bounds []int, base int) error {
	return ringPipe(x, vr, n, abs, acc, bounds, base, n-1, 2*(n-1))
}

// RingPiece is the size in bytes of the pieces ringPipe cuts each block
// into (fewer when the block is smaller): large enough that a piece's
// per-message cost is small against its time on the rails (a few
// milliseconds at hundreds of Mbit/s), small enough that a block's pieces
// overlap their stages.
const RingPiece = 256 << 10

// ringPieces is how many pieces ringPipe cuts blocks of at most maxElems
// elements of size elem into: ceil(maxElems*elem / RingPiece), at least 1.
func ringPieces(maxElems, elem int) int {
	return max(1, (maxElems*elem+RingPiece-1)/RingPiece)
}

// ringPipe runs stages from..to-1 of the ring allreduce over the virtual
// ranks 0..n-1 (this rank is vr; virtual v is real rank abs(v)) on acc,
// cut into blocks at bounds: stages 0..n-2 are the reduce-scatter (in
// stage g a rank sends block vr-g-1 to the next rank and reduces block
// vr-g-2 from the previous one into acc), stages n-1..2n-3 the allgather
// (stage n-1+t: send block vr-t, receive block vr-t-1 into acc). What a
// rank receives in stage g is what it sends in stage g+1.
//
// Pipelined: every block is cut into the same number m of pieces
// (ringPieces), and a piece goes on to the next rank as soon as it has
// arrived and been reduced, while the rest of its stage is still on the
// way and without waiting for earlier sends to be acknowledged (each send
// runs in a goroutine of its own). Piece c of stage g is step
// base + (g-from)*m + c. A piece in acc is written again only n-1 stages
// after it was sent, which needs the next rank to have received it first:
// no send can read a piece while it is being overwritten.
func ringPipe[T Number](x *xfer[T], vr, n int, abs func(int) int, acc []T, bounds []int, base, from, to int) error {
	if n < 2 || from >= to {
		return nil
	}
	next, prev := abs(mod(vr+1, n)), abs(mod(vr-1, n))
	maxElems := 0
	for b := 0; b < n; b++ {
		maxElems = max(maxElems, bounds[b+1]-bounds[b])
	}
	m := ringPieces(maxElems, elemSize[T]())
	piece := func(b, c int) []T {
		lo, size := bounds[b], bounds[b+1]-bounds[b]
		return acc[lo+c*size/m : lo+(c+1)*size/m]
	}
	sendBlock := func(g int) int {
		if g < n-1 {
			return mod(vr-g-1, n)
		}
		return mod(vr-(g-(n-1)), n)
	}
	recvBlock := func(g int) int { return sendBlock(g + 1) }
	step := func(g, c int) int { return base + (g-from)*m + c }
	grp := newGroup(x.ctx)
	send := func(g, c int) {
		b, st := asBytes(piece(sendBlock(g), c)), step(g, c)
		grp.spawn(func(ctx context.Context) error {
			if err := x.t.Send(ctx, next, st, b); err != nil {
				return sendErr(next, st, err)
			}
			return nil
		})
	}
	for c := 0; c < m; c++ {
		send(from, c)
	}
	grp.do(func(ctx context.Context) error {
		for g := from; g < to; g++ {
			for c := 0; c < m; c++ {
				st := step(g, c)
				b, err := x.t.Recv(ctx, prev, st)
				if err != nil {
					return recvErr(prev, st, err)
				}
				v := piece(recvBlock(g), c)
				if err := x.checkLen(prev, st, b, len(v)); err != nil {
					return err
				}
				if g < n-1 {
					x.reduceBytes(v, b)
				} else {
					decode(v, b)
				}
				if g+1 < to {
					send(g+1, c)
				}
			}
		}
		return nil
	})
	return grp.wait()
}

// subtree returns the span of virtual rank v's binomial subtree: the
// lowest set bit of v > 0, or the smallest power of two >= n for the root.
func subtree(v, n int) int {
	if v == 0 {
		m := 1
		for m < n {
			m <<= 1
		}
		return m
	}
	return v & -v
}

// binomialScatter scatters down the binomial tree of virtual ranks 0..n-1
// rooted at 0 (this rank is vr, virtual v is real abs(v)). Virtual rank v's
// block is elements [bounds[v], bounds[v+1]); the subtree of v, v..v+m-1
// with m = subtree(v, n), owns a contiguous range of them. win holds this
// rank's subtree range, starting at element bounds[vr]: the root fills it
// beforehand, the others receive it. One step, step.
func binomialScatter[T Number](x *xfer[T], vr, n int, abs func(int) int, win []T, bounds []int, step int) error {
	origin := bounds[vr]
	m := subtree(vr, n)
	if vr != 0 {
		hi := min(vr+m, n)
		if err := x.recv(abs(vr-m), step, win[:bounds[hi]-origin]); err != nil {
			return err
		}
	}
	for mask := m >> 1; mask > 0; mask >>= 1 {
		c := vr + mask
		if c >= n {
			continue
		}
		hi := min(c+mask, n)
		if err := x.send(abs(c), step, win[bounds[c]-origin:bounds[hi]-origin]); err != nil {
			return err
		}
	}
	return nil
}

// binomialGather is binomialScatter reversed: win holds this rank's block
// at its start and receives the rest of its subtree's range; the root ends
// with all of it. One step, step.
func binomialGather[T Number](x *xfer[T], vr, n int, abs func(int) int, win []T, bounds []int, step int) error {
	origin := bounds[vr]
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			hi := min(vr+mask, n)
			return x.send(abs(vr-mask), step, win[:bounds[hi]-origin])
		}
		c := vr + mask
		if c >= n {
			continue
		}
		hi := min(c+mask, n)
		if err := x.recv(abs(c), step, win[bounds[c]-origin:bounds[hi]-origin]); err != nil {
			return err
		}
	}
	return nil
}
