package coll

import "context"

// Bcast copies root's buf into every rank's buf. Every rank passes a buf of
// the same length.
func Bcast[T Number](ctx context.Context, t Transport, buf []T, root int, algo Algo) error {
	n := t.Size()
	if err := checkRoot(CollBcast, root, n); err != nil {
		return err
	}
	a, err := resolve(ctx, CollBcast, algo, n, len(buf)*elemSize[T]())
	if err != nil {
		return err
	}
	x := newXfer[T](ctx, t, Sum)
	vr := mod(t.Rank()-root, n)
	abs := func(v int) int { return (v + root) % n }
	switch a {
	case Binomial:
		err = bcastBinomial(x, vr, abs, buf)
	case ScatterAllgather:
		bounds := evenBounds(len(buf), n)
		if err = binomialScatter(x, vr, n, abs, buf[bounds[vr]:], bounds, 0); err == nil {
			err = ringAllgather(x, vr, n, abs, buf, bounds, 1)
		}
	case Linear:
		err = bcastLinear(x, root, buf)
	}
	return wrap(CollBcast, a, err)
}

// bcastBinomial sends the whole buffer down a binomial tree: each rank
// receives it from its parent, then sends it to its children.
func bcastBinomial[T Number](x *xfer[T], vr int, abs func(int) int, buf []T) error {
	n := x.t.Size()
	m := subtree(vr, n)
	if vr != 0 {
		if err := x.recv(abs(vr-m), 0, buf); err != nil {
			return err
		}
	}
	for mask := m >> 1; mask > 0; mask >>= 1 {
		if c := vr + mask; c < n {
			if err := x.send(abs(c), 0, buf); err != nil {
				return err
			}
		}
	}
	return nil
}

// bcastLinear: the root sends to every other rank at once.
func bcastLinear[T Number](x *xfer[T], root int, buf []T) error {
	r, n := x.t.Rank(), x.t.Size()
	if r != root {
		return x.recv(root, 0, buf)
	}
	g := newGroup(x.ctx)
	xg := x.with(g.ctx)
	for dst := range n {
		if dst != root {
			g.spawn(func(context.Context) error { return xg.send(dst, 0, buf) })
		}
	}
	return g.wait()
}
