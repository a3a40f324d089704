package coll

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

// halving adds the recursive-halving reduce-scatter among the p
// participants of f to plan pl: the vector holds this participant's (nr's)
// contribution; afterwards elements [bounds[nr], bounds[nr+1]) hold the
// reduction of all participants' blocks nr (the rest is clobbered).
// bounds has p+1 offsets. Partners are at distance p/2 first, then p/4,
// ..., so that participant nr ends with block nr; each block's final value
// is computed by its owner alone.
func (pl *plan) halving(f fold, nr int, bounds []int) {
	lo, hi := 0, f.p
	for mask := f.p / 2; mask > 0; mask /= 2 {
		partner := f.oldRank(nr ^ mask)
		mid := lo + mask
		keepLo, keepHi, sendLo, sendHi := lo, mid, mid, hi
		if nr&mask != 0 {
			keepLo, keepHi, sendLo, sendHi = mid, hi, lo, mid
		}
		pl.step(partner, bounds[sendLo], bounds[sendHi], partner, bounds[keepLo], bounds[keepHi], true)
		lo, hi = keepLo, keepHi
	}
}

// doubling adds the recursive-doubling allgather among the p participants
// of f to plan pl: elements [bounds[nr], bounds[nr+1]) hold participant
// nr's block; afterwards [bounds[0], bounds[p]) hold every participant's.
func (pl *plan) doubling(f fold, nr int, bounds []int) {
	for mask := 1; mask < f.p; mask <<= 1 {
		pnr := nr ^ mask
		partner := f.oldRank(pnr)
		my := nr &^ (mask - 1)
		their := pnr &^ (mask - 1)
		pl.step(partner, bounds[my], bounds[my+mask], partner, bounds[their], bounds[their+mask], false)
	}
}

// foldIn adds the folding step of f for rank r to plan pl, over elements
// [0, n): an odd rank below 2*rem sends them to the rank below it, which
// reduces them into its own.
func (pl *plan) foldIn(f fold, r, n int) {
	if r >= 2*f.rem {
		return
	}
	if r%2 == 1 {
		pl.step(r-1, 0, n, -1, 0, 0, false)
		return
	}
	pl.step(-1, 0, 0, r+1, 0, n, true)
}

// foldOut adds the unfolding step of f for rank r to plan pl, over
// elements [0, n): an even rank below 2*rem sends them to the rank above
// it, which receives them.
func (pl *plan) foldOut(f fold, r, n int) {
	if r >= 2*f.rem {
		return
	}
	if r%2 == 0 {
		pl.step(r+1, 0, n, -1, 0, 0, false)
		return
	}
	pl.step(-1, 0, 0, r-1, 0, n, false)
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
// vr. Pipelined (see ring); steps from base on.
func ringReduceScatter[T Number](x *xfer[T], vr, n int, abs func(int) int, acc []T, bounds []int, base int) error {
	pl := newPlan(piecesFor[T](x.t, bounds), base)
	pl.ring(vr, n, abs, bounds, 0, n-1)
	return runPipe(x, pl, acc)
}

// ringAllgather circulates the blocks around the ring of virtual ranks
// 0..n-1: acc[bounds[vr]:bounds[vr+1]] holds this rank's block; afterwards
// acc holds every rank's. Pipelined (see ring); steps from base on.
func ringAllgather[T Number](x *xfer[T], vr, n int, abs func(int) int, acc []T, bounds []int, base int) error {
	pl := newPlan(piecesFor[T](x.t, bounds), base)
	pl.ring(vr, n, abs, bounds, n-1, 2*(n-1))
	return runPipe(x, pl, acc)
}

// ring adds stages from..to-1 of the ring allreduce over the virtual
// ranks 0..n-1 (this rank is vr; virtual v is real rank abs(v)) to plan
// pl, the vector cut into blocks at bounds: stages 0..n-2 are the
// reduce-scatter (in stage g a rank sends block vr-g-1 to the next rank
// and reduces block vr-g-2 from the previous one into its own), stages
// n-1..2n-3 the allgather (stage n-1+t: send block vr-t, receive block
// vr-t-1). What a rank receives in stage g is what it sends in stage
// g+1: cut into pieces (runPipe), a piece goes on to the next rank as
// soon as it has arrived and been reduced, while the rest of its stage is
// still on the way. A piece is written again only n-1 stages after it was
// sent, with what the next ranks computed from it.
func (pl *plan) ring(vr, n int, abs func(int) int, bounds []int, from, to int) {
	if n < 2 || from >= to {
		return
	}
	next, prev := abs(mod(vr+1, n)), abs(mod(vr-1, n))
	sendBlock := func(g int) int {
		if g < n-1 {
			return mod(vr-g-1, n)
		}
		return mod(vr-(g-(n-1)), n)
	}
	for g := from; g < to; g++ {
		sb, rb := sendBlock(g), sendBlock(g+1)
		pl.step(next, bounds[sb], bounds[sb+1], prev, bounds[rb], bounds[rb+1], g < n-1)
	}
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
