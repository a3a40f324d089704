package coll

import (
	"context"
	"fmt"
)

// wrap prefixes a collective's error with what was running.
func wrap(c Collective, a Algo, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("coll: %s %s: %w", c, a, err)
}

// checkRoot reports a root outside [0, size).
func checkRoot(c Collective, root, size int) error {
	if root < 0 || root >= size {
		return fmt.Errorf("coll: %s: root %d out of range [0, %d)", c, root, size)
	}
	return nil
}

// checkLen reports a buffer whose length is not want.
func checkLen(c Collective, name string, got, want int) error {
	if got != want {
		return fmt.Errorf("coll: %s: len(%s) = %d, want %d", c, name, got, want)
	}
	return nil
}

// Barrier returns once every rank has entered it.
func Barrier(ctx context.Context, t Transport, algo Algo) error {
	a, err := resolve(ctx, CollBarrier, algo, t.Size(), 0)
	if err != nil {
		return err
	}
	x := newXfer[int32](ctx, t, Sum)
	switch a {
	case Dissemination:
		err = barrierDissemination(x)
	case RecursiveDoubling:
		err = barrierRecursiveDoubling(x)
	}
	return wrap(CollBarrier, a, err)
}

// barrierDissemination: in round k every rank signals rank r+2^k and waits
// for rank r-2^k; ceil(log2 N) rounds for any N.
func barrierDissemination(x *xfer[int32]) error {
	r, n := x.t.Rank(), x.t.Size()
	for k, dist := 0, 1; dist < n; k, dist = k+1, dist<<1 {
		if err := x.sendRecv(mod(r+dist, n), k, nil, mod(r-dist, n), k, nil); err != nil {
			return err
		}
	}
	return nil
}

// barrierRecursiveDoubling: fold to a power of two, pairwise exchanges
// with partners r^2^k, unfold.
func barrierRecursiveDoubling(x *xfer[int32]) error {
	r := x.t.Rank()
	f := newFold(x.t.Size())
	if err := foldIn(x, f, r, nil); err != nil {
		return err
	}
	if nr := f.newRank(r); nr >= 0 {
		for i, mask := 0, 1; mask < f.p; i, mask = i+1, mask<<1 {
			partner := f.oldRank(nr ^ mask)
			if err := x.sendRecv(partner, stepCore+i, nil, partner, stepCore+i, nil); err != nil {
				return err
			}
		}
	}
	return foldOut(x, f, r, nil)
}
