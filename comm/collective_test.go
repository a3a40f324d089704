package comm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/multirail/multirail"
)

// val is rank r's integer-valued input at index i: exact in every type.
func val(r, i int) int64 { return int64((r+1)*(i%7+1) - 3*(i%3)) }

// TestCollectivesOverConnections runs every collective with every one of
// its algorithms forced (and the automatic choice) over real loopback
// connections, against a sequential reference.
func TestCollectivesOverConnections(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprint("n=", n), func(t *testing.T) {
			cs := local(t, n, Config{})
			counts := []int{0, 1, max(0, n-1), n + 3, 70000}
			for _, cl := range []Collective{CollBarrier, CollBcast, CollReduce, CollAllreduce, CollAllgather, CollReduceScatter, CollAlltoall, CollGather, CollScatter} {
				for _, algo := range append([]Algo{AlgoAuto}, Algorithms(cl)...) {
					for _, count := range counts {
						roots := []int{0}
						if n > 1 {
							roots = append(roots, n-1)
						}
						for _, root := range roots {
							each(t, cs, func(ctx context.Context, c *Comm) error {
								return checkColl(ctx, c, cl, algo, count, root)
							})
							if t.Failed() {
								t.Fatalf("%s %s count %d root %d", cl, algo, count, root)
							}
						}
					}
				}
			}
		})
	}
}

// TestPipelinedOverConnections runs the pipelined algorithms over real
// loopback connections on vectors whose blocks are longer than a piece
// (coll.MaxPiece), so that every step is cut into several pieces that
// fill the transport's frames with the communicator's header, on a
// power of two and, folded, on 3 ranks.
func TestPipelinedOverConnections(t *testing.T) {
	const count = 300000 // int64: blocks of 600 KB on 4 ranks
	for _, n := range []int{3, 4} {
		t.Run(fmt.Sprint("n=", n), func(t *testing.T) {
			cs := local(t, n, Config{})
			call := &collCall{c: cs[0]}
			if f := call.Framing(); f.Segment != multirail.DefaultFrameSize || f.Overhead != headerSize {
				t.Fatalf("framing %+v, want frames of %d and the %d-byte header", f, multirail.DefaultFrameSize, headerSize)
			}
			for _, tc := range []struct {
				cl   Collective
				algo Algo
			}{
				{CollAllreduce, AlgoRabenseifner}, {CollAllreduce, AlgoRing}, {CollReduce, AlgoRabenseifner},
				{CollReduceScatter, AlgoRecursiveHalving}, {CollReduceScatter, AlgoRing},
				{CollAllgather, AlgoRecursiveDoubling}, {CollAllgather, AlgoRing}, {CollBcast, AlgoScatterAllgather},
			} {
				each(t, cs, func(ctx context.Context, c *Comm) error {
					return checkColl(ctx, c, tc.cl, tc.algo, count, n-1)
				})
				if t.Failed() {
					t.Fatalf("%s %s", tc.cl, tc.algo)
				}
			}
		})
	}
}

func checkColl(ctx context.Context, c *Comm, cl Collective, algo Algo, count, root int) error {
	n, r := c.Size(), c.Rank()
	opt := WithAlgo(algo)
	in := func(rank, k int) []int64 {
		x := make([]int64, k)
		for i := range x {
			x[i] = val(rank, i)
		}
		return x
	}
	sum := func(k int) []int64 {
		s := make([]int64, k)
		for q := range n {
			for i, v := range in(q, k) {
				s[i] += v
			}
		}
		return s
	}
	cmp := func(got, want []int64) error {
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s %s count %d root %d: got %v, want %v", cl, algo, count, root, head(got), head(want))
		}
		return nil
	}
	switch cl {
	case CollBarrier:
		return c.Barrier(ctx, opt)
	case CollBcast:
		x := make([]int64, count)
		if r == root {
			x = in(root, count)
		}
		if err := Bcast(ctx, c, x, root, opt); err != nil {
			return err
		}
		return cmp(x, in(root, count))
	case CollReduce:
		var out []int64
		if r == root {
			out = make([]int64, count)
		}
		if err := Reduce(ctx, c, in(r, count), out, Sum, root, opt); err != nil {
			return err
		}
		if r == root {
			return cmp(out, sum(count))
		}
	case CollAllreduce:
		x := in(r, count)
		if err := Allreduce(ctx, c, x, Sum, opt); err != nil {
			return err
		}
		return cmp(x, sum(count))
	case CollAllgather:
		out := make([]int64, n*count)
		if err := Allgather(ctx, c, in(r, count), out, opt); err != nil {
			return err
		}
		var want []int64
		for q := range n {
			want = append(want, in(q, count)...)
		}
		return cmp(out, want)
	case CollReduceScatter:
		lo, hi := ReduceScatterCounts(count, n, r)
		out := make([]int64, hi-lo)
		if err := ReduceScatter(ctx, c, in(r, count), out, Sum, opt); err != nil {
			return err
		}
		return cmp(out, sum(count)[lo:hi])
	case CollAlltoall:
		k := count/n + 1
		send := make([]int64, n*k)
		for i := range send {
			send[i] = int64(r*1000000 + i)
		}
		out := make([]int64, n*k)
		if err := Alltoall(ctx, c, send, out, opt); err != nil {
			return err
		}
		want := make([]int64, n*k)
		for q := range n {
			for j := range k {
				want[q*k+j] = int64(q*1000000 + r*k + j)
			}
		}
		return cmp(out, want)
	case CollGather:
		var out []int64
		if r == root {
			out = make([]int64, n*count)
		}
		if err := Gather(ctx, c, in(r, count), out, root, opt); err != nil {
			return err
		}
		if r == root {
			var want []int64
			for q := range n {
				want = append(want, in(q, count)...)
			}
			return cmp(out, want)
		}
	case CollScatter:
		var send []int64
		if r == root {
			for q := range n {
				send = append(send, in(q, count)...)
			}
		}
		out := make([]int64, count)
		if err := Scatter(ctx, c, send, out, root, opt); err != nil {
			return err
		}
		return cmp(out, in(r, count))
	default:
		return errors.New("unknown collective")
	}
	return nil
}

func head(x []int64) []int64 {
	if len(x) > 8 {
		return x[:8]
	}
	return x
}
