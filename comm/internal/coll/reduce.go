package coll

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
)

func checkOp(c Collective, op Op) error {
	if !op.valid() {
		return fmt.Errorf("coll: %s: invalid op %d", c, int(op))
	}
	return nil
}

func log2(p int) int { return bits.Len(uint(p)) - 1 }

// Reduce reduces every rank's send with op into root's recv. send is left
// unchanged; recv is only used at root, where len(recv) == len(send).
func Reduce[T Number](ctx context.Context, t Transport, send, recv []T, op Op, root int, algo Algo) error {
	r, n := t.Rank(), t.Size()
	if err := checkRoot(CollReduce, root, n); err != nil {
		return err
	}
	if err := checkOp(CollReduce, op); err != nil {
		return err
	}
	if r == root {
		if err := checkLen(CollReduce, "recv", len(recv), len(send)); err != nil {
			return err
		}
	}
	a, err := resolve(ctx, CollReduce, algo, n, len(send)*elemSize[T]())
	if err != nil {
		return err
	}
	x := newXfer[T](ctx, t, op)
	switch a {
	case Binomial:
		err = reduceBinomial(x, send, recv, root)
	case Rabenseifner:
		err = reduceRabenseifner(x, send, recv, root)
	}
	return wrap(CollReduce, a, err)
}

// reduceBinomial reduces up a binomial tree: each rank reduces its
// children's partial results into its own, then sends it to its parent.
func reduceBinomial[T Number](x *xfer[T], send, recv []T, root int) error {
	r, n := x.t.Rank(), x.t.Size()
	vr := mod(r-root, n)
	abs := func(v int) int { return (v + root) % n }
	acc := send // copied before the first reduction
	owned := false
	if r == root {
		copy(recv, send)
		acc, owned = recv, true
	}
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			return x.send(abs(vr-mask), 0, acc)
		}
		c := vr + mask
		if c >= n {
			continue
		}
		if !owned {
			acc, owned = slices.Clone(send), true
		}
		if err := x.recvReduce(abs(c), 0, acc); err != nil {
			return err
		}
	}
	return nil
}

// reduceRabenseifner: fold to a power of two p, reduce-scatter by recursive
// halving (participant i ends with block i of p, fully reduced), then
// gather the blocks to the root's participant along a binomial tree, which
// passes the result to the root if the root was folded away. Pipelined
// (runPipe).
func reduceRabenseifner[T Number](x *xfer[T], send, recv []T, root int) error {
	r := x.t.Rank()
	f := newFold(x.t.Size())
	var acc []T
	if r == root {
		copy(recv, send)
		acc = recv
	} else {
		acc = slices.Clone(send)
	}
	newRoot := f.newRank(root)
	if newRoot < 0 {
		newRoot = f.newRank(root - 1)
	}
	bounds := evenBounds(len(acc), f.p)
	pl := newPlan(piecesFor[T](x.t, bounds), 0)
	pl.foldIn(f, r, len(acc))
	if nr := f.newRank(r); nr >= 0 {
		pl.halving(f, nr, bounds)
		pl.gatherPow2(f, nr, newRoot, bounds)
	}
	switch {
	case r == root && f.newRank(r) < 0:
		pl.step(-1, 0, 0, f.oldRank(newRoot), 0, len(acc), false)
	case r != root && f.newRank(r) == newRoot:
		pl.step(root, 0, len(acc), -1, 0, 0, false)
	}
	return runPipe(x, pl, acc)
}

// gatherPow2 adds to plan pl the gathering of the p participants' blocks
// (participant i holds [bounds[i], bounds[i+1])) to participant newRoot
// along the binomial tree of the recursive-halving partners: at distance
// 1, 2, 4, ... the participant whose bit differs from newRoot's hands its
// range to its partner.
func (pl *plan) gatherPow2(f fold, nr, newRoot int, bounds []int) {
	for mask := 1; mask < f.p; mask <<= 1 {
		pnr := nr ^ mask
		partner := f.oldRank(pnr)
		if (nr^newRoot)&mask != 0 {
			lo := nr &^ (mask - 1)
			pl.step(partner, bounds[lo], bounds[lo+mask], -1, 0, 0, false)
			return
		}
		lo := pnr &^ (mask - 1)
		pl.step(-1, 0, 0, partner, bounds[lo], bounds[lo+mask], false)
	}
}

// Allreduce reduces every rank's buf with op and leaves the result in
// every rank's buf.
func Allreduce[T Number](ctx context.Context, t Transport, buf []T, op Op, algo Algo) error {
	if err := checkOp(CollAllreduce, op); err != nil {
		return err
	}
	a, err := resolve(ctx, CollAllreduce, algo, t.Size(), len(buf)*elemSize[T]())
	if err != nil {
		return err
	}
	x := newXfer[T](ctx, t, op)
	r, n := t.Rank(), t.Size()
	f := newFold(n)
	switch a {
	case RecursiveDoubling:
		err = allreduceRecursiveDoubling(x, f, buf)
	case Rabenseifner:
		err = allreduceRabenseifner(x, f, buf)
	case Ring:
		// Both halves in one pipeline: a piece reduced last goes round
		// again at once.
		bounds := evenBounds(len(buf), n)
		pl := newPlan(piecesFor[T](x.t, bounds), 0)
		pl.ring(r, n, func(v int) int { return v }, bounds, 0, 2*(n-1))
		err = runPipe(x, pl, buf)
	}
	return wrap(CollAllreduce, a, err)
}

// allreduceRecursiveDoubling: fold, then log2(p) exchanges of the whole
// vector with partners at distance 1, 2, 4, ..., each reducing what it
// receives; unfold.
func allreduceRecursiveDoubling[T Number](x *xfer[T], f fold, buf []T) error {
	r := x.t.Rank()
	if err := foldIn(x, f, r, buf); err != nil {
		return err
	}
	if nr := f.newRank(r); nr >= 0 {
		for i, mask := 0, 1; mask < f.p; i, mask = i+1, mask<<1 {
			partner := f.oldRank(nr ^ mask)
			if err := x.sendRecvReduce(partner, stepCore+i, buf, partner, stepCore+i, buf); err != nil {
				return err
			}
		}
	}
	return foldOut(x, f, r, buf)
}

// allreduceRabenseifner: fold, reduce-scatter by recursive halving,
// allgather by recursive doubling, unfold; pipelined (runPipe): every step
// cut into pieces that go on as soon as they have been reduced.
func allreduceRabenseifner[T Number](x *xfer[T], f fold, buf []T) error {
	r := x.t.Rank()
	bounds := evenBounds(len(buf), f.p)
	pl := newPlan(piecesFor[T](x.t, bounds), 0)
	pl.foldIn(f, r, len(buf))
	if nr := f.newRank(r); nr >= 0 {
		pl.halving(f, nr, bounds)
		pl.doubling(f, nr, bounds)
	}
	pl.foldOut(f, r, len(buf))
	return runPipe(x, pl, buf)
}

// ReduceScatter reduces every rank's send (n elements, the same n on every
// rank) with op and leaves elements [r*n/N, (r+1)*n/N) of the result in
// rank r's recv, whose length must be that block's.
func ReduceScatter[T Number](ctx context.Context, t Transport, send, recv []T, op Op, algo Algo) error {
	r, n := t.Rank(), t.Size()
	if err := checkOp(CollReduceScatter, op); err != nil {
		return err
	}
	bounds := evenBounds(len(send), n)
	if err := checkLen(CollReduceScatter, "recv", len(recv), bounds[r+1]-bounds[r]); err != nil {
		return err
	}
	a, err := resolve(ctx, CollReduceScatter, algo, n, len(send)*elemSize[T]())
	if err != nil {
		return err
	}
	x := newXfer[T](ctx, t, op)
	switch a {
	case RecursiveHalving:
		err = reduceScatterHalving(x, send, recv, bounds)
	case Pairwise:
		err = reduceScatterPairwise(x, send, recv, bounds)
	case Ring:
		acc := slices.Clone(send)
		id := func(v int) int { return v }
		if err = ringReduceScatter(x, r, n, id, acc, bounds, 0); err == nil {
			copy(recv, acc[bounds[r]:bounds[r+1]])
		}
	}
	return wrap(CollReduceScatter, a, err)
}

// reduceScatterHalving: fold (an even rank below 2*rem then stands for its
// odd neighbour's block too), recursive halving over the participants'
// blocks, then the even ranks send the odd ones their block. Pipelined
// (runPipe).
func reduceScatterHalving[T Number](x *xfer[T], send, recv []T, bounds []int) error {
	r := x.t.Rank()
	f := newFold(x.t.Size())
	acc := slices.Clone(send)
	pl := newPlan(piecesFor[T](x.t, bounds), 0)
	pl.foldIn(f, r, len(acc))
	if nr := f.newRank(r); nr >= 0 {
		pl.halving(f, nr, f.superBounds(bounds))
	}
	if r < 2*f.rem {
		if r%2 == 1 {
			pl.step(-1, 0, 0, r-1, bounds[r], bounds[r+1], false)
		} else {
			pl.step(r+1, bounds[r+1], bounds[r+2], -1, 0, 0, false)
		}
	}
	if err := runPipe(x, pl, acc); err != nil {
		return err
	}
	copy(recv, acc[bounds[r]:bounds[r+1]])
	return nil
}

// reduceScatterPairwise: in step i rank r sends rank r+i its block and
// reduces into its own the block rank r-i sends it; N-1 steps.
func reduceScatterPairwise[T Number](x *xfer[T], send, recv []T, bounds []int) error {
	r, n := x.t.Rank(), x.t.Size()
	copy(recv, send[bounds[r]:bounds[r+1]])
	for i := 1; i < n; i++ {
		dst, src := mod(r+i, n), mod(r-i, n)
		if err := x.sendRecvReduce(dst, i, send[bounds[dst]:bounds[dst+1]], src, i, recv); err != nil {
			return err
		}
	}
	return nil
}
