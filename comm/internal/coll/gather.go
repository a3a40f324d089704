package coll

import (
	"context"
	"fmt"
)

// uniformBounds returns the n+1 offsets of n blocks of k elements.
func uniformBounds(k, n int) []int {
	b := make([]int, n+1)
	for i := range b {
		b[i] = i * k
	}
	return b
}

// Allgather gathers every rank's send (the same length k on every rank)
// into every rank's recv: rank i's block is recv[i*k:(i+1)*k].
func Allgather[T Number](ctx context.Context, t Transport, send, recv []T, algo Algo) error {
	r, n := t.Rank(), t.Size()
	k := len(send)
	if err := checkLen(CollAllgather, "recv", len(recv), n*k); err != nil {
		return err
	}
	a, err := resolve(ctx, CollAllgather, algo, n, k*elemSize[T]())
	if err != nil {
		return err
	}
	x := newXfer[T](ctx, t, Sum)
	switch a {
	case RecursiveDoubling:
		err = allgatherRecursiveDoubling(x, send, recv)
	case Bruck:
		err = allgatherBruck(x, send, recv)
	case Ring:
		copy(recv[r*k:], send)
		err = ringAllgather(x, r, n, func(v int) int { return v }, recv, uniformBounds(k, n), 0)
	}
	return wrap(CollAllgather, a, err)
}

// allgatherRecursiveDoubling: fold (an odd rank below 2*rem sends its block
// to the even one below it), recursive doubling over the participants'
// blocks (one or two ranks' blocks each), unfold (the even ranks send the
// odd ones the whole result). Pipelined (runPipe): a piece received goes
// on in the next step at once.
func allgatherRecursiveDoubling[T Number](x *xfer[T], send, recv []T) error {
	r, n := x.t.Rank(), x.t.Size()
	k := len(send)
	f := newFold(n)
	copy(recv[r*k:], send)
	bounds := uniformBounds(k, n)
	pl := newPlan(piecesFor[T](x.t, bounds), 0)
	if r < 2*f.rem {
		if r%2 == 1 {
			pl.step(r-1, r*k, (r+1)*k, -1, 0, 0, false)
		} else {
			pl.step(-1, 0, 0, r+1, (r+1)*k, (r+2)*k, false)
		}
	}
	if nr := f.newRank(r); nr >= 0 {
		pl.doubling(f, nr, f.superBounds(bounds))
	}
	pl.foldOut(f, r, n*k)
	return runPipe(x, pl, recv)
}

// allgatherBruck: in round j every rank sends the blocks it has, up to
// 2^j of them, to rank r-2^j and appends those of rank r+2^j; after
// ceil(log2 N) rounds it holds ranks r, r+1, ..., r-1's blocks in that
// order and rotates them into place.
func allgatherBruck[T Number](x *xfer[T], send, recv []T) error {
	r, n := x.t.Rank(), x.t.Size()
	k := len(send)
	tmp := recv // rank 0's order is already the final one
	if r != 0 {
		tmp = make([]T, n*k)
	}
	copy(tmp, send)
	for j, dist := 0, 1; dist < n; j, dist = j+1, dist<<1 {
		cnt := min(dist, n-dist)
		if err := x.sendRecv(mod(r-dist, n), j, tmp[:cnt*k], mod(r+dist, n), j, tmp[dist*k:(dist+cnt)*k]); err != nil {
			return err
		}
	}
	if r != 0 {
		for i := range n {
			src := (r + i) % n
			copy(recv[src*k:(src+1)*k], tmp[i*k:(i+1)*k])
		}
	}
	return nil
}

// Gather gathers every rank's send (the same length k on every rank) into
// root's recv, rank i's block at recv[i*k:(i+1)*k]. recv is only used at
// root.
func Gather[T Number](ctx context.Context, t Transport, send, recv []T, root int, algo Algo) error {
	r, n := t.Rank(), t.Size()
	k := len(send)
	if err := checkRoot(CollGather, root, n); err != nil {
		return err
	}
	if r == root {
		if err := checkLen(CollGather, "recv", len(recv), n*k); err != nil {
			return err
		}
	}
	a, err := resolve(ctx, CollGather, algo, n, k*elemSize[T]())
	if err != nil {
		return err
	}
	x := newXfer[T](ctx, t, Sum)
	switch a {
	case Binomial:
		err = gatherBinomial(x, send, recv, root)
	case Linear:
		err = gatherLinear(x, send, recv, root)
	}
	return wrap(CollGather, a, err)
}

// gatherBinomial gathers up a binomial tree: each rank collects its
// subtree's blocks (contiguous in rank order relative to root) and sends
// them to its parent.
func gatherBinomial[T Number](x *xfer[T], send, recv []T, root int) error {
	r, n := x.t.Rank(), x.t.Size()
	k := len(send)
	vr := mod(r-root, n)
	abs := func(v int) int { return (v + root) % n }
	span := min(vr+subtree(vr, n), n) - vr
	var win []T
	switch {
	case root == 0 && r == 0:
		win = recv
	case span == 1:
		win = send // a leaf only sends its own block
	default:
		win = make([]T, span*k)
	}
	copy(win, send)
	if err := binomialGather(x, vr, n, abs, win, uniformBounds(k, n), 0); err != nil {
		return err
	}
	if r == root && root != 0 {
		for v := range n {
			dst := abs(v)
			copy(recv[dst*k:(dst+1)*k], win[v*k:(v+1)*k])
		}
	}
	return nil
}

// gatherLinear: every rank sends its block straight to the root, which
// receives them all at once.
func gatherLinear[T Number](x *xfer[T], send, recv []T, root int) error {
	r, n := x.t.Rank(), x.t.Size()
	k := len(send)
	if r != root {
		return x.send(root, 0, send)
	}
	copy(recv[r*k:], send)
	g := newGroup(x.ctx)
	xg := x.with(g.ctx)
	for src := range n {
		if src != root {
			g.spawn(func(context.Context) error { return xg.recv(src, 0, recv[src*k:(src+1)*k]) })
		}
	}
	return g.wait()
}

// Scatter sends block i of root's send (N blocks of len(recv) elements, the
// same length on every rank) to rank i's recv. send is only used at root.
func Scatter[T Number](ctx context.Context, t Transport, send, recv []T, root int, algo Algo) error {
	r, n := t.Rank(), t.Size()
	k := len(recv)
	if err := checkRoot(CollScatter, root, n); err != nil {
		return err
	}
	if r == root {
		if err := checkLen(CollScatter, "send", len(send), n*k); err != nil {
			return err
		}
	}
	a, err := resolve(ctx, CollScatter, algo, n, k*elemSize[T]())
	if err != nil {
		return err
	}
	x := newXfer[T](ctx, t, Sum)
	switch a {
	case Binomial:
		err = scatterBinomial(x, send, recv, root)
	case Linear:
		err = scatterLinear(x, send, recv, root)
	}
	return wrap(CollScatter, a, err)
}

// scatterBinomial scatters down a binomial tree: each rank receives its
// subtree's blocks from its parent and passes each child its subtree's.
func scatterBinomial[T Number](x *xfer[T], send, recv []T, root int) error {
	r, n := x.t.Rank(), x.t.Size()
	k := len(recv)
	vr := mod(r-root, n)
	abs := func(v int) int { return (v + root) % n }
	span := min(vr+subtree(vr, n), n) - vr
	var win []T
	switch {
	case r == root && root == 0:
		win = send
	case r == root:
		win = make([]T, n*k)
		for v := range n {
			src := abs(v)
			copy(win[v*k:(v+1)*k], send[src*k:(src+1)*k])
		}
	case span == 1:
		win = recv
	default:
		win = make([]T, span*k)
	}
	if err := binomialScatter(x, vr, n, abs, win, uniformBounds(k, n), 0); err != nil {
		return err
	}
	copy(recv, win[:k])
	return nil
}

// scatterLinear: the root sends every rank its block at once.
func scatterLinear[T Number](x *xfer[T], send, recv []T, root int) error {
	r, n := x.t.Rank(), x.t.Size()
	k := len(recv)
	if r != root {
		return x.recv(root, 0, recv)
	}
	g := newGroup(x.ctx)
	xg := x.with(g.ctx)
	for dst := range n {
		if dst != root {
			g.spawn(func(context.Context) error { return xg.send(dst, 0, send[dst*k:(dst+1)*k]) })
		}
	}
	copy(recv, send[r*k:(r+1)*k])
	return g.wait()
}

// Alltoall sends block j of every rank's send to rank j: with k =
// len(send)/N, rank r's send[j*k:(j+1)*k] lands in rank j's
// recv[r*k:(r+1)*k]. len(send) == len(recv), a multiple of N, the same on
// every rank; send and recv must not overlap.
func Alltoall[T Number](ctx context.Context, t Transport, send, recv []T, algo Algo) error {
	n := t.Size()
	if len(send)%n != 0 {
		return fmt.Errorf("coll: %s: len(send) = %d is not a multiple of the %d ranks", CollAlltoall, len(send), n)
	}
	if err := checkLen(CollAlltoall, "recv", len(recv), len(send)); err != nil {
		return err
	}
	k := len(send) / n
	a, err := resolve(ctx, CollAlltoall, algo, n, k*elemSize[T]())
	if err != nil {
		return err
	}
	x := newXfer[T](ctx, t, Sum)
	switch a {
	case Bruck:
		err = alltoallBruck(x, send, recv, k)
	case Linear:
		err = alltoallLinear(x, send, recv, k)
	case Pairwise:
		err = alltoallPairwise(x, send, recv, k)
	}
	return wrap(CollAlltoall, a, err)
}

// alltoallBruck: rotate the blocks so that slot i holds the block for rank
// r+i; in round j send the slots with bit j set to rank r+2^j and take
// those of rank r-2^j in their place; after ceil(log2 N) rounds slot i
// holds rank r-i's block for r. Each round moves about half the data.
func alltoallBruck[T Number](x *xfer[T], send, recv []T, k int) error {
	r, n := x.t.Rank(), x.t.Size()
	tmp := make([]T, n*k)
	for i := range n {
		src := (r + i) % n
		copy(tmp[i*k:(i+1)*k], send[src*k:(src+1)*k])
	}
	out := make([]T, 0, (n/2+1)*k)
	in := make([]T, (n/2+1)*k)
	for j, dist := 0, 1; dist < n; j, dist = j+1, dist<<1 {
		out = out[:0]
		for i := dist; i < n; i++ {
			if i&dist != 0 {
				out = append(out, tmp[i*k:(i+1)*k]...)
			}
		}
		in := in[:len(out)]
		if err := x.sendRecv(mod(r+dist, n), j, out, mod(r-dist, n), j, in); err != nil {
			return err
		}
		for i, o := dist, 0; i < n; i++ {
			if i&dist != 0 {
				copy(tmp[i*k:(i+1)*k], in[o:o+k])
				o += k
			}
		}
	}
	for i := range n {
		dst := mod(r-i, n)
		copy(recv[dst*k:(dst+1)*k], tmp[i*k:(i+1)*k])
	}
	return nil
}

// alltoallLinear posts every send and receive at once.
func alltoallLinear[T Number](x *xfer[T], send, recv []T, k int) error {
	r, n := x.t.Rank(), x.t.Size()
	copy(recv[r*k:(r+1)*k], send[r*k:(r+1)*k])
	g := newGroup(x.ctx)
	for j := range n {
		if j == r {
			continue
		}
		xs, xr := x.with(g.ctx), x.with(g.ctx)
		g.spawn(func(context.Context) error { return xs.send(j, 0, send[j*k:(j+1)*k]) })
		g.spawn(func(context.Context) error { return xr.recv(j, 0, recv[j*k:(j+1)*k]) })
	}
	return g.wait()
}

// alltoallPairwise: N-1 steps, each a send to one rank and a receive from
// another: partners r^i when N is a power of two, else r+i and r-i.
func alltoallPairwise[T Number](x *xfer[T], send, recv []T, k int) error {
	r, n := x.t.Rank(), x.t.Size()
	copy(recv[r*k:(r+1)*k], send[r*k:(r+1)*k])
	for i := 1; i < n; i++ {
		dst, src := mod(r+i, n), mod(r-i, n)
		if isPow2(n) {
			dst, src = r^i, r^i
		}
		if err := x.sendRecv(dst, i, send[dst*k:(dst+1)*k], src, i, recv[src*k:(src+1)*k]); err != nil {
			return err
		}
	}
	return nil
}

// Alltoallv is Alltoall with a count per pair: rank r's
// send[sdispls[j]:sdispls[j]+scounts[j]] lands in rank j's
// recv[rdispls[r]:rdispls[r]+rcounts[r]], so rank j's rcounts[r] must equal
// rank r's scounts[j] (a receive of another length fails the call). The
// count and displacement slices have N entries; the blocks must lie inside
// their buffers, and send and recv must not overlap. It runs pairwise (N-1
// steps, partners r+i and r-i).
func Alltoallv[T Number](ctx context.Context, t Transport, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int, algo Algo) error {
	r, n := t.Rank(), t.Size()
	for _, c := range []struct {
		name   string
		counts []int
		displs []int
		buf    int
	}{{"send", scounts, sdispls, len(send)}, {"recv", rcounts, rdispls, len(recv)}} {
		if len(c.counts) != n || len(c.displs) != n {
			return fmt.Errorf("coll: %s: %d %s counts and %d displacements; want %d each", CollAlltoallv, len(c.counts), c.name, len(c.displs), n)
		}
		for j := range n {
			if c.counts[j] < 0 || c.displs[j] < 0 || c.displs[j]+c.counts[j] > c.buf {
				return fmt.Errorf("coll: %s: %s block %d at %d of %d elements outside the %d-element buffer", CollAlltoallv, c.name, j, c.displs[j], c.counts[j], c.buf)
			}
		}
	}
	if scounts[r] != rcounts[r] {
		return fmt.Errorf("coll: %s: this rank sends itself %d elements but receives %d", CollAlltoallv, scounts[r], rcounts[r])
	}
	a, err := resolve(ctx, CollAlltoallv, algo, n, 0)
	if err != nil {
		return err
	}
	x := newXfer[T](ctx, t, Sum)
	block := func(v []T, counts, displs []int, j int) []T { return v[displs[j] : displs[j]+counts[j]] }
	copy(block(recv, rcounts, rdispls, r), block(send, scounts, sdispls, r))
	for i := 1; i < n && err == nil; i++ {
		dst, src := mod(r+i, n), mod(r-i, n)
		err = x.sendRecv(dst, i, block(send, scounts, sdispls, dst), src, i, block(recv, rcounts, rdispls, src))
	}
	return wrap(CollAlltoallv, a, err)
}
